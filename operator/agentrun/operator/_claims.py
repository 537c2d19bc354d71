"""Which install runs an AgentRun, and under which tenant: decided once, in one status write.

Two installs of the operator (a cluster-wide release and a namespaced one, say) each fence a run
in their own store, so nothing in the stores stops both from running it. The object is what both
see, so the run is owned there: every install has a controller name (``AGENTRUN_CONTROLLER_NAME``,
``agentrun.dev/operator`` by default). A run may name the install it wants in
``spec.controllerName``; either way, the first install allowed to run it writes its name into
``status.controller`` before anything else of the run is decided. The CRD refuses changing or
removing a claim. An install runs, reports on and forgets only the runs it claimed, and leaves
every other run alone: it writes nothing to them.

The same patch writes the conditions a run shows before anything else is decided, so a run costs
one request to claim. Its tenant is not decided here: the replica about to take the run's first
lease decides it, from the namespace (``_tenancy``), and pins it in the status write that names
its fence, so the replicas that lose the race to claim never read the namespace.

The patch is computed from the run as this replica last saw it and ``test``s, atomically on the
API server, that each field it decides is still what it was computed from (``null`` for a field
that is absent: the API server's JSON patch passes such a test only while the field is absent), so
of two installs, or two replicas, racing exactly one claim lands; the others are ``Rejected`` and
read the winner's claim back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from agentrun.operator._conditions import initial_conditions
from agentrun.operator._kubeapi import KubeApi, Rejected

ATTEMPTS = 5

Refresh = Callable[[Mapping[str, Any], int], Awaitable[Mapping[str, Any] | None]]
"""The run seen again after the patch computed from it was rejected (the attempt, from 0): the
watch's next view of it, or a read; None once it is gone."""


def claimed_by(body: Mapping[str, Any]) -> str | None:
    """The install the run is claimed by, or, before the claim, the one its spec names."""
    claim = (body.get("status") or {}).get("controller")
    return str(claim) if claim else (body.get("spec") or {}).get("controllerName")


def ours(body: Mapping[str, Any], controller: str) -> bool:
    """Whether this install may run the run: claimed by it, or by nobody yet and not named for
    another install."""
    return claimed_by(body) in (None, controller)


@dataclass(frozen=True)
class Claim:
    """What the claim decided, and the run as the API server last returned it."""

    owner: str | None
    """The install that owns the run; None once the run is gone."""
    run: Mapping[str, Any] | None
    written: bool = False
    """Whether this replica's patch made the claim (the others let it take the lease first)."""


def _tested(path: str, value: object) -> dict[str, Any]:
    return {"op": "test", "path": path, "value": value}


def claim_patch(run: Mapping[str, Any], controller: str) -> list[dict[str, Any]]:
    """The JSON patch that claims ``run`` for ``controller`` and writes the first conditions,
    each guarded by a test of what it was decided from; empty when both are there already."""
    status = run.get("status")
    generation = int(run["metadata"].get("generation") or 1)
    first = {"conditions": initial_conditions(generation), "observedGeneration": generation}
    if not status:
        return [
            _tested("/status", None),
            _tested("/metadata/generation", generation),
            {"op": "add", "path": "/status", "value": {"controller": controller, **first}},
        ]
    operations: list[dict[str, Any]] = []
    if not status.get("controller"):
        operations += [
            _tested("/status/controller", None),
            {"op": "add", "path": "/status/controller", "value": controller},
        ]
    if not status.get("conditions"):
        operations += [
            _tested("/status/conditions", None),
            _tested("/metadata/generation", generation),
            *({"op": "add", "path": f"/status/{k}", "value": v} for k, v in first.items()),
        ]
    return operations


async def claim(api: KubeApi, run: Mapping[str, Any], controller: str, refresh: Refresh) -> Claim:
    """Claim ``run`` (the watch's live view of it) for ``controller`` unless it is claimed
    already (by this install or another); what was decided. The run is read again only after
    the patch was rejected."""
    meta = run["metadata"]
    current: Mapping[str, Any] | None = run
    for attempt in range(ATTEMPTS):
        if current is None:
            return Claim(None, None)
        owner = claimed_by(current)
        if owner not in (None, controller):
            return Claim(owner, current)
        operations = claim_patch(current, controller)
        if not operations:
            return Claim(controller, current)
        unclaimed = not (current.get("status") or {}).get("controller")
        try:
            patched = await api.patch_status(meta["namespace"], meta["name"], operations)
        except Rejected:
            current = await refresh(current, attempt)
            continue
        return Claim(controller, patched, written=unclaimed)
    raise Rejected(
        f"status of {meta['namespace']}/{meta['name']} kept changing while it was claimed"
    )
