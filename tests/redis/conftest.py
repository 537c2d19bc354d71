"""Fixtures for the Redis backend's tests: a real server and a real three-master Cluster.

Both start once per session (the Cluster takes a couple of seconds to agree on its slots) and
serve every conformance test, which isolate themselves by unique tenants. The tests that stop,
freeze or restart a server get one of their own (``own_server``), so the shared ones never go
away under another test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agentrun import Backend, open_backend
from tests.support.redis_server import (
    RedisClusterServers,
    RedisServer,
    redis_cluster,
    redis_server,
)

TOPOLOGIES = ("single", "cluster")


@pytest.fixture(scope="session")
def single_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis-single")) as server:
        yield server


@pytest.fixture(scope="session")
def cluster_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServers]:
    with redis_cluster(tmp_path_factory.mktemp("redis-cluster")) as cluster:
        yield cluster


@pytest.fixture(params=TOPOLOGIES)
def redis_url(request: pytest.FixtureRequest) -> str:
    """The URL of the shared single server, then of the shared Cluster."""
    if request.param == "single":
        single: RedisServer = request.getfixturevalue("single_server")
        return single.url
    cluster: RedisClusterServers = request.getfixturevalue("cluster_servers")
    return cluster.url


@pytest.fixture
async def backend(redis_url: str) -> AsyncIterator[Backend]:
    """The five stores, opened from the URL through the kit's own dispatcher."""
    async with await open_backend(redis_url) as opened:
        yield opened


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A server only this test uses, free to be stopped, frozen or restarted."""
    with redis_server(tmp_path / "redis") as server:
        yield server


@pytest.fixture
async def own_backend(own_server: RedisServer) -> AsyncIterator[Backend]:
    """The five stores on this test's own server."""
    async with await open_backend(own_server.url) as opened:
        yield opened
