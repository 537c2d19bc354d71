"""A real Redis taken away mid-run: stopped, frozen, restarted; and payloads refused before they
are sent, and records that cannot be read.

What must hold: a checkpoint that cannot be written goes into ``Checkpointer.last_error`` and the
run goes on; every other store call raises ``StoreUnavailableError`` (retryable) within the
socket timeout rather than hanging; the first write once the server is back succeeds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from agentrun import Backend, open_backend
from agentrun._checkpointing import Checkpointer
from agentrun._errors import (
    AgentRunError,
    CheckpointTooLargeError,
    StoreUnavailableError,
    UnreadableRecordError,
)
from agentrun._leases import RunLease
from agentrun.stores._redis import SOCKET_TIMEOUT_S
from agentrun.stores._redis._shared import RunKeys
from tests.support.frontiers import frontier
from tests.support.redis_server import RedisServer

LEASE = RunLease(tenant="acme", run_id="run-1", holder="w", fence=7, remaining=30)
Operation = Callable[[Backend], Awaitable[object]]
OPERATIONS: dict[str, Operation] = {
    "checkpoints.put": lambda b: b.checkpoints.put("acme", "run-1", b"{}", fence=7),
    "checkpoints.put staged": lambda b: b.checkpoints.put("acme", "run-1", b"x" * 10**6, fence=7),
    "checkpoints.latest": lambda b: b.checkpoints.latest("acme", "run-1"),
    "checkpoints.forget": lambda b: b.checkpoints.forget("acme", "run-1"),
    "leases.acquire": lambda b: b.leases.acquire("acme", "run-1", "w", ttl=30),
    "leases.renew": lambda b: b.leases.renew(LEASE, ttl=30),
    "leases.release": lambda b: b.leases.release(LEASE),
    "leases.held": lambda b: b.leases.held("acme", "run-1"),
    "idempotency.begin": lambda b: b.idempotency.begin("acme", "run-1", "k", holder="w", fence=7),
    "idempotency.record": lambda b: b.idempotency.record(
        "acme", "run-1", "k", "done", holder="w", fence=7
    ),
    "idempotency.abandon": lambda b: b.idempotency.abandon(
        "acme", "run-1", "k", holder="w", fence=7
    ),
    "idempotency.read": lambda b: b.idempotency.read("acme", "run-1", "k"),
    "idempotency.settle": lambda b: b.idempotency.settle("acme", "run-1", "k", None, by="alice"),
    "idempotency.forget": lambda b: b.idempotency.forget("acme", "run-1"),
    "history.put": lambda b: b.history.put("acme", "run-1", b"segment", fence=7),
    "history.fetch": lambda b: b.history.fetch("acme", "run-1", "sha256:00"),
    "history.forget": lambda b: b.history.forget("acme", "run-1"),
    "ledger.charge": lambda b: b.ledger.charge("acme", "run-1", "c", 1, budget=None, fence=7),
    "ledger.spent": lambda b: b.ledger.spent("acme", "run-1"),
    "ledger.forget": lambda b: b.ledger.forget("acme", "run-1"),
}


async def test_a_checkpoint_write_fails_into_last_error_and_the_next_one_lands(
    own_server: RedisServer, own_backend: Backend
) -> None:
    checkpointer = Checkpointer(own_backend.checkpoints)
    lease = await own_backend.leases.acquire("acme", "run-1", "w", ttl=30)
    assert await checkpointer.write(frontier(fence=lease.fence, iteration=1)) is not None

    await asyncio.to_thread(own_server.stop)
    assert await checkpointer.write(frontier(fence=lease.fence, iteration=2)) is None
    assert isinstance(checkpointer.last_error, StoreUnavailableError)
    assert checkpointer.last_error.retryable

    await asyncio.to_thread(own_server.start)
    receipt = await checkpointer.write(frontier(fence=lease.fence, iteration=3))
    assert receipt is not None
    assert receipt.iteration == 3
    assert checkpointer.last_error is None
    stored = await checkpointer.latest("acme", "run-1")
    assert stored is not None
    assert stored.iteration == 3


async def _answer(call: Awaitable[object]) -> object:
    """What the store answered: a value, or the kit's error (a lease lost, a stale fence...)."""
    try:
        return await call
    except AgentRunError as error:
        return error


@pytest.mark.parametrize("name", OPERATIONS)
async def test_every_call_to_a_stopped_server_raises_a_retryable_error(
    name: str, own_server: RedisServer, own_backend: Backend
) -> None:
    await own_backend.leases.held("acme", "run-1")
    await asyncio.to_thread(own_server.stop)
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as caught:
        await OPERATIONS[name](own_backend)
    assert caught.value.retryable
    assert time.monotonic() - started < SOCKET_TIMEOUT_S
    await asyncio.to_thread(own_server.start)
    answer = await _answer(OPERATIONS[name](own_backend))
    assert not isinstance(answer, StoreUnavailableError), "the server is back"


async def test_a_frozen_server_fails_within_the_socket_timeout(
    own_server: RedisServer, own_backend: Backend
) -> None:
    checkpointer = Checkpointer(own_backend.checkpoints)
    await own_backend.leases.held("acme", "run-1")
    own_server.pause()
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as caught:
            await own_backend.idempotency.begin("acme", "run-1", "k", holder="w", fence=1)
        assert "Timeout" in str(caught.value)
        assert await checkpointer.write(frontier(fence=1, iteration=1)) is None
        assert isinstance(checkpointer.last_error, StoreUnavailableError)
        assert time.monotonic() - started < 2 * SOCKET_TIMEOUT_S + 1.5
    finally:
        own_server.resume()
    assert await checkpointer.write(frontier(fence=1, iteration=2)) is not None


def _calls(server: RedisServer) -> dict[str, int]:
    """Calls per command since the last ``CONFIG RESETSTAT``, not counting INFO itself."""
    calls: dict[str, int] = {}
    for line in server.cli("info", "commandstats").splitlines():
        if line.startswith("cmdstat_") and not line.startswith("cmdstat_info:"):
            name, stats = line.removeprefix("cmdstat_").split(":", 1)
            calls[name] = int(stats.split(",")[0].removeprefix("calls="))
    return calls


async def test_an_oversized_checkpoint_is_refused_before_anything_is_sent(
    own_server: RedisServer,
) -> None:
    backend = await open_backend(f"{own_server.url}?max_value_bytes=1000")
    try:
        await backend.leases.held("acme", "run-1")
        own_server.cli("config", "resetstat")
        before = _calls(own_server)
        with pytest.raises(CheckpointTooLargeError) as caught:
            await backend.checkpoints.put("acme", "run-1", b"x" * 1001, fence=1)
        assert not caught.value.retryable
        assert (caught.value.size, caught.value.limit) == (1001, 1000)
        assert _calls(own_server) == before, "a refused payload reached the server"

        await backend.checkpoints.put("acme", "run-1", b"x" * 1000, fence=1)
        assert _calls(own_server) != before, "the counters do not see a put"
        assert await backend.checkpoints.latest("acme", "run-1") == b"x" * 1000
    finally:
        await backend.close()


async def test_records_that_cannot_be_read_name_the_run(
    own_server: RedisServer, own_backend: Backend
) -> None:
    keys = RunKeys.of("agentrun", "acme", "run:{1}")
    own_server.cli("hset", keys.claims, "k", "not json")
    own_server.cli("hset", keys.claims, "j", '{"state": "in_flight", "holder": "w"}')
    own_server.cli("hset", keys.claims, "p", '{"state": "weird", "holder": "w", "fence": "1"}')
    own_server.cli("hset", keys.lease, "holder", "w", "fence", "one", "expires", "soon")
    own_server.cli("set", keys.spent, "lots")
    for call in (
        own_backend.idempotency.read("acme", "run:{1}", "k"),
        own_backend.idempotency.begin("acme", "run:{1}", "j", holder="w", fence=1),
        own_backend.idempotency.read("acme", "run:{1}", "p"),
        own_backend.leases.held("acme", "run:{1}"),
        own_backend.ledger.spent("acme", "run:{1}"),
    ):
        with pytest.raises(UnreadableRecordError, match=r"run 'run:\{1\}' of tenant 'acme'"):
            await call
