"""Which install runs an AgentRun: exactly one, named on the object, as an IngressClass does.

Two installs of the operator (a cluster-wide release and a namespaced one, say) each fence a run
in their own store, so nothing in the stores stops both from running it. The object is what both
see, so the run is owned there: every install has a controller name (``AGENTRUN_CONTROLLER_NAME``,
``agentrun.dev/operator`` by default). A run may name the install it wants in
``spec.controllerName``; either way, the first install allowed to run it writes its name into
``status.controller`` before anything else of the run is decided, with a patch that tests the
``resourceVersion`` it read, so of two installs racing exactly one claim lands and the other reads
it back. The CRD refuses changing or removing a claim. An install runs, reports on and forgets
only the runs it claimed, and leaves every other run alone: it writes nothing to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrun.operator.kubeapi import KubeApi, Rejected

ATTEMPTS = 5


def claimed_by(body: Mapping[str, Any]) -> str | None:
    """The install the run is claimed by, or, before the claim, the one its spec names."""
    claim = (body.get("status") or {}).get("controller")
    return str(claim) if claim else (body.get("spec") or {}).get("controllerName")


def ours(body: Mapping[str, Any], controller: str) -> bool:
    """Whether this install may run the run: claimed by it, or by nobody yet and not named for
    another install."""
    return claimed_by(body) in (None, controller)


async def claim(api: KubeApi, namespace: str, name: str, controller: str) -> str | None:
    """Claim the run for ``controller`` unless another install has it; the install that owns it
    (None once the run is gone)."""
    for _ in range(ATTEMPTS):
        current = await api.get(namespace, name)
        if current is None:
            return None
        owner = claimed_by(current)
        if owner not in (None, controller) or (current.get("status") or {}).get("controller"):
            return owner
        try:
            await api.pin_status(current, "controller", controller)
        except Rejected:
            continue
        return controller
    raise Rejected(f"status of {namespace}/{name} kept changing while it was claimed")
