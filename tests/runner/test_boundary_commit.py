"""A boundary is one commit: the frontier, its segment and the model call's charge together.

The memory backend's stores are wrapped to count every durable write the runner makes, so the
tests see the number of commits a run costs, and that the charge still lands (on its own) when
the boundary's commit is skipped by the policy or fails.
"""

from __future__ import annotations

from collections import Counter

import pytest

from agentrun._checkpointing import CheckpointPolicy
from agentrun._errors import CheckpointEncodingError, StoreUnavailableError
from agentrun._frontier import Boundary
from agentrun.runner._results import RunStatus
from agentrun.stores._memory import MemoryBackend
from tests.runner.helpers import TURN_COST, Boundaries, Probe, agent, runner, script

THREE_TURNS = ([("act", {"item": "x"})], [("act", {"item": "y"})], [("act", {"item": "z"})], "done")


class Counted(MemoryBackend):
    """A memory backend counting the writes of each store (``writes``), and able to refuse
    boundary commits (``refuse``). The memory commit store writes through the other stores
    inside its commit; those writes are the commit's, not counted again."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: Counter[str] = Counter()
        self.refuse = False
        self.committing = False
        for name, method in (
            ("checkpoints", "put"),
            ("history", "put"),
            ("ledger", "charge"),
            ("commits", "commit"),
        ):
            self._count(name, method)

    def _count(self, name: str, method: str) -> None:
        store = getattr(self, name)
        inner = getattr(store, method)

        async def counted(*args: object, **kwargs: object) -> object:
            if name == "commits" and self.refuse:
                raise StoreUnavailableError("memory", "commit a boundary", OSError("away"))
            if self.committing:
                return await inner(*args, **kwargs)
            self.writes[name] += 1
            self.committing = name == "commits"
            try:
                return await inner(*args, **kwargs)
            finally:
                self.committing = False

        setattr(store, method, counted)


async def test_every_boundary_is_one_commit_and_every_model_call_is_charged_once() -> None:
    stores = Counted()
    boundaries = Boundaries()
    result = await runner(stores, script(*THREE_TURNS), history=True, boundaries=boundaries).run(
        agent(Probe("act").tool()), "go", tenant="t", run_id="r"
    )
    assert result.status is RunStatus.COMPLETED
    assert stores.writes == {"commits": len(boundaries.seen)} == {"commits": 7}
    assert await stores.ledger.spent("t", "r") == 4 * TURN_COST == result.cost_micros
    assert [c.cost_micros for c in boundaries.seen] == [280, 280, 560, 560, 840, 840, 1120]


async def test_the_separate_writes_take_three_commits_after_a_model_call() -> None:
    # What a Checkpointer without a CommitStore does (a store of one's own): the same run,
    # the same totals, at the cost of a commit per store.
    stores = Counted()
    result = await runner(stores, script(*THREE_TURNS), history=True, whole=False).run(
        agent(Probe("act").tool()), "go", tenant="t", run_id="r"
    )
    assert result.cost_micros == 4 * TURN_COST == await stores.ledger.spent("t", "r")
    assert stores.writes == {"checkpoints": 7, "history": 7, "ledger": 4}


async def test_a_skipped_boundary_leaves_the_charge_to_the_ledger() -> None:
    stores = Counted()
    policy = CheckpointPolicy(boundaries=frozenset({Boundary.AFTER_TOOL_RESULT}))
    result = await runner(stores, script("done"), history=True, policy=policy).run(
        agent(), "go", tenant="t", run_id="r"
    )
    assert result.status is RunStatus.COMPLETED
    assert stores.writes == {"ledger": 1}
    assert await stores.ledger.spent("t", "r") == TURN_COST == result.cost_micros


async def test_a_commit_that_fails_leaves_the_charge_to_the_ledger_and_the_run_goes_on() -> None:
    stores = Counted()
    stores.refuse = True
    checkpoints = runner(stores, script("done"), history=True)
    result = await checkpoints.run(agent(), "go", tenant="t", run_id="r")
    assert result.status is RunStatus.COMPLETED
    assert stores.writes == {"ledger": 1}
    assert await stores.ledger.spent("t", "r") == TURN_COST == result.cost_micros


async def test_a_frontier_that_cannot_be_encoded_stops_the_run_with_its_model_call_paid() -> None:
    """A frontier that masking or encoding fails on (a lone surrogate, as a JSON escape gives
    it, in the arguments the model sent) is no outage: the run stops there, before the call,
    saying so, and the model call it follows is charged on its own all the same."""
    backend = Counted()
    probe = Probe("act")
    with pytest.raises(CheckpointEncodingError) as stopped:
        await runner(backend, script([("act", {"item": "\ud800"})], "done")).run(
            agent(probe.tool(read_only=True)), "go", tenant="t", run_id="r"
        )
    assert not stopped.value.retryable
    assert probe.calls == []
    assert backend.writes == Counter({"ledger": 1})
    assert await backend.ledger.spent("t", "r") == TURN_COST
    assert await backend.leases.held("t", "r") is None
