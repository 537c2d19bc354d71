"""The server dies mid-run and comes back: writes fail soft, the rest fail retryable, then recover.

These tests kill their own server (``pg_ctl stop -m immediate``, as a crash would) and start it
again on the same port, so they do not share the session's server with the other tests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator

import pytest

from agentrun._checkpointing import Checkpointer
from agentrun._errors import StoreUnavailableError
from agentrun.stores._postgres import EXPECTED_CHECKPOINT_SCHEMA, open_backend
from tests.support.frontiers import frontier
from tests.support.postgres_server import PostgresServer, postgres_server

FAIL_FAST_S = 2.0
"""How long a call against a dead server may take to fail."""


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    with postgres_server() as started:
        started.create_database("faults")
        started.psql(EXPECTED_CHECKPOINT_SCHEMA, "faults")
        yield started


async def _unavailable(call: Callable[[], Awaitable[object]]) -> float:
    """Seconds ``call`` took to raise a retryable ``StoreUnavailableError``."""
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as caught:
        await call()
    assert caught.value.retryable
    return time.monotonic() - started


async def test_a_server_that_dies_and_comes_back(server: PostgresServer) -> None:
    backend = await open_backend(server.url("faults"))
    try:
        checkpointer = Checkpointer(backend.checkpoints)
        lease = await backend.leases.acquire("acme", "run", "w1", ttl=60)
        await backend.idempotency.begin("acme", "run", "k1", holder="w1", fence=lease.fence)
        assert (
            await checkpointer.write(frontier(run_id="run", iteration=1, fence=lease.fence))
            is not None
        )
        # Fill the pool, so that every one of its connections dies with the server.
        await asyncio.gather(*(backend.leases.held("acme", "run") for _ in range(30)))

        server.stop("immediate")

        started = time.monotonic()
        assert (
            await checkpointer.write(frontier(run_id="run", iteration=2, fence=lease.fence)) is None
        )
        write_failed_in = time.monotonic() - started
        assert isinstance(checkpointer.last_error, StoreUnavailableError)
        assert checkpointer.last_error.retryable
        durations = [
            write_failed_in,
            await _unavailable(lambda: backend.leases.acquire("acme", "run", "w2", ttl=60)),
            await _unavailable(lambda: backend.leases.renew(lease, ttl=60)),
            await _unavailable(lambda: backend.leases.held("acme", "run")),
            await _unavailable(lambda: backend.leases.release(lease)),
            await _unavailable(
                lambda: backend.idempotency.begin(
                    "acme", "run", "k2", holder="w1", fence=lease.fence
                )
            ),
            await _unavailable(
                lambda: backend.idempotency.record(
                    "acme", "run", "k1", "done", holder="w1", fence=lease.fence
                )
            ),
            await _unavailable(lambda: backend.idempotency.read("acme", "run", "k1")),
            await _unavailable(lambda: backend.history.put("acme", "run", b"s", fence=lease.fence)),
            await _unavailable(
                lambda: backend.ledger.charge(
                    "acme", "run", "c1", 1, budget=None, fence=lease.fence
                )
            ),
            await _unavailable(lambda: backend.checkpoints.latest("acme", "run")),
        ]
        assert max(durations) < FAIL_FAST_S, durations
        print(f"calls against the dead server failed in at most {max(durations):.3f}s")

        server.start()

        assert (
            await checkpointer.write(frontier(run_id="run", iteration=3, fence=lease.fence))
            is not None
        )
        assert checkpointer.last_error is None
        latest = await checkpointer.latest("acme", "run")
        assert latest is not None
        assert latest.iteration == 3
        renewed = await backend.leases.renew(lease, ttl=60)
        assert renewed.fence == lease.fence
        await backend.idempotency.record(
            "acme", "run", "k1", "done", holder="w1", fence=lease.fence
        )
        record = await backend.idempotency.read("acme", "run", "k1")
        assert record is not None
        assert record.outcome == "done"
    finally:
        await backend.close()


async def test_opening_a_backend_on_a_dead_server_is_retryable(server: PostgresServer) -> None:
    server.stop("immediate")
    try:
        await _unavailable(lambda: open_backend(server.url("faults")))
    finally:
        server.start()
    backend = await open_backend(server.url("faults"))
    await backend.close()
