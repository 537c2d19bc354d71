"""The AgentRun as the witness of what the store must hold: finding nothing is not "start afresh".

The store can lose a run's data on its own — a Redis restarted without persistence, keys
evicted, a run looked up under another tenant — and the runner cannot tell a run it lost from a
run that never began: either way the store holds no checkpoint, and ``AgentRunner.run`` would
call the model again from the input and dispatch every tool again. The AgentRun lives in etcd
and says what existed, so the operator asks it before a run starts from its input.

* ``_tenancy``: a run's tenant is decided once, just before its first lease, and pinned in
  ``status.tenant`` with that lease's fence (the CRD refuses changing it); a namespace
  relabelled later moves no run.
* ``refuse_fresh_start_if_lost``: called under the lease, just before a run starts from its
  input. The first start of every run leaves a record in the store (``RUN_STARTED_KEY``,
  written before the status first names a lease), so a status that names a lease while the
  store has no such record, or that names a checkpoint or a waiting call while the store has no
  checkpoint, means the store lost the run: ``StoreDataLost`` says what the status
  says existed, and the run waits for a person (delete the AgentRun to forget the run, or delete
  and create it again to start over knowingly).

The status it judges is the run as the API server last returned it to this replica, not a read
of its own: the takeover that follows writes the lease with a ``test`` of that very object's
``resourceVersion``, so the status judged is the status the lease is written over. If the takeover
finds the object moved, it reads it and judges again (``refuse_if_lost``) before writing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentrun._errors import AgentRunError
from agentrun._leases import RunLease
from agentrun._outcomes import SUCCEEDED, Outcome
from agentrun.operator._conditions import find
from agentrun.operator._context import OperatorContext

RUN_STARTED_KEY = "run-started:v1"
"""The idempotency record a run's first start leaves in the store: the store's own memory that
the run began, to hold up against the status when no checkpoint is found."""

LOST = Outcome.STORE_DATA_LOST.reason
"""Reason of the ``Succeeded=Unknown`` condition of a run parked on lost store data."""


class StoreDataLost(AgentRunError):
    """The status says the run began, or got further, and the store holds nothing of it."""

    outcome = Outcome.STORE_DATA_LOST

    def __init__(self, tenant: str, run_id: str, evidence: Sequence[str]) -> None:
        self.evidence = tuple(evidence)
        super().__init__(
            f"the store holds no checkpoint for run {run_id} of tenant {tenant}, but the "
            f"AgentRun's status says {'; '.join(evidence)}. The store lost this run's data (a "
            "Redis restarted without persistence, keys evicted, a store replaced); starting "
            "again from the input could make every call it made a second time, so it waits for "
            "you: delete the AgentRun to forget the run, or delete it and create it again to "
            "start over knowing its calls may repeat"
        )


def is_parked(status: Mapping[str, Any]) -> bool:
    """A worker already found this run's store data lost; only a person moves it on."""
    succeeded = find(status.get("conditions") or [], SUCCEEDED) or {}
    return succeeded.get("reason") == LOST


def _evidence(status: Mapping[str, Any], *, started_in_store: bool) -> list[str]:
    """What the status says existed that the store should still hold. Not the iteration: the
    status reports progress at every boundary, written to the store or not, so a run whose
    policy writes few checkpoints shows iterations no checkpoint holds (and a call that is not
    safe to repeat is always checkpointed before it is made, which ``writtenAt`` shows)."""
    said: list[str] = []
    if is_parked(status):
        said.append("a worker already found its store data lost")
    written = status.get("checkpoint") or {}
    if written.get("writtenAt"):
        said.append(
            f"a checkpoint was written ({written.get('boundary')} at iteration "
            f"{written.get('iteration')}, {written['writtenAt']})"
        )
    if pending := status.get("pendingApproval"):
        said.append(f"call {pending.get('callId')} waits on approval {pending.get('requestId')}")
    if calls := status.get("indeterminateCalls"):
        said.append(f"calls {', '.join(c.get('callId', '?') for c in calls)} were dispatched")
    lease = status.get("lease") or {}
    if lease.get("fence") is not None and not started_in_store:
        said.append(
            f"{lease.get('holder')} held its lease (fence {lease['fence']}), of which the store "
            "keeps no record"
        )
    return said


def refuse_if_lost(
    tenant: str, run_id: str, status: Mapping[str, Any], *, started_in_store: bool
) -> None:
    """``StoreDataLost`` if ``status`` says the store should hold more than nothing, given
    whether the store had the run's start record before this start."""
    evidence = _evidence(status, started_in_store=started_in_store)
    if evidence:
        raise StoreDataLost(tenant, run_id, evidence)


async def refuse_fresh_start_if_lost(
    context: OperatorContext, lease: RunLease, status: Mapping[str, Any]
) -> bool:
    """Under ``lease``, before the run starts from its input: raise ``StoreDataLost`` if
    ``status`` says the store should hold more than it does, else leave the start record.
    Whether the store had that record before (for the takeover to judge again)."""
    backend = context.backend
    tenant, run_id = lease.tenant, lease.run_id
    if await backend.checkpoints.latest(tenant, run_id) is not None:
        return True  # another worker started it meanwhile; the runner refuses to start it twice
    record = await backend.idempotency.read(tenant, run_id, RUN_STARTED_KEY)
    refuse_if_lost(tenant, run_id, status, started_in_store=record is not None)
    if record is None:
        claim = await backend.idempotency.begin(
            tenant, run_id, RUN_STARTED_KEY, holder=lease.holder, fence=lease.fence
        )
        if claim.won:
            await backend.idempotency.record(
                tenant,
                run_id,
                RUN_STARTED_KEY,
                f"started by {lease.holder} with fence {lease.fence}",
                holder=lease.holder,
                fence=lease.fence,
            )
    return record is not None
