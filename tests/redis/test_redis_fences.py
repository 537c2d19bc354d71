"""Fences on Redis: one high-water mark per run shared by all five stores, issued from the
server's clock, so that a restart of a Redis without persistence cannot hand out a fence lower
than one already issued."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from agentrun import Backend
from agentrun._errors import RunLeaseError, StaleFenceError
from agentrun.stores._redis._shared import RunKeys
from tests.support.redis_server import RedisServer


async def _server_micros(server: RedisServer) -> int:
    async with Redis(host="127.0.0.1", port=server.port) as client:
        seconds, micros = await client.time()
        return seconds * 1_000_000 + micros


async def test_a_fence_is_never_below_the_server_clock(
    own_server: RedisServer, own_backend: Backend
) -> None:
    before = await _server_micros(own_server)
    lease = await own_backend.leases.acquire("t", "run", "w1", ttl=30)
    assert lease.fence >= before
    await own_backend.checkpoints.put("t", "run", b"{}", fence=lease.fence + 1000)
    await own_backend.leases.release(lease)
    again = await own_backend.leases.acquire("t", "run", "w2", ttl=30)
    assert again.fence >= lease.fence + 1001


async def test_one_acquisition_raises_the_bar_for_all_five_stores(
    own_backend: Backend,
) -> None:
    backend = own_backend
    await backend.checkpoints.put("t", "run", b"{}", fence=1)
    lease = await backend.leases.acquire("t", "run", "w", ttl=30)
    old = 1
    with pytest.raises(StaleFenceError) as caught:
        await backend.checkpoints.put("t", "run", b"{}", fence=old)
    assert caught.value.current == lease.fence
    with pytest.raises(StaleFenceError):
        await backend.idempotency.begin("t", "run", "k", holder="w", fence=old)
    with pytest.raises(StaleFenceError):
        await backend.history.put("t", "run", b"s", fence=old)
    with pytest.raises(StaleFenceError):
        await backend.ledger.charge("t", "run", "c", 1, budget=None, fence=old)
    await backend.checkpoints.put("t", "run", b"{}", fence=lease.fence)
    assert (await backend.idempotency.begin("t", "run", "k", holder="w", fence=lease.fence)).won
    await backend.history.put("t", "run", b"s", fence=lease.fence)
    assert await backend.ledger.charge("t", "run", "c", 1, budget=None, fence=lease.fence) == 1


async def test_a_superseded_holder_stays_refused_across_a_restart_that_forgot_everything(
    own_server: RedisServer, own_backend: Backend
) -> None:
    backend = own_backend
    stale = await backend.leases.acquire("acme", "run-1", "worker-a", ttl=30)
    await backend.checkpoints.put("acme", "run-1", b'{"by": "a"}', fence=stale.fence)

    await asyncio.to_thread(own_server.restart)
    fence_key = RunKeys.of("agentrun", "acme", "run-1").fence
    assert own_server.cli("exists", fence_key).strip() == "0", "the restart kept the fence"
    assert await backend.checkpoints.latest("acme", "run-1") is None
    assert await backend.leases.held("acme", "run-1") is None

    fresh = await backend.leases.acquire("acme", "run-1", "worker-b", ttl=30)
    assert stale.superseded_by(fresh), "a counter would have restarted at 1"
    with pytest.raises(StaleFenceError) as caught:
        await backend.checkpoints.put("acme", "run-1", b'{"by": "a"}', fence=stale.fence)
    assert (caught.value.fence, caught.value.current) == (stale.fence, fresh.fence)
    with pytest.raises(StaleFenceError):
        await backend.idempotency.begin("acme", "run-1", "k", holder="worker-a", fence=stale.fence)
    with pytest.raises(StaleFenceError):
        await backend.ledger.charge("acme", "run-1", "c", 5, budget=None, fence=stale.fence)
    with pytest.raises(RunLeaseError) as lost:
        await backend.leases.renew(stale, ttl=30)
    assert lost.value.holder == "worker-b"

    await backend.checkpoints.put("acme", "run-1", b'{"by": "b"}', fence=fresh.fence)
    assert await backend.checkpoints.latest("acme", "run-1") == b'{"by": "b"}'
