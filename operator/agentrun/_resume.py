"""Deciding, for every call outstanding at the frontier, whether it already happened.

``plan_resume`` lists the run's idempotency records once (one round trip however many calls are
pending), reads back only the outcomes of completed ones, and returns a ``ResumePlan``.
It decides; it does not act, and it leaves no claim behind.

================  ================================  =====================================
disposition       what the record said              what the resume does
================  ================================  =====================================
completed         an outcome under the call's key   replays the outcome; the tool is not called
never_ran         nothing holds the key             dispatches the call for the first time
indeterminate     in flight, from a tenure now gone nothing: ``refuse_if_undecidable`` raises
================  ================================  =====================================

A call whose tool is safe to repeat (read-only or idempotent) is dispatched again whatever the
record says. A call that never ran but whose arguments were changed by redaction is *withheld*:
dispatching it with ``[REDACTED]`` where a card number was would be a call nobody asked for, so
the resume answers the model that the call was not made and why, and the model decides again.

The plan also accounts for every record of the run, not only those the frontier names. A claim
names the call it was made for; a record whose call is neither outstanding in the frontier nor
answered in the conversation was made after the newest frontier was written, by a turn whose
frontier was lost (a store that lost an acknowledged write, a frontier restored from a backup).
Carrying on from the older frontier would ask the model that turn again, and a call made then
may have booked a seat nobody will hear of, or be made a second time. So such a record, in
flight or completed, is ``unaccounted`` and the plan is not safe until a person answers for it.

``Resumer`` puts a lease in front of all this: it takes the run's lease before it reads the
frontier, so the worker that loses never sees the run, and it releases the lease (and the
checkpointer lets go of the run) on every path where it does not hand it to its caller.
``ClaimingLeaseStore`` puts the resume claim behind a lease of the process's own, for workers
that share no lease store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from agentrun._base import FrozenModel
from agentrun._checkpointing import Checkpointer
from agentrun._errors import (
    ConfigurationError,
    IndeterminateToolCallError,
    NothingCheckpointedError,
    ResumeConflictError,
)
from agentrun._frontier import Checkpoint, PendingCall
from agentrun._history import HistoryStore
from agentrun._idempotency import (
    Claim,
    ClaimState,
    IdempotencyStore,
    ListedRecord,
    MaskedOutcomes,
    RunAndRecordsReader,
    marker_key,
)
from agentrun._leases import LeasePolicy, LeaseStore, RunLease
from agentrun._messages import Message

RESUME_CLAIM_KEY = "resume:v1"
RESUME_CLAIM_TTL = 300.0


class ToolDisposition(StrEnum):
    """What a resume does with an outstanding call, from what its record says."""

    COMPLETED = "completed"
    NEVER_RAN = "never_ran"
    INDETERMINATE = "indeterminate"


class CallDecision(FrozenModel):
    """One outstanding call, its disposition, the outcome to replay (if any) and why."""

    pending: PendingCall
    disposition: ToolDisposition
    outcome: str | None = None
    withheld: bool = False
    reason: str


class ResumePlan(FrozenModel):
    """``decisions``: one per call outstanding in the frontier. ``unaccounted``: the records
    of calls that no frontier names and the conversation does not answer (see the module)."""

    run_id: str
    tenant: str
    decisions: tuple[CallDecision, ...] = ()
    unaccounted: tuple[ListedRecord, ...] = ()

    def _with(self, disposition: ToolDisposition) -> tuple[CallDecision, ...]:
        return tuple(d for d in self.decisions if d.disposition is disposition)

    @property
    def completed(self) -> tuple[CallDecision, ...]:
        """Calls whose recorded outcome is replayed; each decision carries the outcome."""
        return self._with(ToolDisposition.COMPLETED)

    @property
    def to_dispatch(self) -> tuple[PendingCall, ...]:
        return tuple(d.pending for d in self._with(ToolDisposition.NEVER_RAN) if not d.withheld)

    @property
    def withheld(self) -> tuple[PendingCall, ...]:
        return tuple(d.pending for d in self._with(ToolDisposition.NEVER_RAN) if d.withheld)

    @property
    def indeterminate(self) -> tuple[PendingCall, ...]:
        return tuple(d.pending for d in self._with(ToolDisposition.INDETERMINATE))

    @property
    def safe(self) -> bool:
        return not self.indeterminate and not self.unaccounted


def tracking_key(pending: PendingCall) -> str:
    """The key a call's intent and outcome are recorded under."""
    return pending.idempotency_key or marker_key(pending.call.id)


async def _decide(
    pending: PendingCall,
    tenant: str,
    run_id: str,
    idempotency: IdempotencyStore,
    listed: Mapping[str, ListedRecord],
) -> CallDecision:
    """``listed`` is every record of the run by key: a call whose key has none never ran, and
    only a completed one is read again, for its outcome (the listing leaves outcomes out)."""
    if pending.safe_to_repeat and not pending.arguments_masked:
        return CallDecision(
            pending=pending,
            disposition=ToolDisposition.NEVER_RAN,
            reason="its tool is safe to repeat; it is dispatched again",
        )
    record = None if pending.safe_to_repeat else listed.get(tracking_key(pending))
    if record is None:
        if pending.arguments_masked:
            return CallDecision(
                pending=pending,
                disposition=ToolDisposition.NEVER_RAN,
                withheld=True,
                reason="its arguments were masked in the checkpoint and it holds no outcome: "
                "the model is told it was not made instead of it being dispatched masked",
            )
        return CallDecision(
            pending=pending,
            disposition=ToolDisposition.NEVER_RAN,
            reason="no record holds its key: it was never dispatched",
        )
    if record.state is ClaimState.COMPLETED:
        stored = await idempotency.read(tenant, run_id, record.key)
        if stored is not None:
            return CallDecision(
                pending=pending,
                disposition=ToolDisposition.COMPLETED,
                outcome=stored.outcome,
                reason=f"an outcome was recorded by {stored.holder}",
            )
    kind = "its idempotency key" if pending.idempotency_key else "its dispatch marker (no key)"
    return CallDecision(
        pending=pending,
        disposition=ToolDisposition.INDETERMINATE,
        reason=f"{kind} is held in flight by {record.holder} (fence {record.fence}), which is "
        "gone: the call may or may not have happened",
    )


async def plan_resume(
    checkpoint: Checkpoint,
    idempotency: IdempotencyStore,
    transcript: Sequence[Message] | None = None,
    *,
    records: Sequence[ListedRecord] | None = None,
) -> ResumePlan:
    """Decide every pending call of ``checkpoint`` and account for every record of its run;
    read-only. ``transcript`` is the checkpoint's whole conversation; it must be given for a
    checkpoint whose transcript is out of line (``Checkpointer.transcript`` resolves it).
    ``records`` is the run's records (``IdempotencyStore.records``) when they were read already,
    under the lease and no earlier than the checkpoint (``read_and_plan``); else they are
    listed here."""
    if transcript is None:
        if checkpoint.history_handle is not None:
            raise ConfigurationError(
                f"the checkpoint of run {checkpoint.run_id!r} keeps its transcript out of line: "
                "pass plan_resume the transcript (Checkpointer.transcript resolves it), which "
                "says which recorded calls the conversation already answers"
            )
        transcript = checkpoint.messages
    if records is None:
        records = await idempotency.records(checkpoint.tenant, checkpoint.run_id)
    listed = {record.key: record for record in records}
    decisions = [
        await _decide(pending, checkpoint.tenant, checkpoint.run_id, idempotency, listed)
        for pending in checkpoint.pending
    ]
    named = {tracking_key(pending) for pending in checkpoint.pending}
    answered = {message.tool_call_id for message in transcript if message.role == "tool"}
    unaccounted = tuple(
        record
        for record in records
        if record.call_id is not None and record.key not in named and record.call_id not in answered
    )
    return ResumePlan(
        run_id=checkpoint.run_id,
        tenant=checkpoint.tenant,
        decisions=tuple(decisions),
        unaccounted=unaccounted,
    )


def refuse_if_undecidable(plan: ResumePlan) -> None:
    """Raise ``IndeterminateToolCallError`` naming every call nobody can decide."""
    if not plan.safe:
        raise IndeterminateToolCallError(
            run_id=plan.run_id,
            calls=[(p.call.id, p.call.name) for p in plan.indeterminate],
            unnamed=[(r.call_id or r.key, r.tool or "a tool") for r in plan.unaccounted],
        )


async def claim_resume(
    idempotency: IdempotencyStore,
    tenant: str,
    run_id: str,
    *,
    holder: str,
    fence: int = 0,
    ttl: float = RESUME_CLAIM_TTL,
) -> Claim:
    """An at-most-once claim on resuming the run, expiring after ``ttl`` (five minutes).

    The claim goes through the same machinery as a tool call's; a second worker gets
    ``ResumeConflictError`` until the first releases it or it expires.
    """
    claim = await idempotency.begin(
        tenant, run_id, RESUME_CLAIM_KEY, holder=holder, fence=fence, ttl=ttl
    )
    if not claim.won:
        raise ResumeConflictError(run_id=run_id, tenant=tenant, holder=claim.record.holder)
    return claim


async def release_resume(
    idempotency: IdempotencyStore, tenant: str, run_id: str, claim: Claim
) -> None:
    await idempotency.abandon(
        tenant, run_id, RESUME_CLAIM_KEY, holder=claim.record.holder, fence=claim.record.fence
    )


class ClaimingLeaseStore:
    """Leases of this process's own, each taken with the run's resume claim: what keeps two
    workers off one run when they share the idempotency store but no lease store.

    ``local`` (a memory lease store) keeps apart only the runs of the process holding it;
    alone, two workers sharing the other stores would both carry a run on and both dispatch
    its outstanding call. So every acquisition also takes the at-most-once resume claim
    (``claim_resume``, under the new lease's fence) and a worker that finds it held gets
    ``ResumeConflictError``, having read nothing; every release gives the claim back. The
    claim is the reference contract's: it expires after ``RESUME_CLAIM_TTL`` on the store's
    clock, so a crashed worker strands the run no longer than that, and it is not renewed, so
    it covers no longer than that either.
    """

    def __init__(self, idempotency: IdempotencyStore, local: LeaseStore) -> None:
        self._idempotency = idempotency
        self._local = local
        self._claims: dict[tuple[str, str, int], Claim] = {}

    async def acquire(self, tenant: str, run_id: str, holder: str, *, ttl: float) -> RunLease:
        lease = await self._local.acquire(tenant, run_id, holder, ttl=ttl)
        try:
            claim = await claim_resume(
                self._idempotency, tenant, run_id, holder=holder, fence=lease.fence
            )
        except BaseException:
            await self._local.release(lease)
            raise
        self._claims[(tenant, run_id, lease.fence)] = claim
        return lease

    async def renew(self, lease: RunLease, *, ttl: float) -> RunLease:
        return await self._local.renew(lease, ttl=ttl)

    async def release(self, lease: RunLease) -> None:
        claim = self._claims.pop((lease.tenant, lease.run_id, lease.fence), None)
        try:
            if claim is not None:
                await release_resume(self._idempotency, lease.tenant, lease.run_id, claim)
        finally:
            await self._local.release(lease)

    async def held(self, tenant: str, run_id: str) -> RunLease | None:
        return await self._local.held(tenant, run_id)


@dataclass(frozen=True)
class CarriedRun:
    """What ``Resumer.resume`` hands over: the frontier, its whole transcript, the decision,
    and the lease the caller now holds (and must release, e.g. with a ``Leaseholder``)."""

    checkpoint: Checkpoint
    messages: tuple[Message, ...]
    plan: ResumePlan
    lease: RunLease


@dataclass(kw_only=True)
class Resumer:
    """Takes a run's lease, then reads and decides its frontier, so the worker that loses never
    sees the run; hands the lease to its caller or releases it."""

    checkpoints: Checkpointer
    leases: LeaseStore
    idempotency: IdempotencyStore
    history: HistoryStore | None = None
    policy: LeasePolicy = field(default_factory=LeasePolicy)

    async def resume(
        self,
        run_id: str,
        *,
        tenant: str,
        holder: str,
        before_planning: Callable[[Checkpoint], Awaitable[None]] | None = None,
    ) -> CarriedRun:
        """Take the lease, then read and decide the frontier.

        ``before_planning`` runs under the lease, after the frontier is read and before it is
        decided: the place to record people's answers (resolutions) so that no other worker can
        be dispatching the call they answer for at the same moment.

        Raises ``RunLeaseError`` (another worker holds it; nothing was read),
        ``NothingCheckpointedError``, ``CheckpointFormatError``, ``HistoryUnavailableError``;
        on each of the last three the lease is released before the error leaves.
        """
        lease = await self.leases.acquire(tenant, run_id, holder, ttl=self.policy.ttl)
        try:
            checkpoint, messages, plan = await read_and_plan(
                self.checkpoints,
                self.idempotency,
                tenant,
                run_id,
                history=self.history,
                before_planning=before_planning,
            )
        except BaseException:
            self.checkpoints.let_go(tenant, run_id)
            await self.leases.release(lease)
            raise
        return CarriedRun(checkpoint=checkpoint, messages=messages, plan=plan, lease=lease)


async def read_and_plan(
    checkpoints: Checkpointer,
    idempotency: IdempotencyStore,
    tenant: str,
    run_id: str,
    *,
    history: HistoryStore | None = None,
    before_planning: Callable[[Checkpoint], Awaitable[None]] | None = None,
) -> tuple[Checkpoint, tuple[Message, ...], ResumePlan]:
    """The run's frontier, its whole transcript, and the plan for its outstanding calls; for a
    caller that already keeps other workers away (the lease, or the resume claim).

    Without ``before_planning``, a ``RunAndRecordsReader`` holding ``idempotency``'s records
    reads the frontier, its segments and the run's records in one round trip. That is as safe
    as listing the records after the frontier: both happen after the lease is held, so every
    record a former holder made before losing it is seen either way, and one snapshot cannot
    pair a frontier with records older than it (a record written after the snapshot is by a
    holder that has lost the lease, as one written after the separate listing always could
    be). With ``before_planning`` the records are listed after it, since it writes records
    (people's resolutions) the plan must see.
    """
    commits = checkpoints.commits
    records: Sequence[ListedRecord] | None = None
    if (
        before_planning is None
        and isinstance(commits, RunAndRecordsReader)
        and commits.lists_records_of(_listing(idempotency))
        and history in (None, checkpoints.history)
    ):
        payload, segments, records = await commits.read_run_and_records(tenant, run_id)
        found = await checkpoints.read_back(run_id, payload, segments, history)
    else:
        found = await checkpoints.resumable(tenant, run_id, history)
    if found is None:
        raise NothingCheckpointedError(run_id=run_id, tenant=tenant)
    checkpoint, messages = found
    if before_planning is not None:
        await before_planning(checkpoint)
    return (
        checkpoint,
        messages,
        await plan_resume(checkpoint, idempotency, messages, records=records),
    )


def _listing(idempotency: IdempotencyStore) -> IdempotencyStore:
    """The store whose records ``idempotency.records`` lists as they are: a ``MaskedOutcomes``
    masks outcomes only, and a listing carries none."""
    return idempotency.inner if isinstance(idempotency, MaskedOutcomes) else idempotency
