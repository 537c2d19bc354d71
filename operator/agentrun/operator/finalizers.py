"""Our finalizer, added before a run first touches a store and removed once it is forgotten.

kopf keeps a finalizer of its own while a run's daemon may be spawned, and drops it as soon as
the run is being deleted (``main._to_run``). Ours is separate and lives longer: a finished run
still has a checkpoint, a transcript and records that deleting the AgentRun must forget, and the
forget takes the run's lease, so the object cannot go before its holder has let go. A run that never
touched a store (say, one rejected for its tenant) never gets it.
"""

from __future__ import annotations

from typing import Any

from agentrun.operator.context import FINALIZER
from agentrun.operator.kubeapi import KubeApi, Rejected

ATTEMPTS = 5


async def ensure_finalizer(api: KubeApi, namespace: str, name: str) -> dict[str, Any] | None:
    """Add our finalizer if it is missing; the object as read (None once it is gone)."""
    for _ in range(ATTEMPTS):
        current = await api.get(namespace, name)
        if current is None:
            return None
        finalizers: list[str] = current["metadata"].get("finalizers") or []
        if FINALIZER in finalizers:
            return current
        guard = {
            "op": "test",
            "path": "/metadata/resourceVersion",
            "value": current["metadata"]["resourceVersion"],
        }
        operation: dict[str, Any] = (
            {"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER}
            if finalizers
            else {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]}
        )
        try:
            await api.patch_object(namespace, name, [guard, operation])
            return current
        except Rejected:
            continue
    raise Rejected(f"could not add {FINALIZER} to {namespace}/{name}")


async def drop_finalizer(api: KubeApi, namespace: str, name: str) -> None:
    for _ in range(ATTEMPTS):
        current = await api.get(namespace, name)
        if current is None:
            return
        finalizers: list[str] = current["metadata"].get("finalizers") or []
        if FINALIZER not in finalizers:
            return
        index = finalizers.index(FINALIZER)
        try:
            await api.patch_object(
                namespace,
                name,
                [
                    {"op": "test", "path": f"/metadata/finalizers/{index}", "value": FINALIZER},
                    {"op": "remove", "path": f"/metadata/finalizers/{index}"},
                ],
            )
            return
        except Rejected:
            continue
    raise Rejected(f"could not remove {FINALIZER} from {namespace}/{name}")
