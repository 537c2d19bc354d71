"""Deleting an AgentRun forgets the run: its checkpoint, transcript, records and charges.

It waits for a live holder to let go first (the holder's daemon is stopped as the deletion
begins, so this is seconds, not the TTL): forgetting a run while a worker still writes to it
would leave half of it behind. The lease record itself stays, as a fence that never falls; it
names no holder and costs a few bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from agentrun.checkpointing import Checkpointer
from agentrun.operator.context import FINALIZER, OperatorContext
from agentrun.operator.finalizers import drop_finalizer
from agentrun.operator.tenancy import tenant_for


async def forget_run(context: OperatorContext, body: Mapping[str, Any]) -> None:
    meta = body["metadata"]
    namespace, name, run_id = meta["namespace"], meta["name"], meta["uid"]
    if FINALIZER not in (meta.get("finalizers") or ()):
        return
    labels = await context.api.namespace_labels(namespace)
    tenant = tenant_for(namespace, labels, (body.get("spec") or {}).get("tenant"))
    backend = context.backend
    if tenant is not None:
        held = await backend.leases.held(tenant, run_id)
        if held is not None:
            raise kopf.TemporaryError(
                f"{held.holder} still holds run {run_id}; forgetting it once it lets go",
                delay=max(0.5, min(held.remaining, context.config.poll_interval)),
            )
        await Checkpointer(backend.checkpoints, history=backend.history).forget(tenant, run_id)
        await backend.idempotency.forget(tenant, run_id)
        await backend.ledger.forget(tenant, run_id)
    context.metrics.run_is(run_id, None)
    await drop_finalizer(context.api, namespace, name)
