"""Which tenant a run may use: its namespace's, and no other.

A namespace's tenant is its name, unless the namespace carries the label ``agentrun.dev/tenant``
(so several namespaces can share one tenant's stores, budgets and ledgers). A run that names a
tenant its namespace does not grant is rejected before it touches any store: tenants are the
isolation boundary of every store, and a namespace must not reach across it by typing a name.
"""

from __future__ import annotations

from collections.abc import Mapping

TENANT_LABEL = "agentrun.dev/tenant"


def granted_tenant(namespace: str, labels: Mapping[str, str]) -> str:
    return labels.get(TENANT_LABEL) or namespace


def tenant_for(namespace: str, labels: Mapping[str, str], requested: str | None) -> str | None:
    """The tenant the run uses, or None when it asks for one its namespace does not grant."""
    granted = granted_tenant(namespace, labels)
    return granted if requested in (None, granted) else None
