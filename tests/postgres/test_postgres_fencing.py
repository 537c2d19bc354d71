"""One fence row per run shared by all five stores, raced for real on a real server."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from agentrun import Backend
from agentrun._checkpointing import Checkpointer
from agentrun._errors import (
    BudgetExceededError,
    CheckpointFormatError,
    RunLeaseError,
    StaleFenceError,
)
from agentrun._messages import Message
from tests.support.frontiers import frontier


async def test_an_acquisition_raises_the_fence_of_every_store(
    backend: Backend, tenant: str
) -> None:
    await backend.checkpoints.put(tenant, "run", b'{"format_version": 1}', fence=5)
    lease = await backend.leases.acquire(tenant, "run", "w1", ttl=30)
    assert lease.fence == 6
    stale = lease.fence - 1
    with pytest.raises(StaleFenceError) as caught:
        await backend.checkpoints.put(tenant, "run", b'{"format_version": 1}', fence=stale)
    assert (caught.value.fence, caught.value.current) == (stale, lease.fence)
    with pytest.raises(StaleFenceError):
        await backend.idempotency.begin(tenant, "run", "k", holder="old", fence=stale)
    with pytest.raises(StaleFenceError):
        await backend.history.put(tenant, "run", b"segment", fence=stale)
    with pytest.raises(StaleFenceError):
        await backend.ledger.charge(tenant, "run", "c1", 1, budget=None, fence=stale)
    assert await backend.ledger.spent(tenant, "run") == 0
    assert (await backend.idempotency.begin(tenant, "run", "k", holder="w1", fence=lease.fence)).won
    await backend.history.put(tenant, "run", b"segment", fence=lease.fence)
    assert await backend.ledger.charge(tenant, "run", "c1", 1, budget=None, fence=lease.fence) == 1


async def test_a_refused_acquisition_leaves_the_holders_fence_alone(
    backend: Backend, tenant: str
) -> None:
    lease = await backend.leases.acquire(tenant, "run", "w1", ttl=30)
    for _ in range(3):
        with pytest.raises(RunLeaseError):
            await backend.leases.acquire(tenant, "run", "w2", ttl=30)
    await backend.checkpoints.put(tenant, "run", b'{"format_version": 1}', fence=lease.fence)


async def test_twenty_racing_for_a_lapsed_lease_yield_one_holder(
    backend: Backend, tenant: str
) -> None:
    old = await backend.leases.acquire(tenant, "run", "old", ttl=0.3)
    await asyncio.sleep(0.5)
    results = await asyncio.gather(
        *(backend.leases.acquire(tenant, "run", f"w{i}", ttl=30) for i in range(20)),
        return_exceptions=True,
    )
    winners = [r for r in results if not isinstance(r, BaseException)]
    assert len(winners) == 1
    losers = [r for r in results if isinstance(r, BaseException)]
    assert all(isinstance(r, RunLeaseError) for r in losers)
    assert {r.holder for r in losers if isinstance(r, RunLeaseError)} == {winners[0].holder}
    assert {r.fence for r in losers if isinstance(r, RunLeaseError)} == {winners[0].fence}
    assert winners[0].fence == old.fence + 1
    with pytest.raises(StaleFenceError):
        await backend.checkpoints.put(tenant, "run", b'{"format_version": 1}', fence=old.fence)


async def _until_blocked_by(postgres_url: str, pid: int) -> None:
    """Return once some statement waits on a lock held by backend ``pid``."""
    watcher = await asyncpg.connect(postgres_url)
    try:
        for _ in range(500):
            if await watcher.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", pid
            ):
                return
            await asyncio.sleep(0.01)
        pytest.fail("the write never waited on the fence row")
    finally:
        await watcher.close()


async def test_a_write_racing_the_raise_that_supersedes_it_is_refused(
    backend: Backend, postgres_url: str, tenant: str
) -> None:
    """READ COMMITTED: the write's snapshot still sees its own fence as the mark; the mark it is
    judged by is the one after it waited for the fence row's lock, which the raise committed."""
    lease = await backend.leases.acquire(tenant, "run", "w1", ttl=30)
    await backend.checkpoints.put(tenant, "run", b'{"format_version": 1}', fence=lease.fence)
    raiser = await asyncpg.connect(postgres_url)
    try:
        transaction = raiser.transaction()
        await transaction.start()
        await raiser.execute(
            "UPDATE adk_run_fences SET fence = fence + 1 WHERE tenant = $1 AND run_id = 'run'",
            tenant,
        )
        write = asyncio.create_task(
            backend.checkpoints.put(tenant, "run", b'{"format_version": 2}', fence=lease.fence)
        )
        await _until_blocked_by(postgres_url, raiser.get_server_pid())
        await transaction.commit()
        with pytest.raises(StaleFenceError) as caught:
            await write
    finally:
        await raiser.close()
    assert (caught.value.fence, caught.value.current) == (lease.fence, lease.fence + 1)
    assert await backend.checkpoints.latest(tenant, "run") == b'{"format_version": 1}'


async def test_a_higher_fence_waits_for_a_racing_raise_and_lands_above_it(
    backend: Backend, postgres_url: str, tenant: str
) -> None:
    await backend.checkpoints.put(tenant, "run", b'{"format_version": 1}', fence=1)
    raiser = await asyncpg.connect(postgres_url)
    try:
        transaction = raiser.transaction()
        await transaction.start()
        await raiser.execute(
            "UPDATE adk_run_fences SET fence = 2 WHERE tenant = $1 AND run_id = 'run'", tenant
        )
        write = asyncio.create_task(
            backend.checkpoints.put(tenant, "run", b'{"format_version": 3}', fence=3)
        )
        await _until_blocked_by(postgres_url, raiser.get_server_pid())
        await transaction.commit()
        await write
    finally:
        await raiser.close()
    assert await backend.checkpoints.latest(tenant, "run") == b'{"format_version": 3}'
    with pytest.raises(StaleFenceError) as caught:
        await backend.history.put(tenant, "run", b"segment", fence=2)
    assert caught.value.current == 3


async def test_concurrent_charges_never_overspend(backend: Backend, tenant: str) -> None:
    results = await asyncio.gather(
        *(
            backend.ledger.charge(tenant, "run", f"c{i}", 100, budget=1000, fence=1)
            for i in range(20)
        ),
        return_exceptions=True,
    )
    assert sum(not isinstance(r, BaseException) for r in results) == 10
    assert all(isinstance(r, BudgetExceededError) for r in results if isinstance(r, BaseException))
    assert await backend.ledger.spent(tenant, "run") == 1000


async def test_an_unreadable_checkpoint_names_its_run(
    backend: Backend, postgres_url: str, tenant: str
) -> None:
    connection = await asyncpg.connect(postgres_url)
    try:
        await connection.execute(
            "INSERT INTO adk_checkpoints (tenant, run_id, fence, payload) "
            "VALUES ($1, 'run-42', 1, '[1, 2]'::bytea)",
            tenant,
        )
    finally:
        await connection.close()
    with pytest.raises(CheckpointFormatError) as caught:
        await Checkpointer(backend.checkpoints).latest(tenant, "run-42")
    assert "'run-42'" in str(caught.value)
    assert "JSON array" in str(caught.value)


async def test_a_frontier_and_its_transcript_round_trip(backend: Backend, tenant: str) -> None:
    checkpointer = Checkpointer(backend.checkpoints, history=backend.history)
    messages = (Message.of("user", "book 12A ünïcødé '; --"), Message.of("assistant", "ok"))
    checkpoint = frontier(run_id="run:1", tenant=tenant, fence=1, messages=messages, iteration=3)
    assert await checkpointer.write(checkpoint) is not None
    read = await Checkpointer(backend.checkpoints).latest(tenant, "run:1")
    assert read is not None
    assert (read.iteration, read.history_length) == (3, 2)
    assert await checkpointer.transcript(read) == messages
