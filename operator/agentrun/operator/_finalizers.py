"""Our finalizer, added before a run first touches a store and removed once it is forgotten.

It is the only finalizer the operator keeps on a run (kopf is told to keep none: ``_main``): a
finished run still has a checkpoint, a transcript and records that deleting the AgentRun must
forget, and the forget takes the run's lease, so the object cannot go before its holder has let
go. A run that never touched a store (say, one rejected for its tenant) never gets it, and goes at
once when deleted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrun.operator._claims import Refresh
from agentrun.operator._context import FINALIZER
from agentrun.operator._kubeapi import KubeApi, Rejected

ATTEMPTS = 5


async def ensure_finalizer(
    api: KubeApi, run: Mapping[str, Any], refresh: Refresh
) -> Mapping[str, Any] | None:
    """Our finalizer on ``run`` (as this replica last saw it), added if it is missing; the
    object as the API server returned it (None once it is gone). The patch ``test``s the
    finalizers it was computed from, and that the run is not being deleted: a run whose deletion
    has begun gets no finalizer, and is not taken up."""
    current: Mapping[str, Any] | None = run
    for attempt in range(ATTEMPTS):
        if current is None:
            return None
        meta = current["metadata"]
        finalizers: list[str] = list(meta.get("finalizers") or [])
        if FINALIZER in finalizers or meta.get("deletionTimestamp"):
            return current
        operations: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/deletionTimestamp", "value": None},
            {"op": "test", "path": "/metadata/finalizers", "value": finalizers or None},
            {"op": "add", "path": "/metadata/finalizers", "value": [*finalizers, FINALIZER]},
        ]
        try:
            return await api.patch_object(meta["namespace"], meta["name"], operations)
        except Rejected:
            current = await refresh(current, attempt)
    meta = run["metadata"]
    raise Rejected(f"could not add {FINALIZER} to {meta['namespace']}/{meta['name']}")


async def drop_finalizer(api: KubeApi, run: Mapping[str, Any]) -> None:
    """Our finalizer off ``run`` (as just read): the patch ``test``s the object's uid and the
    finalizer's place, so it never takes the finalizer off another object of the same name or
    one another replica changed meanwhile; only then is the run read again. Gone, or without our
    finalizer: nothing to do."""
    meta = run["metadata"]
    namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
    current: Mapping[str, Any] | None = run
    for _ in range(ATTEMPTS):
        if current is None or current["metadata"]["uid"] != uid:
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
                    {"op": "test", "path": "/metadata/uid", "value": uid},
                    {"op": "test", "path": f"/metadata/finalizers/{index}", "value": FINALIZER},
                    {"op": "remove", "path": f"/metadata/finalizers/{index}"},
                ],
            )
            return
        except Rejected:
            current = await api.get(namespace, name)
    raise Rejected(f"could not remove {FINALIZER} from {namespace}/{name}")
