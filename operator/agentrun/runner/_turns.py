"""The turns of a run: ask the model, dispatch what it asks for, checkpoint at the boundaries.

A turn writes the frontier ``after_model_call`` (the reply and the calls it asks for, none
dispatched), dispatches each call, and writes ``after_tool_result`` (every result of the turn).
Before every model call the lease and the budget are checked, and a shared budget's gate, if the
run has one, reserves the call's cost (``_spend_gate``); after it, the spend is charged to the
ledger, which (not the checkpoint) decides what the run may still spend, and settled with the
gate. A resumed run first
carries out the calls its frontier left outstanding, as the resume plan decided them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry.trace import Tracer
from pydantic import JsonValue

from agentrun._checkpointing import Checkpointer
from agentrun._commits import Charge
from agentrun._continuation import ContinuationPolicy, continued
from agentrun._frontier import Boundary, Checkpoint
from agentrun._ledger import Ledger
from agentrun._messages import Message, ModelCall, TextPart, ToolCall, Usage
from agentrun._resume import ResumePlan
from agentrun.runner._checkpoint_writer import CheckpointWriter, charge_alone
from agentrun.runner._dispatch import Dispatcher, pending_call
from agentrun.runner._pricing import PriceTable
from agentrun.runner._providers.base import ModelReply, Provider
from agentrun.runner._results import RunResult, RunStatus
from agentrun.runner._spend_gate import SpendGate
from agentrun.runner._state import RunState, finished, refuse_over_budget
from agentrun.runner._tracing import model_span, record_usage

WITHHELD = (
    "error: this call was not made. Its arguments were masked as secrets when the run was "
    "checkpointed, so it cannot be sent as written; ask for it again with the real values if "
    "it is still needed."
)


@dataclass(kw_only=True)
class Turns:
    """Takes a run's turns until it stops: finished, out of turns, or due to continue."""

    provider: Provider
    prices: PriceTable
    ledger: Ledger | None
    continuation: ContinuationPolicy | None
    checkpoint_writer: CheckpointWriter
    dispatcher: Dispatcher
    spans: Tracer
    gate: SpendGate | None = None
    """What each model call is reserved against beyond the run's own budget (``_spend_gate``)."""

    @property
    def checkpoints(self) -> Checkpointer:
        return self.checkpoint_writer.checkpoints

    def _result(self, state: RunState, status: RunStatus, **extra: object) -> RunResult:
        return state.result(status, self.checkpoints.last_error, **extra)

    async def carry_on(
        self, state: RunState, checkpoint: Checkpoint, plan: ResumePlan
    ) -> RunResult:
        """Settle the calls ``checkpoint`` left outstanding as ``plan`` decided, then go on."""
        if checkpoint.pending:
            refuse_over_budget(state)
            decided = {d.pending.call.id: d for d in plan.decisions}
            for index, pending in enumerate(checkpoint.pending):
                decision = decided[pending.call.id]
                if decision.withheld:
                    state.messages.append(Message.tool_result(pending.call.id, WITHHELD))
                elif decision.outcome is not None:
                    state.messages.append(Message.tool_result(pending.call.id, decision.outcome))
                else:
                    await self.dispatcher.dispatch(state, pending, checkpoint.pending[index:])
            await self.checkpoint_writer.write(state, Boundary.AFTER_TOOL_RESULT)
        elif finished(state.messages):
            return self._result(state, RunStatus.COMPLETED)
        return await self.take(state)

    async def take(self, state: RunState) -> RunResult:
        """Turn after turn until the run stops."""
        tools = [each.schema() for each in state.agent.tools]
        while True:
            if state.iteration >= state.agent.max_iterations:
                return self._result(state, RunStatus.MAX_ITERATIONS)
            refuse_over_budget(state, at_most=True)
            state.ensure_held()
            if self.gate is not None:
                await self.gate.reserve()
            asked = time.monotonic()
            try:
                reply = await self._complete(state, tools)
            except Exception:
                if self.gate is not None:  # nothing to pay for: the reservation goes back
                    await self.gate.settle(Usage(), 0)
                raise
            calls = unique_call_ids(reply.tool_calls, state.call_ids, state.iteration)
            state.iteration += 1
            state.steps += 1
            latency_ms = round((time.monotonic() - asked) * 1000)
            cost = self.prices.cost(state.agent.model, reply.usage)
            charge = await self._charge(state, reply.usage, cost)
            assistant = Message(
                role="assistant",
                parts=(TextPart(text=reply.text),) if reply.text else (),
                tool_calls=calls,
                model_call=ModelCall(usage=reply.usage, cost_micros=cost, latency_ms=latency_ms),
            )
            state.append(assistant)
            if not calls:
                await self.checkpoint_writer.write(state, Boundary.AFTER_MODEL_CALL, charge=charge)
                return self._result(state, RunStatus.COMPLETED)
            pending = tuple(pending_call(state.agent, call) for call in calls)
            await self.checkpoint_writer.write(
                state, Boundary.AFTER_MODEL_CALL, pending=pending, charge=charge
            )
            # Over budget, the reply is paid for and kept: a resume with more budget dispatches
            # what it asked for instead of paying for the same answer again.
            refuse_over_budget(state)
            for index, call in enumerate(pending):
                await self.dispatcher.dispatch(state, call, pending[index:])
            written = await self.checkpoint_writer.write(state, Boundary.AFTER_TOOL_RESULT)
            # Only from this turn's own frontier: if it was not written, the latest one still
            # has this turn's calls outstanding and would carry them across without results.
            if written and self._continuation_due(state):
                latest = await self.checkpoints.latest(state.tenant, state.run_id)
                if latest is not None and latest.history_handle is not None:
                    carry = continued(latest, tenant=state.tenant, agent_name=state.agent.name)
                    return self._result(state, RunStatus.CONTINUED, continuation=carry)

    async def _complete(self, state: RunState, tools: list[dict[str, JsonValue]]) -> ModelReply:
        with model_span(
            self.spans,
            model=state.agent.model,
            run_id=state.run_id,
            tenant=state.tenant,
            fence=state.fence,
            iteration=state.iteration + 1,
        ) as span:
            reply = await self.provider.complete(
                model=state.agent.model, messages=tuple(state.messages), tools=tools
            )
            record_usage(span, reply.usage)
        return reply

    def _continuation_due(self, state: RunState) -> bool:
        return (
            self.continuation is not None
            and self.checkpoints.history is not None
            and self.continuation.due(state.steps, history_bytes=state.history_bytes)
        )

    async def _charge(self, state: RunState, usage: Usage, cost: int) -> Charge | None:
        """Charge the model call (``cost`` micros) to the ledger now, or return the charge for
        the boundary that follows to commit with its frontier (``Checkpointer.carries_charges``):
        one commit for both. Until then the run's total is the ledger's last answer plus this
        charge, which is what the ledger will answer: only this worker charges the run under its
        fence."""
        state.usage = state.usage + usage
        if self.gate is not None:
            await self.gate.settle(usage, cost)
        if self.ledger is None:
            state.cost_micros += cost
            return None
        charge = Charge(f"model:{state.execution}:{state.iteration}", cost)
        if self.checkpoints.carries_charges:
            state.cost_micros += cost
            return charge
        await charge_alone(self.ledger, state, charge)
        return None


def unique_call_ids(
    calls: Sequence[ToolCall], taken: set[str], iteration: int
) -> tuple[ToolCall, ...]:
    """``calls`` with every id unique among ``taken`` and each other, and ``taken`` grown by them.

    Nothing obliges a provider to keep call ids unique across a run (a server may number calls
    per reply, or send none), and a keyless call's dispatch marker derives from its id: a later
    call reusing an earlier one's id would be taken for it, skipped and reported as done. So a
    reused id becomes ``<id>~<iteration>.<position>`` (suffixed further in the unlikely case that
    is taken too) before the reply enters the conversation and the frontier: readable, and the
    same whichever worker asked, so a reply asked for again after a crash gets the same ids.
    """
    unique = []
    for position, call in enumerate(calls):
        if call.id in taken:
            renamed = candidate = f"{call.id}~{iteration}.{position}"
            suffix = 1
            while candidate in taken:
                suffix += 1
                candidate = f"{renamed}.{suffix}"
            call = call.model_copy(update={"id": candidate})
        taken.add(call.id)
        unique.append(call)
    return tuple(unique)
