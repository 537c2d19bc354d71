"""People's answers in an AgentRun's spec, and when the store hears of them.

``spec.approvals`` are recorded before each attempt: a decision waits for the run to reach its
call, so recording it early dispatches nothing. ``spec.resolutions`` are recorded only under the
run's lease, just before the resume plans (``Resumer.resume``'s ``before_planning``): an answer
that a call did not run lets the resume dispatch it, which must never happen beside another
replica dispatching the same call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrun._decisions import answerable, decide, resolve
from agentrun._frontier import Checkpoint
from agentrun._history import HistoryStore
from agentrun._idempotency import IdempotencyStore
from agentrun.operator._resource import AgentRunSpec, Resolution


def waiting_on_people(spec: AgentRunSpec, status: Mapping[str, Any]) -> bool:
    """Whether the run waits on an approval or a resolution that ``spec`` does not give yet."""
    pending = status.get("pendingApproval")
    if pending is not None:
        answered = {a.request_id for a in spec.approvals or ()}
        if pending["requestId"] not in answered:
            return True
    undecided = {call["callId"] for call in status.get("indeterminateCalls") or ()}
    answered = {r.call_id for r in spec.resolutions or ()}
    return bool(undecided - answered)


async def record_approvals(
    idempotency: IdempotencyStore, tenant: str, run_id: str, spec: AgentRunSpec
) -> None:
    for approval in spec.approvals or ():
        await decide(
            idempotency,
            tenant,
            run_id,
            approval.request_id,
            approved=approval.decision == "approve",
            by=approval.by,
            reason=approval.reason or "",
        )


async def record_resolutions(
    idempotency: IdempotencyStore,
    history: HistoryStore,
    checkpoint: Checkpoint,
    spec: AgentRunSpec,
) -> list[Resolution]:
    """Under the lease: a person's answer for each call of the run that is still undecidable
    (outstanding in ``checkpoint``, or named by no frontier); the answers recorded."""
    answers = {r.call_id: r for r in spec.resolutions or ()}
    recorded: list[Resolution] = []
    for call_id in await answerable(idempotency, checkpoint, history) if answers else ():
        answer = answers.get(call_id)
        if answer is not None and await resolve(
            idempotency,
            checkpoint,
            call_id,
            ran=answer.outcome == "ran",
            result=answer.result,
            by=answer.by,
            history=history,
        ):
            recorded.append(answer)
    return recorded
