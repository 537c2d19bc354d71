"""Deleting an AgentRun forgets the run: its checkpoint, transcript, records and charges.

It waits for a live holder to let go first (the holder's daemon is stopped as the deletion
begins, so this is seconds, not the TTL): forgetting a run while a worker still writes to it
would leave half of it behind. The lease record itself stays, as a fence that never falls; it
names no holder and costs a few bytes.

It runs on every watch event of an AgentRun being deleted that still carries our finalizer,
not as a kopf deletion handler: kopf only runs those while its own finalizer is on the object,
and kopf's finalizer goes with the daemon once a run is finished — exactly the runs that most
often get deleted. Every replica may try; forgetting is idempotent and the finalizer's removal
is guarded by a JSON-patch test, so exactly one removes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from agentrun.checkpointing import Checkpointer
from agentrun.operator.context import FINALIZER, OperatorContext
from agentrun.operator.finalizers import drop_finalizer
from agentrun.operator.tenancy import tenant_for
from agentrun.operator.witness import pinned_tenant

LET_GO_TIMEOUT = 120.0


async def forget_run(context: OperatorContext, body: Mapping[str, Any]) -> None:
    meta = body["metadata"]
    namespace, name, run_id = meta["namespace"], meta["name"], meta["uid"]
    if not meta.get("deletionTimestamp") or FINALIZER not in (meta.get("finalizers") or ()):
        return
    tenant = pinned_tenant(body.get("status") or {})
    if tenant is None:  # never pinned: its namespace's tenant, as it would have been pinned
        labels = await context.api.namespace_labels(namespace)
        tenant = tenant_for(namespace, labels, (body.get("spec") or {}).get("tenant"))
    backend = context.backend
    if tenant is not None:
        deadline = asyncio.get_running_loop().time() + LET_GO_TIMEOUT
        while (held := await backend.leases.held(tenant, run_id)) is not None:
            if asyncio.get_running_loop().time() > deadline:
                raise RuntimeError(f"{held.holder} still holds run {run_id}; not forgetting it")
            await asyncio.sleep(min(held.remaining, context.config.poll_interval))
        await Checkpointer(backend.checkpoints, history=backend.history).forget(tenant, run_id)
        await backend.idempotency.forget(tenant, run_id)
        await backend.ledger.forget(tenant, run_id)
    context.metrics.run_is(run_id, None)
    await drop_finalizer(context.api, namespace, name)
