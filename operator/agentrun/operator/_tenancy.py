"""Which tenant a run may use: its namespace's, and no other.

A namespace's tenant is its name, unless the namespace carries the label ``agentrun.dev/tenant``
(so several namespaces can share one tenant's stores, budgets and ledgers). A run that names a
tenant its namespace does not grant is rejected before it touches any store: tenants are the
isolation boundary of every store, and a namespace must not reach across it by typing a name.

A run's tenant is decided once, by the replica about to take the run's first lease (the lease is
taken under it), from the namespace as that replica reads it then, and pinned in ``status.tenant``
by the status write that names that lease's fence (``StatusWriter.take_over``); the CRD refuses
changing it, so a namespace relabelled later moves no run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrun.operator._kubeapi import KubeApi

TENANT_LABEL = "agentrun.dev/tenant"


def granted_tenant(namespace: str, labels: Mapping[str, str]) -> str:
    return labels.get(TENANT_LABEL) or namespace


def tenant_for(namespace: str, labels: Mapping[str, str], requested: str | None) -> str | None:
    """The tenant the run uses, or None when it asks for one its namespace does not grant."""
    granted = granted_tenant(namespace, labels)
    return granted if requested in (None, granted) else None


def pinned_tenant(status: Mapping[str, Any]) -> str | None:
    tenant = status.get("tenant")
    return str(tenant) if tenant else None


async def tenant_of(api: KubeApi, run: Mapping[str, Any]) -> str | None:
    """The run's tenant: the one pinned in its status, else its namespace's as it stands (read
    now), or None when the run asks for one its namespace does not grant."""
    pinned = pinned_tenant(run.get("status") or {})
    if pinned is not None:
        return pinned
    namespace = run["metadata"]["namespace"]
    labels = await api.namespace_labels(namespace)
    return tenant_for(namespace, labels, (run.get("spec") or {}).get("tenant"))
