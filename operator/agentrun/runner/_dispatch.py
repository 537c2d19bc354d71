"""Dispatching one call the model asked for: approval, intent, the tool, the outcome.

Before a call is handed to its tool, its intent is claimed in the idempotency store (under its
key, or a dispatch marker for a keyless call); the outcome is recorded after. So the record, not
the frontier, says what happened after the frontier was written. A tool that raises anything but
``ToolError`` leaves the claim in flight: nobody knows whether it acted, and a resume refuses the
call until a person answers. A call that needs approval checkpoints ``before_approval`` and stops
the run until a person decides.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from opentelemetry.trace import Tracer

from agentrun._decisions import approval_request_id, decision_for
from agentrun._errors import IndeterminateToolCallError
from agentrun._frontier import Boundary, PendingApproval, PendingCall
from agentrun._idempotency import ClaimState, IdempotencyStore, derive_key, remote_key
from agentrun._messages import Message, ToolCall
from agentrun._resume import tracking_key
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._checkpoint_writer import CheckpointWriter
from agentrun.runner._state import Paused, RunState
from agentrun.runner._tools import Tool, ToolArgumentsError, ToolError
from agentrun.runner._tracing import tool_span

logger = logging.getLogger(__name__)


def pending_call(agent: AgentDefinition, call: ToolCall) -> PendingCall:
    """``call`` as a frontier names it: with its key, and whether it is safe to repeat."""
    tool = agent.tool(call.name)
    if tool is None:
        return PendingCall(call=call, safe_to_repeat=True)
    key = derive_key(tool.name, call.arguments, tool.key_arguments) if tool.key_arguments else None
    return PendingCall(
        call=call,
        idempotency_key=key,
        safe_to_repeat=tool.safe_to_repeat,
        requires_approval=tool.requires_approval,
    )


@dataclass
class Dispatcher:
    """Runs the calls of a run, each at most once, and appends their results."""

    idempotency: IdempotencyStore
    checkpoint_writer: CheckpointWriter
    spans: Tracer

    async def dispatch(
        self, state: RunState, pending: PendingCall, remaining: tuple[PendingCall, ...]
    ) -> None:
        """Run one call (claim, invoke, record) and append its result to the conversation."""
        call = pending.call
        tool = state.agent.tool(call.name)
        if tool is None:
            state.append(
                Message.tool_result(call.id, f"error: there is no tool named {call.name!r}")
            )
            return
        try:
            tool.validate(call.arguments)
        except ToolArgumentsError as error:
            state.append(Message.tool_result(call.id, f"error: {error}"))
            return
        if tool.requires_approval and not await self._approved(state, pending, remaining):
            return
        state.ensure_held()
        with tool_span(
            self.spans,
            tool=tool.name,
            call_id=call.id,
            disposition=tool.disposition.value,
            keyed=pending.idempotency_key is not None,
            run_id=state.run_id,
            tenant=state.tenant,
            fence=state.fence,
        ):
            outcome = await self._invoke(state, tool, pending)
        state.steps += 1
        state.append(Message.tool_result(call.id, outcome))

    async def _approved(
        self, state: RunState, pending: PendingCall, remaining: tuple[PendingCall, ...]
    ) -> bool:
        request_id = approval_request_id(state.tenant, state.run_id, pending.call.id)
        decision = await decision_for(self.idempotency, state.tenant, state.run_id, request_id)
        if decision is None:
            approval = PendingApproval(
                request_id=request_id, call_id=pending.call.id, tool=pending.call.name
            )
            await self.checkpoint_writer.write(
                state, Boundary.BEFORE_APPROVAL, pending=remaining, approval=approval
            )
            raise Paused(approval)
        if not decision.approved:
            state.denied.append(request_id)
            reason = f": {decision.reason}" if decision.reason else ""
            state.append(
                Message.tool_result(
                    pending.call.id, f"error: {decision.by} denied this call{reason}"
                )
            )
        return decision.approved

    async def _invoke(self, state: RunState, tool: Tool, pending: PendingCall) -> str:
        handed = (
            None
            if pending.idempotency_key is None
            else remote_key(state.tenant, state.run_id, pending.idempotency_key)
        )
        if pending.safe_to_repeat:
            return await self._call(tool, pending, key=handed)
        key = tracking_key(pending)
        claim = await self.idempotency.begin(
            state.tenant,
            state.run_id,
            key,
            holder=state.holder,
            fence=state.fence,
            call_id=pending.call.id,
            tool=tool.name,
        )
        if not claim.won:
            if claim.record.state is ClaimState.COMPLETED and claim.record.outcome is not None:
                return claim.record.outcome
            raise IndeterminateToolCallError(
                run_id=state.run_id, calls=[(pending.call.id, tool.name)]
            )
        try:
            outcome = await self._call(tool, pending, key=handed)
        except asyncio.CancelledError:
            # The run was stopped (its deadline, or the worker shutting down), not the tool
            # failing: nothing to fix in the tool. The claim stays in flight, so whoever carries
            # the run on asks whether the call happened.
            logger.warning(
                "run %s was cancelled while tool %s (call %s) was in flight; its claim stays "
                "in flight, so carrying the run on asks whether the call happened",
                state.run_id,
                tool.name,
                pending.call.id,
            )
            raise
        except Exception as exc:
            logger.error(
                "tool %s (call %s) of run %s failed; nobody knows whether it acted",
                tool.name,
                pending.call.id,
                state.run_id,
            )
            raise IndeterminateToolCallError(
                run_id=state.run_id, calls=[(pending.call.id, tool.name)]
            ) from exc
        try:
            await self.idempotency.record(
                state.tenant, state.run_id, key, outcome, holder=state.holder, fence=state.fence
            )
        except BaseException:
            # The call stays in flight, so a resume refuses it and a person must answer; say
            # what it returned (masked like a frontier, and cut short), so that they can.
            shown = self.checkpoint_writer.checkpoints.masker.text(outcome)
            logger.error(
                "tool %s (call %s) of run %s returned, but its outcome could not be recorded: %s",
                tool.name,
                pending.call.id,
                state.run_id,
                shown[:2000],
            )
            raise
        return outcome

    @staticmethod
    async def _call(tool: Tool, pending: PendingCall, *, key: str | None) -> str:
        try:
            return await tool.invoke(pending.call.arguments, key=key)
        except ToolError as error:
            return f"error: {error}"
