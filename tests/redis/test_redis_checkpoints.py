"""Every checkpoint is staged (``SET`` a staging key, then a fenced ``RENAME``, in one round
trip): the frontier lands whole and without a TTL, a stale one leaves nothing behind, and a
restarted server that has forgotten the script is handled in the same call."""

from __future__ import annotations

import asyncio

import pytest

from agentrun import Backend
from agentrun._errors import StaleFenceError, StoreRefusedError
from agentrun.stores._redis._shared import RunKeys
from tests.support.redis_server import RedisServer

LARGE = b"L" * (256 * 1024)
SMALL = b"s" * (16 * 1024)
KEYS = RunKeys.of("agentrun", "acme", "big")


def _staged_keys(server: RedisServer) -> list[str]:
    return server.cli("--scan", "--pattern", f"{KEYS.base}staged:*").split()


@pytest.mark.parametrize("payload", [LARGE, SMALL], ids=["large", "small"])
async def test_a_checkpoint_lands_whole_and_never_expires(
    payload: bytes, own_server: RedisServer, own_backend: Backend
) -> None:
    await own_backend.checkpoints.put("acme", "big", payload, fence=3)
    assert await own_backend.checkpoints.latest("acme", "big") == payload
    assert own_server.cli("ttl", KEYS.checkpoint).strip() == "-1"
    assert _staged_keys(own_server) == []


async def test_a_stale_large_checkpoint_leaves_nothing_behind(
    own_server: RedisServer, own_backend: Backend
) -> None:
    await own_backend.checkpoints.put("acme", "big", SMALL, fence=5)
    with pytest.raises(StaleFenceError) as caught:
        await own_backend.checkpoints.put("acme", "big", LARGE, fence=4)
    assert (caught.value.fence, caught.value.current) == (4, 5)
    assert await own_backend.checkpoints.latest("acme", "big") == SMALL
    assert _staged_keys(own_server) == []


async def test_a_server_that_forgot_the_script_still_takes_a_large_checkpoint(
    own_server: RedisServer, own_backend: Backend
) -> None:
    await own_backend.checkpoints.put("acme", "big", LARGE, fence=1)
    await asyncio.to_thread(own_server.restart)
    await own_backend.checkpoints.put("acme", "big", LARGE[::-1], fence=1)
    assert await own_backend.checkpoints.latest("acme", "big") == LARGE[::-1]
    assert _staged_keys(own_server) == []


async def test_a_write_the_server_refuses_is_refused_and_leaves_the_last_frontier(
    own_server: RedisServer, own_backend: Backend
) -> None:
    """A server out of memory refuses both commands of a put: the caller gets a refusal (not
    retryable: the same put is refused until memory is freed), the previous frontier stays,
    nothing is left staged, and the next put lands once there is room."""
    await own_backend.checkpoints.put("acme", "big", SMALL, fence=1)
    own_server.cli("config", "set", "maxmemory-policy", "noeviction")
    own_server.cli("config", "set", "maxmemory", "1")
    try:
        with pytest.raises(StoreRefusedError, match="maxmemory") as refused:
            await own_backend.checkpoints.put("acme", "big", LARGE, fence=1)
        assert not refused.value.retryable
    finally:
        own_server.cli("config", "set", "maxmemory", "0")
    assert await own_backend.checkpoints.latest("acme", "big") == SMALL
    await own_backend.checkpoints.put("acme", "big", LARGE, fence=1)
    assert await own_backend.checkpoints.latest("acme", "big") == LARGE
    assert await own_backend.leases.held("acme", "big") is None
    assert _staged_keys(own_server) == []
