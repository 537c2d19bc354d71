"""A run's transcript through compactions and merges on a real store, under lost commits and
workers that die.

A writer commits two rounds and a half of boundaries (a round: ``MERGE_AFTER`` compactions of
``COMPACT_AFTER`` segments each, the last a merge). At boundaries a seeded schedule draws, its
commit fails before it reaches the store, or lands and the reply is lost; twice the worker dies
and a fresh one, remembering nothing, takes the run up from what is stored. After every write a
fresh reader must resolve the whole transcript the last landed commit named (never a segment
that was not stored or that a commit dropped), and at the end the run's chain is a few segments,
not one per boundary, with at most one segment beside it for each writer (a commit that landed
unheard and that writer wrote no other).
A store's test module subclasses ``ChainFaultsConformance`` on its real server, with its
``backend`` fixture.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest

from agentrun import Backend
from agentrun._backend import StoreSet
from agentrun._checkpointing import COMPACT_AFTER, MERGE_AFTER, Checkpointer
from agentrun._commits import BoundaryCommit, CommitStore
from agentrun._errors import StoreUnavailableError
from agentrun._history import SegmentLister, previous_of
from agentrun._messages import Message
from tests.support.frontiers import RUN, conversation, frontier, resolved

ROUND = COMPACT_AFTER * MERGE_AFTER
BOUNDARIES = 2 * ROUND + COMPACT_AFTER + 5
FAULTS = 12


class RecordingCommits:
    """A ``CommitStore`` that keeps every commit it is handed (``handed``) and passes it on,
    failing those ``faults`` names (by the commit's number, from 1): ``before`` it reaches the
    store, or ``after`` the store committed it, the reply lost on the way back. Either way the
    ``Checkpointer`` hears an error."""

    def __init__(self, inner: CommitStore, faults: Mapping[int, str] | None = None) -> None:
        self.inner, self.faults = inner, dict(faults or {})
        self.handed: list[BoundaryCommit] = []

    @property
    def commits(self) -> int:
        return len(self.handed)

    async def commit(self, boundary: BoundaryCommit) -> int | None:
        self.handed.append(boundary)
        fault = self.faults.get(self.commits)
        if fault == "before":
            raise _lost()
        spent = await self.inner.commit(boundary)
        if fault == "after":
            raise _lost()
        return spent


def _lost() -> StoreUnavailableError:
    return StoreUnavailableError("store", "commit a boundary", TimeoutError("no reply"))


class ChainFaultsConformance:
    """The suite; a subclass provides the ``backend`` fixture."""

    @pytest.mark.parametrize("seed", [1, 2, 3])
    async def test_the_transcript_resolves_through_merges_lost_commits_and_takeovers(
        self, backend: Backend, tenant: str, seed: int
    ) -> None:
        assert isinstance(backend, StoreSet)
        assert backend.commits is not None
        draw = random.Random(seed)
        schedule = {
            commit: draw.choice(("before", "after"))
            for commit in draw.sample(range(1, BOUNDARIES + 1), FAULTS)
        }
        lossy = RecordingCommits(backend.commits, schedule)

        def worker() -> Checkpointer:
            return Checkpointer(backend.checkpoints, history=backend.history, commits=lossy)

        # The worker dies twice, early and late, so that a whole round (and its merge) falls
        # between; the next one remembers nothing.
        takeovers = {draw.randrange(1, ROUND // 2), draw.randrange(2 * ROUND, BOUNDARIES)}
        writer = worker()
        messages: tuple[Message, ...] = ()
        landed: tuple[Message, ...] = ()
        for turn in range(BOUNDARIES):
            messages += conversation(1, start=turn)
            if turn in takeovers:
                writer = worker()
                taken = await writer.resumable(tenant, RUN)
                assert taken is not None
                assert taken[1] == landed
            receipt = await writer.write(frontier(messages=messages, iteration=turn, tenant=tenant))
            assert (receipt is None) == (lossy.commits in schedule)
            if receipt is not None or schedule.get(lossy.commits) == "after":
                landed = messages
            found = await resolved(backend, tenant)
            assert found[1] == landed, f"after commit {lossy.commits} (seed {seed})"
        assert isinstance(backend.history, SegmentLister)
        stored = await backend.history.fetch_all(tenant, RUN)
        chain: set[str] = set()
        cursor = found[0].history_handle
        while cursor is not None:
            chain.add(cursor)
            cursor = previous_of(RUN, cursor, stored[cursor])
        # On the chain: two merged segments, the compacted ones a round has not merged yet (a
        # takeover starts a round of its own, so each may leave up to a round's worth unmerged)
        # and the transient ones after them. Off it, only a segment whose commit landed with its
        # reply lost and no later commit of the same writer (which drops it): one at most for
        # each writer that died, and for the last.
        on_chain = 2 + (MERGE_AFTER - 1) * (1 + len(takeovers)) + COMPACT_AFTER - 1
        assert len(chain) <= on_chain, (len(chain), on_chain)
        assert len(stored) - len(chain) <= len(takeovers) + 1, (len(stored), len(chain))
        # At least one merge was committed between the takeovers: a compaction drops the 15
        # transient segments before it, a merge the compacted ones too.
        merge = (MERGE_AFTER - 1) + (COMPACT_AFTER - 1)
        assert merge in {len(commit.dropped) for commit in lossy.handed}
