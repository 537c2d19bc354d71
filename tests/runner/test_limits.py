"""What stops a run short of its answer: budget, deadline, and continuation into a new execution."""

from __future__ import annotations

import asyncio

import pytest

from agentrun._continuation import ContinuationPolicy
from agentrun._messages import Usage
from agentrun.runner._pricing import ModelPrice, PriceTable
from agentrun.runner._results import RunResult, RunStatus
from agentrun.stores._memory import MemoryBackend
from tests.runner.helpers import TURN_COST, Boundaries, Probe, agent, runner, script

THREE_TURNS = ([("act", {"item": "x"})], [("act", {"item": "y"})], [("act", {"item": "z"})], "done")


async def test_the_ledger_charges_each_model_call_from_the_price_table(
    memory: MemoryBackend,
) -> None:
    prices = PriceTable(
        prices={
            "scripted": ModelPrice(
                input_micros_per_million=1_000_000, output_micros_per_million=3_000_000
            )
        }
    )
    per_call = prices.cost("scripted", Usage(input_tokens=100, output_tokens=10))
    assert per_call == 130
    boundaries = Boundaries()
    result = await runner(memory, script(*THREE_TURNS), prices=prices, boundaries=boundaries).run(
        agent(Probe("act").tool()), "go", tenant="t", run_id="r"
    )
    assert result.status is RunStatus.COMPLETED
    assert await memory.ledger.spent("t", "r") == 4 * per_call == result.cost_micros
    assert [c.cost_micros for c in boundaries.seen] == [130, 130, 260, 260, 390, 390, 520]


async def test_a_budget_stops_the_run_and_the_ledger_decides_what_is_left(
    memory: MemoryBackend,
) -> None:
    probe = Probe("act")
    defined = agent(probe.tool())
    budget = TURN_COST + TURN_COST // 2
    stopped = await runner(memory, script(*THREE_TURNS)).run(
        defined, "go", tenant="t", run_id="r", budget_micros=budget
    )
    assert stopped.status is RunStatus.BUDGET_EXCEEDED
    assert stopped.cost_micros == 2 * TURN_COST  # the second call was made and is paid for
    assert await memory.ledger.spent("t", "r") == 2 * TURN_COST
    assert probe.calls == ["x"]
    frontier = await runner(memory, script("unused")).checkpoints.latest("t", "r")
    assert frontier is not None
    # The reply that crossed the budget is paid for and kept, its call not dispatched.
    assert frontier.boundary.value == "after_model_call"
    assert [p.call.arguments for p in frontier.pending] == [{"item": "y"}]
    assert frontier.cost_micros == 2 * TURN_COST

    # The ledger, not the checkpoint, says what was spent.
    provider = script(*THREE_TURNS)
    again = await runner(memory, provider, holder="worker-b").resume(defined, "r", tenant="t")
    assert again.status is RunStatus.BUDGET_EXCEEDED
    assert provider.calls == 0
    assert again.cost_micros == 2 * TURN_COST

    raised = await runner(memory, provider, holder="worker-c").resume(
        defined, "r", tenant="t", budget_micros=100 * TURN_COST
    )
    assert raised.status is RunStatus.COMPLETED
    assert probe.calls == ["x", "y", "z"]
    # the kept reply is dispatched without asking the model again: two more calls, four in all
    assert raised.cost_micros == await memory.ledger.spent("t", "r") == 4 * TURN_COST


async def test_a_deadline_stops_the_run_and_it_can_be_resumed(memory: MemoryBackend) -> None:
    async def slow_once(item: str) -> None:
        if len(probe.calls) == 1:
            await asyncio.Event().wait()  # never answers: only the deadline can end this call

    probe = Probe("look", during=slow_once)
    defined = agent(probe.tool(read_only=True))
    turns = ([("look", {"item": "x"})], "done")
    # a bound on the wait, not on speed: without the deadline the call would never end
    stopped = await asyncio.wait_for(
        runner(memory, script(*turns)).run(defined, "go", tenant="t", run_id="r", deadline=0.3),
        timeout=120,
    )
    assert stopped.status is RunStatus.DEADLINE_EXCEEDED
    assert await memory.leases.held("t", "r") is None

    result = await runner(memory, script(*turns), holder="worker-b").resume(
        defined, "r", tenant="t"
    )
    assert result.status is RunStatus.COMPLETED
    assert result.output == "done"
    assert probe.calls == ["x", "x"]  # read-only: dispatched again


@pytest.mark.parametrize("deadline", [None, 3600.0], ids=["no-deadline", "a-far-deadline"])
async def test_a_tools_own_timeout_is_its_failure_not_the_runs_deadline(
    memory: MemoryBackend, deadline: float | None
) -> None:
    """Only the run's own deadline ends it ``deadline_exceeded``; a tool that raises
    ``TimeoutError`` itself failed, as it would have with any other exception, and a
    read-only one is made again when the run is carried on."""

    async def times_out_once(item: str) -> None:
        if len(probe.calls) == 1:
            raise TimeoutError("the flight search did not answer")

    probe = Probe("look", during=times_out_once)
    defined = agent(probe.tool(read_only=True))
    turns = ([("look", {"item": "x"})], "done")
    seen: list[RunStatus] = []
    first = runner(memory, script(*turns))

    async def heard(result: RunResult) -> None:
        seen.append(result.status)

    first.on_result = heard
    with pytest.raises(TimeoutError, match="the flight search did not answer"):
        await first.run(defined, "go", tenant="t", run_id="r", deadline=deadline)
    assert seen == []  # no verdict on the run: the tool failed, the run did not run out of time
    assert await memory.leases.held("t", "r") is None

    result = await runner(memory, script(*turns), holder="worker-b").resume(
        defined, "r", tenant="t"
    )
    assert result.status is RunStatus.COMPLETED
    assert probe.calls == ["x", "x"]


async def test_continuation_hands_over_a_handle_and_resume_carries_on(
    memory: MemoryBackend,
) -> None:
    probe = Probe("act")
    defined = agent(probe.tool(key_arguments=("item",)))
    provider = script(*THREE_TURNS)
    policy = ContinuationPolicy(max_steps=2)
    result = await runner(memory, provider, history=True, continuation=policy).run(
        defined, "go", tenant="t", run_id="r"
    )
    assert result.status is RunStatus.CONTINUED
    carry = result.continuation
    assert carry is not None
    frontier = await runner(memory, provider, history=True).checkpoints.latest("t", "r")
    assert frontier is not None
    assert frontier.messages == ()
    assert carry.history_handle == frontier.history_handle is not None
    assert carry.history_handle.startswith("sha256:")
    assert (carry.history_length, carry.iteration) == (4, 1)
    assert carry.cost_micros == TURN_COST
    assert carry.agent_revision == defined.revision

    statuses = []
    for attempt in range(10):
        result = await runner(
            memory, provider, holder=f"worker-{attempt}", history=True, continuation=policy
        ).resume(defined, "r", tenant="t")
        statuses.append(result.status)
        if result.status is not RunStatus.CONTINUED:
            break
    assert statuses == [RunStatus.CONTINUED, RunStatus.CONTINUED, RunStatus.COMPLETED]
    assert result.output == "done"
    assert result.iteration == 4
    assert probe.calls == ["x", "y", "z"]
    assert provider.calls == 4
