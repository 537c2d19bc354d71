"""What a boundary and a resume cost a store in round trips, counted on its driver's connection.

The promise (docs/architecture.md, "A boundary is one commit" and the resume's step 3): on the
stores the kit ships, a boundary with its segment and charge is one round trip, and a resume is
one however long the transcript (the frontier with every segment and the run's records:
``RunAndRecordsReader``). A
store's test module subclasses ``RoundTripsConformance`` beside its other conformance suites, on
its real server, and provides the ``round_trips`` fixture: a list its driver hook appends one
label to (the statement's or command's name) for each request it sends. The hook sits below
the stores, so whatever the driver sends besides the stores' own requests (a pool's reset on
release, a script loaded again) is counted too.

Each count is taken on a store that has already served the same request once: the first
request of a process may pay a one-off cost (Redis loads a script after ``NOSCRIPT``), which
does not grow with the transcript and is not what these tests are about.
"""

from __future__ import annotations

from typing import ClassVar

import pytest

from agentrun import Backend
from agentrun._backend import StoreSet
from agentrun._checkpointing import Checkpointer
from agentrun._commits import BoundaryCommit, Charge
from agentrun._messages import Message
from agentrun._resume import read_and_plan
from tests.support.frontiers import frontier


class RoundTripsConformance:
    """The suite; a subclass provides ``backend`` and ``round_trips`` fixtures."""

    turns: ClassVar[int] = 40
    """Boundaries the resumed run has: past a compaction, so its chain holds both kinds of
    segment."""

    @pytest.fixture
    def round_trips(self) -> list[str]:
        raise NotImplementedError("a store's subclass counts the requests its driver sends")

    async def test_a_boundary_with_its_segment_and_charge_is_one_round_trip(
        self, backend: Backend, round_trips: list[str], tenant: str
    ) -> None:
        assert isinstance(backend, StoreSet)
        assert backend.commits is not None
        await backend.commits.commit(
            BoundaryCommit(tenant, "one-trip", 1, b"{}", b"segment 1", Charge("model:1", 5))
        )
        round_trips.clear()
        await backend.commits.commit(
            BoundaryCommit(tenant, "one-trip", 1, b"{}", b"segment 2", Charge("model:2", 5))
        )
        assert len(round_trips) == 1, round_trips

    async def test_a_resume_is_one_round_trip_whatever_the_transcript(
        self, backend: Backend, round_trips: list[str], tenant: str
    ) -> None:
        assert isinstance(backend, StoreSet)
        checkpointer = Checkpointer(
            backend.checkpoints, history=backend.history, commits=backend.commits
        )
        messages: list[Message] = []
        for turn in range(self.turns):
            messages.append(Message.of("user", f"turn {turn}"))
            checkpoint = frontier(run_id="long", messages=tuple(messages), tenant=tenant, fence=1)
            assert await checkpointer.write(checkpoint) is not None, checkpointer.last_error

        async def resume() -> tuple[Message, ...]:
            # a worker that remembers nothing of the run, as ``AgentRunner.on_backend`` builds it
            fresh = Checkpointer(
                backend.checkpoints, history=backend.history, commits=backend.commits
            )
            _, loaded, _ = await read_and_plan(fresh, backend.idempotency, tenant, "long")
            return loaded

        assert await resume() == tuple(messages)
        round_trips.clear()
        assert await resume() == tuple(messages)
        assert len(round_trips) == 1, round_trips  # frontier, segments and records
