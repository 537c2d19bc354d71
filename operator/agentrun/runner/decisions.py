"""What people decide for a run: approvals, and answers for calls nobody else can decide.

Both are recorded through the idempotency store's ``settle`` — a person's word is not fenced,
since a person outranks every worker — so they need no store of their own and survive whatever
the workers do. An approval lives under a key derived from its request id; an answer for an
indeterminate call settles that call's own record, so the next resume plans it as completed
(it ran, with this result) or never ran (it did not run).
"""

from __future__ import annotations

import hashlib

from agentrun._base import FrozenModel
from agentrun.errors import ConfigurationError
from agentrun.frontier import Checkpoint
from agentrun.idempotency import ClaimState, IdempotencyStore
from agentrun.resume import tracking_key

APPROVAL_PREFIX = "approval:v1:"


class ApprovalDecision(FrozenModel):
    approved: bool
    by: str
    reason: str = ""


def approval_request_id(tenant: str, run_id: str, call_id: str) -> str:
    """Deterministic, so a resumed run asks for the same approval rather than a new one."""
    digest = hashlib.sha256(f"{len(tenant)}:{tenant}{len(run_id)}:{run_id}{call_id}".encode())
    return "apr-" + digest.hexdigest()[:12]


async def decide(
    idempotency: IdempotencyStore,
    tenant: str,
    run_id: str,
    request_id: str,
    *,
    approved: bool,
    by: str,
    reason: str = "",
) -> None:
    decision = ApprovalDecision(approved=approved, by=by, reason=reason)
    await idempotency.settle(
        tenant, run_id, APPROVAL_PREFIX + request_id, decision.model_dump_json(), by=by
    )


async def decision_for(
    idempotency: IdempotencyStore, tenant: str, run_id: str, request_id: str
) -> ApprovalDecision | None:
    record = await idempotency.read(tenant, run_id, APPROVAL_PREFIX + request_id)
    if record is None or record.outcome is None:
        return None
    return ApprovalDecision.model_validate_json(record.outcome)


async def resolve(
    idempotency: IdempotencyStore,
    checkpoint: Checkpoint,
    call_id: str,
    *,
    ran: bool,
    result: str | None,
    by: str,
) -> bool:
    """Record a person's answer for an outstanding call of ``checkpoint``, if it is still
    undecidable (its record in flight); False, and nothing written, otherwise.

    Call it holding the run's lease: then no worker is dispatching the call meanwhile, and an
    answer given twice cannot wipe out the dispatch the first one allowed.
    """
    pending = next((p for p in checkpoint.pending if p.call.id == call_id), None)
    if pending is None:
        outstanding = ", ".join(p.call.id for p in checkpoint.pending) or "none"
        raise ConfigurationError(
            f"run {checkpoint.run_id!r} has no outstanding call {call_id!r} "
            f"(outstanding: {outstanding}); check the id with `agentrun inspect`"
        )
    if ran and result is None:
        raise ConfigurationError("--ran needs --result: the result the call had")
    key = tracking_key(pending)
    record = await idempotency.read(checkpoint.tenant, checkpoint.run_id, key)
    if record is None or record.state is not ClaimState.IN_FLIGHT:
        return False
    return await idempotency.settle(
        checkpoint.tenant,
        checkpoint.run_id,
        key,
        result if ran else None,
        by=by,
        claimed_by=(record.holder, record.fence),
    )
