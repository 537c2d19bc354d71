"""Approvals: a tool that requires one stops the run at ``before_approval`` for a person."""

from __future__ import annotations

from agentrun._decisions import approval_request_id, decide
from agentrun._frontier import Boundary
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._results import RunStatus
from agentrun.stores._memory import MemoryBackend
from tests.runner.helpers import Boundaries, Probe, Recording, agent, runner, script, tool_results

TURNS = ([("look", {"item": "invoice-7"}), ("pay", {"item": "invoice-7"})], "paid")


def _agent(look: Probe, pay: Probe) -> AgentDefinition:
    return agent(look.tool(key_arguments=("item",)), pay.tool(requires_approval=True))


async def _stopped(memory: MemoryBackend, look: Probe, pay: Probe) -> str:
    boundaries = Boundaries()
    result = await runner(memory, script(*TURNS), boundaries=boundaries).run(
        _agent(look, pay), "pay it", tenant="t", run_id="r"
    )
    request = approval_request_id("t", "r", "c0_1")
    assert result.status is RunStatus.AWAITING_APPROVAL
    assert result.approval is not None
    assert (result.approval.request_id, result.approval.call_id, result.approval.tool) == (
        request,
        "c0_1",
        "pay",
    )
    held = boundaries.seen[-1]
    assert held.boundary is Boundary.BEFORE_APPROVAL
    assert held.approval == result.approval
    assert [p.call.id for p in held.pending] == ["c0_1"]  # the held call, nothing else
    assert held.pending[0].requires_approval
    assert tool_results(held.messages) == {"c0_0": "look did invoice-7"}
    assert held.iteration == 1
    assert held.cost_micros > 0
    assert held.usage.input_tokens == 100
    assert look.calls == ["invoice-7"]
    assert pay.calls == []
    assert await memory.leases.held("t", "r") is None
    return request


async def test_approval_stops_the_run_and_approve_carries_it_on(memory: MemoryBackend) -> None:
    look, pay = Probe("look"), Probe("pay")
    request = await _stopped(memory, look, pay)

    undecided = await runner(memory, script(*TURNS), holder="worker-b").resume(
        _agent(look, pay), "r", tenant="t"
    )
    assert undecided.status is RunStatus.AWAITING_APPROVAL
    assert undecided.approval is not None
    assert undecided.approval.request_id == request
    assert pay.calls == []

    await decide(memory.idempotency, "t", "r", request, approved=True, by="alice")
    provider = script(*TURNS)
    result = await runner(memory, provider, holder="worker-c").resume(
        _agent(look, pay), "r", tenant="t"
    )
    assert result.status is RunStatus.COMPLETED
    assert result.output == "paid"
    assert pay.calls == ["invoice-7"]
    assert look.calls == ["invoice-7"]
    assert provider.calls == 1
    assert result.denied == ()


async def test_a_denial_is_told_to_the_model(memory: MemoryBackend) -> None:
    look, pay = Probe("look"), Probe("pay")
    request = await _stopped(memory, look, pay)
    await decide(
        memory.idempotency, "t", "r", request, approved=False, by="alice", reason="over limit"
    )
    provider = Recording(script(*TURNS))
    result = await runner(memory, provider, holder="worker-b").resume(
        _agent(look, pay), "r", tenant="t"
    )
    assert result.status is RunStatus.COMPLETED
    assert pay.calls == []
    assert result.denied == (request,)
    told = provider.shown[-1][-1]
    assert told.role == "tool"
    assert told.tool_call_id == "c0_1"
    assert told.text == "error: alice denied this call: over limit"
