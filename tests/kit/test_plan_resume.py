"""plan_resume: one test per row of the disposition table in docs/contract.md, and the resume claim.

The records are written through the real memory idempotency store, exactly as a dispatching
worker writes them: ``begin`` before the tool is handed the call, ``record`` after it answered.
"""

from __future__ import annotations

import pytest

from agentrun._errors import IndeterminateToolCallError, ResumeConflictError
from agentrun._frontier import PendingCall
from agentrun._idempotency import ClaimState, marker_key
from agentrun._resume import (
    RESUME_CLAIM_KEY,
    RESUME_CLAIM_TTL,
    ToolDisposition,
    claim_resume,
    plan_resume,
    refuse_if_undecidable,
    release_resume,
    tracking_key,
)
from agentrun.stores._memory import MemoryBackend
from agentrun.testing import ManualClock
from tests.kit.stores import CallLog
from tests.support.frontiers import RUN, TENANT, frontier, pending

OLD = "worker-gone"


async def dispatched(backend: MemoryBackend, call: PendingCall, outcome: str | None) -> None:
    """What a worker writes around a dispatch; ``outcome=None`` is a worker that died mid-call."""
    key = tracking_key(call)
    claim = await backend.idempotency.begin(TENANT, RUN, key, holder=OLD, fence=1)
    assert claim.won
    if outcome is not None:
        await backend.idempotency.record(TENANT, RUN, key, outcome, holder=OLD, fence=1)


def test_the_dispositions_are_the_spec_three() -> None:
    assert {d.value for d in ToolDisposition} == {"completed", "never_ran", "indeterminate"}


async def test_completed_is_replayed_with_its_outcome(backend: MemoryBackend) -> None:
    call = pending("c1", key="idem:v1:booked")
    await dispatched(backend, call, '{"seat": "12A"}')
    plan = await plan_resume(frontier(pending=(call,)), backend.idempotency)
    assert [(d.pending, d.disposition, d.outcome) for d in plan.completed] == [
        (call, ToolDisposition.COMPLETED, '{"seat": "12A"}')
    ]
    assert plan.to_dispatch == ()
    assert plan.indeterminate == ()
    assert plan.safe


async def test_never_ran_is_dispatched(backend: MemoryBackend) -> None:
    call = pending("c1", key="idem:v1:fresh")
    plan = await plan_resume(frontier(pending=(call,)), backend.idempotency)
    assert plan.to_dispatch == (call,)
    assert plan.decisions[0].disposition is ToolDisposition.NEVER_RAN
    assert plan.completed == ()
    assert plan.safe


async def test_in_flight_from_a_gone_process_is_indeterminate(backend: MemoryBackend) -> None:
    call = pending("c1", key="idem:v1:maybe")
    await dispatched(backend, call, None)
    plan = await plan_resume(frontier(pending=(call,)), backend.idempotency)
    assert plan.indeterminate == (call,)
    assert plan.to_dispatch == ()
    assert not plan.safe
    assert OLD in plan.decisions[0].reason


async def test_a_keyless_call_with_its_marker_in_flight_is_indeterminate(
    backend: MemoryBackend,
) -> None:
    call = pending("c1", name="send_email")
    await dispatched(backend, call, None)
    record = await backend.idempotency.read(TENANT, RUN, marker_key("c1"))
    assert record is not None  # the marker is the call's own, by call id
    plan = await plan_resume(frontier(pending=(call,)), backend.idempotency)
    assert plan.indeterminate == (call,)
    assert "dispatch marker" in plan.decisions[0].reason


async def test_a_keyless_call_with_a_recorded_outcome_is_completed(
    backend: MemoryBackend,
) -> None:
    call = pending("c1", name="send_email")
    await dispatched(backend, call, "sent")
    plan = await plan_resume(frontier(pending=(call,)), backend.idempotency)
    assert [d.outcome for d in plan.completed] == ["sent"]


async def test_a_keyless_call_without_a_marker_never_ran(backend: MemoryBackend) -> None:
    call = pending("c1", name="send_email")
    other = pending("c2", name="send_email")
    await dispatched(backend, other, None)  # another call's marker does not count
    plan = await plan_resume(frontier(pending=(call, other)), backend.idempotency)
    assert plan.to_dispatch == (call,)
    assert plan.indeterminate == (other,)


async def test_safe_to_repeat_is_dispatched_even_when_in_flight(backend: MemoryBackend) -> None:
    call = pending("c1", name="search", key="idem:v1:search", safe_to_repeat=True)
    await dispatched(backend, call, None)
    plan = await plan_resume(frontier(pending=(call,)), backend.idempotency)
    assert plan.to_dispatch == (call,)
    assert plan.safe


async def test_a_mixed_frontier_sorts_every_call(backend: MemoryBackend) -> None:
    done = pending("c1", key="idem:v1:done")
    fresh = pending("c2", key="idem:v1:fresh")
    unknown = pending("c3", name="send_email")
    await dispatched(backend, done, "ok")
    await dispatched(backend, unknown, None)
    plan = await plan_resume(frontier(pending=(done, fresh, unknown)), backend.idempotency)
    assert [d.pending for d in plan.completed] == [done]
    assert plan.to_dispatch == (fresh,)
    assert plan.indeterminate == (unknown,)
    assert not plan.safe
    assert (plan.run_id, plan.tenant) == (RUN, TENANT)


async def test_planning_only_reads_and_leaves_no_claim(backend: MemoryBackend) -> None:
    calls = (
        pending("c1", key="idem:v1:a"),
        pending("c2", name="send_email"),
        pending("c3", key="idem:v1:b"),
        pending("c4", name="search", safe_to_repeat=True),
    )
    await dispatched(backend, calls[2], None)
    before = await backend.idempotency.read(TENANT, RUN, "idem:v1:b")
    log = CallLog(backend.idempotency)
    await plan_resume(frontier(pending=calls), log)
    assert set(log.calls) <= {"read", "records"}
    for call in calls:
        record = await backend.idempotency.read(TENANT, RUN, tracking_key(call))
        if call is calls[2]:
            assert record == before
        else:
            assert record is None, call.call.id
    assert await backend.idempotency.read(TENANT, RUN, RESUME_CLAIM_KEY) is None


async def test_planning_lists_records_once_and_reads_only_completed_outcomes(
    backend: MemoryBackend,
) -> None:
    # One round trip for the run's records however many calls are pending; an outcome, which
    # the listing leaves out, is read only for a call that completed.
    calls = tuple(pending(f"c{index}", key=f"idem:v1:{index}") for index in range(8))
    await dispatched(backend, calls[1], None)
    await dispatched(backend, calls[5], '{"booked": true}')
    log = CallLog(backend.idempotency)
    plan = await plan_resume(frontier(pending=calls), log)
    assert log.calls == ["records", "read"]
    assert plan.indeterminate == (calls[1],)
    assert [d.outcome for d in plan.decisions if d.pending is calls[5]] == ['{"booked": true}']


async def test_refuse_if_undecidable_names_every_undecidable_call(backend: MemoryBackend) -> None:
    first = pending("c1", name="book_flight", key="idem:v1:x")
    second = pending("c2", name="send_email")
    fine = pending("c3", name="charge_card", key="idem:v1:y")
    await dispatched(backend, first, None)
    await dispatched(backend, second, None)
    plan = await plan_resume(frontier(pending=(first, second, fine)), backend.idempotency)
    with pytest.raises(IndeterminateToolCallError) as caught:
        refuse_if_undecidable(plan)
    error = caught.value
    assert error.run_id == RUN
    assert set(error.calls) == {("c1", "book_flight"), ("c2", "send_email")}
    assert "book_flight (call c1)" in str(error)
    assert "send_email (call c2)" in str(error)
    assert "charge_card" not in str(error)
    assert not error.retryable


async def test_refuse_if_undecidable_passes_a_safe_plan(backend: MemoryBackend) -> None:
    plan = await plan_resume(
        frontier(pending=(pending("c1", key="idem:v1:z"),)), backend.idempotency
    )
    refuse_if_undecidable(plan)  # does not raise


async def test_a_second_worker_cannot_claim_the_resume(backend: MemoryBackend) -> None:
    claim = await claim_resume(backend.idempotency, TENANT, RUN, holder="w1")
    assert claim.won
    assert claim.record.state is ClaimState.IN_FLIGHT
    with pytest.raises(ResumeConflictError) as caught:
        await claim_resume(backend.idempotency, TENANT, RUN, holder="w2")
    assert caught.value.holder == "w1"
    assert caught.value.retryable
    assert "'w1'" in str(caught.value)


async def test_the_resume_claim_expires_after_five_minutes_on_the_store_clock(
    backend: MemoryBackend, clock: ManualClock
) -> None:
    assert RESUME_CLAIM_TTL == 300
    await claim_resume(backend.idempotency, TENANT, RUN, holder="w1")
    clock.advance(299)
    with pytest.raises(ResumeConflictError):
        await claim_resume(backend.idempotency, TENANT, RUN, holder="w2")
    clock.advance(2)
    claim = await claim_resume(backend.idempotency, TENANT, RUN, holder="w2")
    assert claim.record.holder == "w2"


async def test_release_resume_frees_the_run(backend: MemoryBackend) -> None:
    claim = await claim_resume(backend.idempotency, TENANT, RUN, holder="w1")
    await release_resume(backend.idempotency, TENANT, RUN, claim)
    assert await backend.idempotency.read(TENANT, RUN, RESUME_CLAIM_KEY) is None
    assert (await claim_resume(backend.idempotency, TENANT, RUN, holder="w2")).won


async def test_the_resume_claim_is_fenced_like_any_write(backend: MemoryBackend) -> None:
    lease = await backend.leases.acquire(TENANT, RUN, "w1", ttl=30)
    claim = await claim_resume(backend.idempotency, TENANT, RUN, holder="w1", fence=lease.fence)
    assert claim.record.fence == lease.fence
