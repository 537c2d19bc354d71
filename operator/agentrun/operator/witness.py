"""The AgentRun as the witness of what the store must hold: finding nothing is not "start afresh".

The store can lose a run's data on its own — a Redis restarted without persistence, keys
evicted, a run looked up under another tenant — and the runner cannot tell a run it lost from a
run that never began: either way the store holds no checkpoint, and ``AgentRunner.run`` would
call the model again from the input and dispatch every tool again. The AgentRun lives in etcd
and says what existed, so the operator asks it before a run starts from its input.

* ``pin_tenant``: a run's tenant is decided once, before its first lease, and kept in
  ``status.tenant`` (the CRD refuses changing it); a namespace relabelled later moves no run.
* ``refuse_fresh_start_if_lost``: called under the lease, just before a run starts from its
  input. The first start of every run leaves a record in the store (``RUN_STARTED_KEY``,
  written before the status first names a lease), so a status that names a lease while the
  store has no such record, or that names a checkpoint or a waiting call while the store has no
  checkpoint, means the store lost the run: ``StoreDataLost`` says what the status
  says existed, and the run waits for a person (delete the AgentRun to forget it, or delete and
  create it again to start over knowingly).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentrun.errors import AgentRunError
from agentrun.leases import RunLease
from agentrun.operator.conditions import find
from agentrun.operator.context import OperatorContext
from agentrun.operator.kubeapi import KubeApi, Rejected
from agentrun.operator.tenancy import tenant_for
from agentrun.outcomes import SUCCEEDED, Outcome

RUN_STARTED_KEY = "run-started:v1"
"""The idempotency record a run's first start leaves in the store: the store's own memory that
the run began, to hold up against the status when no checkpoint is found."""

LOST = Outcome.STORE_DATA_LOST.reason
"""Reason of the ``Succeeded=Unknown`` condition of a run parked on lost store data."""

ATTEMPTS = 5


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


def pinned_tenant(status: Mapping[str, Any]) -> str | None:
    tenant = status.get("tenant")
    return str(tenant) if tenant else None


async def pin_tenant(api: KubeApi, namespace: str, name: str, requested: str | None) -> str | None:
    """The run's tenant: ``status.tenant`` once pinned, else its namespace's, pinned now; None
    when the run asks for a tenant its namespace does not grant (nothing is pinned then).

    Replicas racing to pin agree: the write tests the resourceVersion it was computed from, and
    the loser reads the winner's tenant back instead of writing its own.
    """
    for _ in range(ATTEMPTS):
        current = await api.get(namespace, name)
        status = (current or {}).get("status") or {}
        if (pinned := pinned_tenant(status)) is not None:
            return pinned
        labels = await api.namespace_labels(namespace)
        tenant = tenant_for(namespace, labels, requested)
        if tenant is None or current is None:  # refused, or gone: nothing to pin
            return tenant
        try:
            await api.pin_status(current, "tenant", tenant)
        except Rejected:
            continue
        return tenant
    raise Rejected(f"status of {namespace}/{name} kept changing while its tenant was pinned")


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


async def refuse_fresh_start_if_lost(
    context: OperatorContext, namespace: str, name: str, lease: RunLease
) -> None:
    """Under ``lease``, before the run starts from its input: raise ``StoreDataLost`` if the
    AgentRun says the store should hold more than it does, else leave the start record."""
    backend = context.backend
    tenant, run_id = lease.tenant, lease.run_id
    if await backend.checkpoints.latest(tenant, run_id) is not None:
        return  # another worker started it meanwhile; the runner refuses to start it twice
    current = await context.api.get(namespace, name)
    record = await backend.idempotency.read(tenant, run_id, RUN_STARTED_KEY)
    evidence = _evidence((current or {}).get("status") or {}, started_in_store=record is not None)
    if evidence:
        raise StoreDataLost(tenant, run_id, evidence)
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
