"""What people decide for a run: approvals, and answers for calls nobody else can decide.

The CLI (``agentrun approve``, ``agentrun resolve``), the local console (``agentrun console``)
and the operator (``spec.approvals``, ``spec.resolutions``) record people's decisions through
these functions, and the runner reads them back (``decision_for``); so they are the kit's, not
any one front end's. ``answer_approval`` and ``answer_call`` are what a front end over a store
calls: they check the run is waiting on what is answered, and answer a call under the run's
lease.

Both are recorded through the idempotency store's ``settle`` — a person's word is not fenced,
since a person outranks every worker — so they need no store of their own and survive whatever
the workers do. An approval lives under a key derived from its request id; an answer for an
indeterminate call settles that call's own record, so the next resume plans it as completed
(it ran, with this result) or never ran (it did not run).

A call that no frontier names (``ResumePlan.unaccounted``) is answered the same way, by its call
id: "it did not run" drops its record, "it ran" keeps it as the person's answer. Either way the
run carries on from its newest frontier without it in the conversation; a keyed call the model
asks for again is answered from the record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from agentrun._backend import Backend
from agentrun._base import FrozenModel
from agentrun._checkpointing import Checkpointer
from agentrun._errors import ConfigurationError, NothingCheckpointedError
from agentrun._frontier import Checkpoint, PendingApproval
from agentrun._history import HistoryStore, load_transcript
from agentrun._idempotency import ClaimState, IdempotencyStore
from agentrun._leases import default_holder
from agentrun._resume import ResumePlan, plan_resume, tracking_key

APPROVAL_PREFIX = "approval:v1:"


class ApprovalDecision(FrozenModel):
    """A person's answer to an approval request: approved or not, by whom, and why."""

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
    """Record ``by``'s decision on approval ``request_id``; the run acts on it when it carries
    on. A later decision replaces it; the run acts on the one it finds when it reaches the call."""
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


async def plan_for(
    idempotency: IdempotencyStore, checkpoint: Checkpoint, history: HistoryStore | None = None
) -> ResumePlan:
    """What a resume from ``checkpoint`` would do with each call (``plan_resume``), reading the
    transcript from ``history`` when it is out of line: its ``indeterminate`` and ``unaccounted``
    calls are the undecidable ones, which only an answer lets the run carry on past."""
    transcript = None
    if checkpoint.history_handle is not None:
        if history is None:
            raise ConfigurationError(
                f"run {checkpoint.run_id!r} keeps its transcript out of line: to find the calls "
                "no frontier names, give the history store (history=...) that holds it"
            )
        transcript = await load_transcript(
            history, checkpoint.tenant, checkpoint.run_id, checkpoint.history_handle
        )
    return await plan_resume(checkpoint, idempotency, transcript)


async def _unnamed(
    idempotency: IdempotencyStore, checkpoint: Checkpoint, history: HistoryStore | None
) -> dict[str, str]:
    """Call id -> tracking key of every call of the run that no frontier names."""
    plan = await plan_for(idempotency, checkpoint, history)
    return {record.call_id or record.key: record.key for record in plan.unaccounted}


async def answerable(
    idempotency: IdempotencyStore, checkpoint: Checkpoint, history: HistoryStore | None = None
) -> dict[str, str]:
    """Call id -> tracking key of every call a person may answer for now: each call outstanding
    in ``checkpoint``, and each call no frontier names (``history`` resolves an out-of-line
    transcript, which says which recorded calls the conversation already answers)."""
    calls = {pending.call.id: tracking_key(pending) for pending in checkpoint.pending}
    calls.update(await _unnamed(idempotency, checkpoint, history))
    return calls


async def resolve(
    idempotency: IdempotencyStore,
    checkpoint: Checkpoint,
    call_id: str,
    *,
    ran: bool,
    result: str | None,
    by: str,
    history: HistoryStore | None = None,
) -> bool:
    """Record a person's answer for a call of the run that is still undecidable: one
    outstanding in ``checkpoint`` whose record is in flight, or one that no frontier names
    (``history`` is needed to find those when the transcript is out of line). False, and
    nothing written, otherwise.

    Call it holding the run's lease: then no worker is dispatching the call meanwhile, and an
    answer given twice cannot wipe out the dispatch the first one allowed.
    """
    pending = next((p for p in checkpoint.pending if p.call.id == call_id), None)
    if pending is not None:
        key = tracking_key(pending)
    else:
        unnamed = await _unnamed(idempotency, checkpoint, history)
        if call_id not in unnamed:
            named = [p.call.id for p in checkpoint.pending]
            outstanding = ", ".join([*named, *unnamed]) or "none"
            raise ConfigurationError(
                f"run {checkpoint.run_id!r} has no outstanding call {call_id!r} "
                f"(outstanding: {outstanding}); check the id with `agentrun inspect`"
            )
        key = unnamed[call_id]
    if ran and result is None:
        raise ConfigurationError(
            f"an answer that call {call_id!r} ran needs its result: pass result= (what the call "
            "returned), or ran=False if it did not run"
        )
    record = await idempotency.read(checkpoint.tenant, checkpoint.run_id, key)
    if record is None:
        return False
    if record.state is ClaimState.IN_FLIGHT:
        claimed_by: tuple[str, int] | None = (record.holder, record.fence)
    elif pending is None:
        claimed_by = None  # completed, and no frontier names it: the person accounts for it
    else:
        return False
    return await idempotency.settle(
        checkpoint.tenant,
        checkpoint.run_id,
        key,
        result if ran else None,
        by=by,
        claimed_by=claimed_by,
    )


def append_operations(
    current: Mapping[str, Any], field: str, entry: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The JSON patch that appends ``entry`` to an AgentRun's ``spec.<field>`` (``approvals``,
    ``resolutions``), as a front end in a cluster sends it as the person deciding: guarded by
    the ``resourceVersion`` the person saw, so an answer never lands on a run that changed since
    it was checked (the API server evaluates the ``test`` with the write)."""
    existing = (current.get("spec") or {}).get(field)
    return [
        {
            "op": "test",
            "path": "/metadata/resourceVersion",
            "value": current["metadata"]["resourceVersion"],
        },
        {"op": "add", "path": f"/spec/{field}/-", "value": dict(entry)}
        if existing is not None
        else {"op": "add", "path": f"/spec/{field}", "value": [dict(entry)]},
    ]


ANSWER_LEASE_TTL = 30.0
"""Seconds the lease taken to answer for a call outlives a process that dies holding it."""


async def _frontier(backend: Backend, tenant: str, run_id: str) -> Checkpoint:
    checkpoint = await Checkpointer(backend.checkpoints).latest(tenant, run_id)
    if checkpoint is None:
        raise NothingCheckpointedError(run_id=run_id, tenant=tenant)
    return checkpoint


async def answer_approval(
    backend: Backend, tenant: str, run_id: str, request_id: str, decision: ApprovalDecision
) -> PendingApproval:
    """Record ``decision`` for approval ``request_id`` of a run that waits on it; the approval.

    Args:
        backend: The run's stores.
        tenant: The run's tenant.
        run_id: The run's id.
        request_id: The approval request the run waits on.
        decision: Approved or not, by whom, and why.

    Returns:
        The approval the run waits on (its tool and call).

    Raises:
        NothingCheckpointedError: The run has no frontier.
        ConfigurationError: The run waits on no approval, or on another one; nothing written.
        StoreUnavailableError: The store could not be reached or answered with an error.
    """
    waiting = (await _frontier(backend, tenant, run_id)).approval
    if waiting is None or waiting.request_id != request_id:
        now = f"approval {waiting.request_id}" if waiting else "nothing"
        raise ConfigurationError(
            f"run {run_id!r} is not waiting on approval {request_id!r} (it is waiting on "
            f"{now}); check with `agentrun inspect {run_id} --tenant {tenant}`"
        )
    await decide(backend.idempotency, tenant, run_id, request_id, **decision.model_dump())
    return waiting


async def answer_call(
    backend: Backend,
    tenant: str,
    run_id: str,
    call_id: str,
    *,
    ran: bool,
    result: str | None,
    by: str,
) -> None:
    """Record a person's answer for an undecidable call, holding the run's lease meanwhile (as
    a resume does: no worker dispatches the call while it is answered).

    Args:
        backend: The run's stores.
        tenant: The run's tenant.
        run_id: The run's id.
        call_id: The undecidable call.
        ran: Whether it took effect.
        result: What it returned, when it ran.
        by: Who answers.

    Raises:
        NothingCheckpointedError: The run has no frontier.
        ConfigurationError: The call is not undecidable now (its outcome was recorded, or it was
            answered already), or ``ran`` without ``result``; nothing written.
        RunLeaseError: A worker holds the run; answer once its lease is free.
        StoreUnavailableError: The store could not be reached or answered with an error.
    """
    lease = await backend.leases.acquire(tenant, run_id, default_holder(), ttl=ANSWER_LEASE_TTL)
    try:
        checkpoint = await _frontier(backend, tenant, run_id)
        recorded = await resolve(
            backend.idempotency,
            checkpoint,
            call_id,
            ran=ran,
            result=result,
            by=by,
            history=backend.history,
        )
    finally:
        await backend.leases.release(lease)
    if not recorded:
        raise ConfigurationError(
            f"call {call_id} of run {run_id!r} is not undecidable now: nothing is in flight "
            "under it (its outcome was recorded, or it was answered already); nothing was "
            f"written. See `agentrun inspect {run_id} --tenant {tenant}`"
        )
