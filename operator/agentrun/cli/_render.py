"""How the CLI shows a frontier, a plan and a result; ``describe`` gives the first three lines."""

from __future__ import annotations

from pydantic import JsonValue

from agentrun._frontier import Checkpoint
from agentrun._idempotency import ClaimState, ListedRecord
from agentrun._leases import RunLease
from agentrun._resume import ResumePlan, ToolDisposition
from agentrun.runner._results import RunResult, RunStatus

ACTIONS = {
    ToolDisposition.COMPLETED: "replay the recorded outcome",
    ToolDisposition.NEVER_RAN: "dispatch it",
    ToolDisposition.INDETERMINATE: "refuse: nobody can say whether it happened",
}


def plan_lines(checkpoint: Checkpoint, plan: ResumePlan) -> list[str]:
    lines = [
        f"boundary {checkpoint.boundary.value}  fence {checkpoint.fence}  "
        f"written {checkpoint.written_at.isoformat(timespec='seconds')}"
    ]
    if not plan.decisions:
        lines.append("no outstanding calls")
    for decision in plan.decisions:
        call = decision.pending.call
        if decision.pending.safe_to_repeat:
            lines.append(f"  {call.id}  {call.name}  safe to repeat: dispatch it again")
            continue
        waits_on = checkpoint.approval
        if decision.withheld:
            action = "withhold: answer the model that it was not made"
        elif (
            decision.disposition is ToolDisposition.NEVER_RAN
            and waits_on is not None
            and waits_on.call_id == call.id
        ):
            action = f"waits on approval {waits_on.request_id}: made only once approved"
        else:
            action = ACTIONS[decision.disposition]
        lines.append(f"  {call.id}  {call.name}  {decision.disposition.value}: {action}")
        lines.append(f"      ({decision.reason})")
    for record in plan.unaccounted:
        lines.append(
            f"  {record.call_id}  {record.tool}  {UNACCOUNTED}: refuse until a person answers"
        )
        lines.append(f"      ({_unaccounted_reason(record)})")
    return lines


UNACCOUNTED = "not_in_any_frontier"


def _unaccounted_reason(record: ListedRecord) -> str:
    state = "in flight" if record.state is ClaimState.IN_FLIGHT else "completed"
    return (
        f"dispatched by {record.holder} (fence {record.fence}) after the newest frontier was "
        f"written, and {state}: the conversation does not know it"
    )


def lease_line(lease: RunLease | None) -> str:
    if lease is None:
        return "lease: free"
    return f"lease: held by {lease.holder} with fence {lease.fence}, {lease.remaining:.1f}s left"


def plan_json(
    checkpoint: Checkpoint, plan: ResumePlan, lease: RunLease | None
) -> dict[str, JsonValue]:
    calls: list[JsonValue] = [
        {
            "call_id": d.pending.call.id,
            "tool": d.pending.call.name,
            "disposition": d.disposition.value,
            "withheld": d.withheld,
            "reason": d.reason,
        }
        for d in plan.decisions
    ]
    calls.extend(
        {
            "call_id": record.call_id,
            "tool": record.tool,
            "disposition": UNACCOUNTED,
            "withheld": False,
            "reason": _unaccounted_reason(record),
        }
        for record in plan.unaccounted
    )
    return {
        "run_id": checkpoint.run_id,
        "tenant": checkpoint.tenant,
        "agent": checkpoint.agent_name,
        "agent_revision": checkpoint.agent_revision,
        "boundary": checkpoint.boundary.value,
        "fence": checkpoint.fence,
        "iteration": checkpoint.iteration,
        "usage": checkpoint.usage.model_dump(mode="json"),
        "cost_micros": checkpoint.cost_micros,
        "approval": None
        if checkpoint.approval is None
        else checkpoint.approval.model_dump(mode="json"),
        "written_at": checkpoint.written_at.isoformat(),
        "safe": plan.safe,
        "calls": calls,
        "lease": None
        if lease is None
        else {"holder": lease.holder, "fence": lease.fence, "remaining": lease.remaining},
    }


def result_line(result: RunResult) -> str:
    if result.status is RunStatus.AWAITING_APPROVAL and result.approval is not None:
        return (
            f"run {result.run_id} is waiting on approval {result.approval.request_id} "
            f"for {result.approval.tool} (call {result.approval.call_id}); decide with "
            f"`agentrun approve {result.run_id} --tenant {result.tenant} "
            f"--request {result.approval.request_id} [--deny]`"
        )
    summary = (
        f"run {result.run_id} {result.status.value} at iteration {result.iteration}, "
        f"{result.cost_micros} micros"
    )
    return f"{summary}: {result.output}" if result.output else summary
