"""One worker at a time: the lease covers all of a run's work and a lost lease stops dispatch."""

from __future__ import annotations

import pytest

from agentrun import AgentRunner, Backend, Checkpointer
from agentrun._errors import RunLeaseError
from agentrun._frontier import Boundary
from agentrun._idempotency import ClaimState, IdempotencyRecord
from agentrun._leases import LeasePolicy, RunLease
from agentrun._resume import RESUME_CLAIM_KEY
from agentrun.runner._results import RunStatus
from agentrun.stores._memory import MemoryBackend
from agentrun.testing import ManualClock
from tests.runner.helpers import Boundaries, Crash, Probe, agent, runner, script

TURNS = ([("act", {"item": "x"})], [("act", {"item": "y"})], "done")


async def test_the_lease_is_held_for_the_whole_run_and_released_at_the_end(stores: Backend) -> None:
    refusals: list[RunLeaseError] = []
    holders: list[RunLease | None] = []

    async def intrude(item: str) -> None:
        holders.append(await stores.leases.held("t", "r"))
        with pytest.raises(RunLeaseError) as refused:
            await stores.leases.acquire("t", "r", "intruder", ttl=5)
        refusals.append(refused.value)

    probe = Probe("act", during=intrude)
    result = await runner(stores, script(*TURNS)).run(
        agent(probe.tool()), "go", tenant="t", run_id="r"
    )
    assert result.status is RunStatus.COMPLETED
    assert len(refusals) == 2  # refused during the first and the second turn
    assert all(error.holder == "worker-a" for error in refusals)
    assert [(h.holder, h.fence) for h in holders if h] == [("worker-a", 1), ("worker-a", 1)]
    assert await stores.leases.held("t", "r") is None
    taken = await stores.leases.acquire("t", "r", "intruder", ttl=5)
    assert taken.fence == 2


async def test_a_resume_holds_the_lease_it_took(stores: Backend) -> None:
    holders: list[RunLease | None] = []

    async def look(item: str) -> None:
        holders.append(await stores.leases.held("t", "r"))

    probe = Probe("act", during=look)
    defined = agent(probe.tool())
    crash = Boundaries(crash_at=(Boundary.AFTER_MODEL_CALL, 1))
    with pytest.raises(Crash):
        await runner(stores, script(*TURNS), boundaries=crash).run(
            defined, "go", tenant="t", run_id="r"
        )
    result = await runner(stores, script(*TURNS), holder="worker-b").resume(
        defined, "r", tenant="t"
    )
    assert result.status is RunStatus.COMPLETED
    assert result.fence == 2
    assert [(h.holder, h.fence) for h in holders if h] == [("worker-b", 2), ("worker-b", 2)]
    assert await stores.leases.held("t", "r") is None


async def test_a_resume_is_refused_while_another_worker_holds_the_lease(stores: Backend) -> None:
    probe = Probe("act")
    defined = agent(probe.tool())
    crash = Boundaries(crash_at=(Boundary.AFTER_MODEL_CALL, 1))
    with pytest.raises(Crash):
        await runner(stores, script(*TURNS), boundaries=crash).run(
            defined, "go", tenant="t", run_id="r"
        )
    await stores.leases.acquire("t", "r", "worker-live", ttl=30)
    provider = script(*TURNS)
    with pytest.raises(RunLeaseError, match="worker-live"):
        await runner(stores, provider, holder="worker-b").resume(defined, "r", tenant="t")
    assert provider.calls == 0
    assert probe.calls == []


async def test_a_lost_lease_stops_the_run_before_the_next_dispatch() -> None:
    store_clock, holder_clock = ManualClock(), ManualClock()
    memory = MemoryBackend(clock=store_clock)

    async def pause_past_ttl(item: str) -> None:
        store_clock.advance(60)  # on the store's clock the lease lapses...
        await memory.leases.acquire("t", "r", "worker-b", ttl=60)  # ...and another takes it
        await holder_clock.pass_time(0.3)  # the holder's renewal (due after 0.2s) is refused

    look = Probe("look", during=pause_past_ttl)
    act = Probe("act")
    defined = agent(look.tool(read_only=True), act.tool())
    provider = script([("look", {"item": "a"}), ("act", {"item": "b"})], "done")
    with pytest.raises(RunLeaseError, match="the lease was lost"):
        await runner(
            memory,
            provider,
            lease_policy=LeasePolicy(ttl=0.4, renew_within=0.2),
            clock=holder_clock,
        ).run(defined, "go", tenant="t", run_id="r")
    assert look.calls == ["a"]
    assert act.calls == []
    held = await memory.leases.held("t", "r")
    assert held is not None
    assert (held.holder, held.fence) == ("worker-b", 2)


async def test_without_a_lease_store_a_runner_holds_its_runs_under_a_lease_and_the_claim(
    memory: MemoryBackend,
) -> None:
    """One path for every run: a runner given no lease store still runs each run under a lease
    (its own memory store's), so a lost one stops it like any other, and holds the resume claim
    in the idempotency store it shares with other workers for as long; both go back at the end.
    (Two worker processes: ``tests/sqlite/test_unleased_resume.py``.)"""
    leases: list[tuple[str, int]] = []
    claims: list[IdempotencyRecord | None] = []
    probe = Probe("act")

    async def heard(lease: RunLease, resumed: bool) -> None:
        leases.append((lease.holder, lease.fence))

    unleased = AgentRunner(
        provider=script(*TURNS),
        idempotency=memory.idempotency,
        checkpoints=Checkpointer(memory.checkpoints),
        holder="worker-a",
        on_lease=heard,
    )

    async def look(item: str) -> None:
        claims.append(await memory.idempotency.read("t", "r", RESUME_CLAIM_KEY))

    probe.during = look
    result = await unleased.run(agent(probe.tool()), "go", tenant="t", run_id="r")
    assert result.status is RunStatus.COMPLETED
    assert leases == [("worker-a", 1)]
    assert [(claim.holder, claim.fence, claim.state) for claim in claims if claim] == [
        ("worker-a", 1, ClaimState.IN_FLIGHT)
    ] * 2
    assert await memory.idempotency.read("t", "r", RESUME_CLAIM_KEY) is None
    assert await memory.leases.held("t", "r") is None  # the backend's store was never asked
