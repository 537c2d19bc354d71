"""A Redis that may evict keys is refused when the stores are opened, before any run is in it.

An evicted fence key, claim or checkpoint is indistinguishable from one never written: a call made
twice, a run started over. ``open_backend`` reads ``maxmemory_policy`` (``INFO memory``) from the
server, or from every primary of a Cluster, and accepts only ``noeviction``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrun import open_backend
from agentrun._errors import ConfigurationError
from tests.support.redis_server import RedisClusterServers, RedisServer, redis_server

EVICTING = ("allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-ttl")


@pytest.mark.parametrize("policy", EVICTING)
async def test_a_server_that_may_evict_is_refused(tmp_path: Path, policy: str) -> None:
    with redis_server(tmp_path) as server:
        server.cli("config", "set", "maxmemory-policy", policy)
        server.cli("config", "set", "requirepass", "s3cret")  # the URL's password stays unsaid
        with pytest.raises(ConfigurationError) as refused:
            await open_backend(f"redis://:s3cret@127.0.0.1:{server.port}/0")
    message = str(refused.value)
    assert f"Redis at 127.0.0.1:{server.port} runs maxmemory-policy {policy}" in message
    assert "Set maxmemory-policy noeviction" in message
    assert "s3cret" not in message


async def test_noeviction_is_accepted(single_server: RedisServer) -> None:
    async with await open_backend(single_server.url) as backend:
        assert await backend.checkpoints.latest("t", "r") is None


async def test_one_evicting_primary_of_a_cluster_is_enough_to_refuse(
    cluster_servers: RedisClusterServers,
) -> None:
    async with await open_backend(cluster_servers.url):
        pass
    last = cluster_servers.nodes[-1]
    last.cli("config", "set", "maxmemory-policy", "volatile-lru")
    try:
        with pytest.raises(
            ConfigurationError, match=f"{last.port} runs maxmemory-policy volatile-lru"
        ):
            await open_backend(cluster_servers.url)
    finally:
        last.cli("config", "set", "maxmemory-policy", "noeviction")
