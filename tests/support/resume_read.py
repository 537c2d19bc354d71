"""A resume reads the frontier, its transcript and the run's records in one round trip on a
store that can (``RunAndRecordsReader``), and decides exactly as when it lists the records
apart; with a ``before_planning`` hook the records are listed after the hook, which writes them.
A store's test module subclasses ``ResumeReadConformance`` on its real server, with its
``backend`` fixture."""

from __future__ import annotations

import pytest

from agentrun import Backend
from agentrun._backend import StoreSet
from agentrun._checkpointing import Checkpointer
from agentrun._frontier import Checkpoint
from agentrun._idempotency import ListedRecord
from agentrun._messages import Message
from agentrun._resume import ToolDisposition, plan_resume, read_and_plan
from tests.support.frontiers import RUN, frontier, pending


async def _written(backend: StoreSet, tenant: str) -> None:
    """A frontier with three calls outstanding, and records: c1 completed, c2 in flight, and
    one for a call no frontier names (unaccounted)."""
    calls = [pending("c1", key="book-c1"), pending("c2", key="book-c2"), pending("c3", key="k3")]
    asked = Message(role="assistant", tool_calls=tuple(p.call for p in calls))
    checkpoint = frontier(
        messages=(Message.of("user", "book three"), asked),
        pending=tuple(calls),
        fence=1,
        tenant=tenant,
    )
    checkpointer = Checkpointer(
        backend.checkpoints, history=backend.history, commits=backend.commits
    )
    assert await checkpointer.write(checkpoint) is not None, checkpointer.last_error
    ids = backend.idempotency
    for key, call in (("book-c1", "c1"), ("book-c2", "c2"), ("lost", "c9")):
        await ids.begin(tenant, RUN, key, holder="w1", fence=1, call_id=call, tool="book_flight")
    await ids.record(tenant, RUN, "book-c1", "booked c1", holder="w1", fence=1)


class ResumeReadConformance:
    """The suite; a subclass provides the ``backend`` fixture."""

    async def test_one_read_decides_as_two(
        self, backend: Backend, tenant: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        assert isinstance(backend, StoreSet)
        await _written(backend, tenant)
        fresh = Checkpointer(backend.checkpoints, history=backend.history, commits=backend.commits)
        listed: list[str] = []
        listing = backend.idempotency.records

        async def records(tenant: str, run_id: str) -> tuple[ListedRecord, ...]:
            listed.append(run_id)
            return await listing(tenant, run_id)

        monkeypatch.setattr(backend.idempotency, "records", records)
        checkpoint, messages, plan = await read_and_plan(fresh, backend.idempotency, tenant, RUN)
        assert not listed  # the records came with the frontier, in its one read
        apart = await plan_resume(checkpoint, backend.idempotency, messages)
        assert listed == [RUN]
        assert plan == apart
        assert [d.disposition for d in plan.decisions] == [
            ToolDisposition.COMPLETED,
            ToolDisposition.INDETERMINATE,
            ToolDisposition.NEVER_RAN,
        ]
        assert plan.completed[0].outcome == "booked c1"
        assert [r.key for r in plan.unaccounted] == ["lost"]

    async def test_records_written_by_before_planning_are_planned(
        self, backend: Backend, tenant: str
    ) -> None:
        assert isinstance(backend, StoreSet)
        await _written(backend, tenant)
        ids = backend.idempotency

        async def resolve(_: Checkpoint) -> None:  # a person answers for c3 under the lease
            await ids.begin(
                tenant, RUN, "k3", holder="w2", fence=1, call_id="c3", tool="book_flight"
            )
            await ids.record(tenant, RUN, "k3", "booked by hand", holder="w2", fence=1)

        fresh = Checkpointer(backend.checkpoints, history=backend.history, commits=backend.commits)
        _, _, plan = await read_and_plan(fresh, ids, tenant, RUN, before_planning=resolve)
        assert [d.outcome for d in plan.completed] == ["booked c1", "booked by hand"]
