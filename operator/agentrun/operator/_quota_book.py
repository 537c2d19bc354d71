"""The RunQuotas of the watched namespaces as the watch shows them: no read per run or step.

A run's worker asks for its namespace's quota as it takes the run's lease (``_admission``), and
the scheduler asks for it when deciding which queued runs may go (``_quota_queue``). Both read
it from here, kept from the watch of RunQuotas.

The watch does not say when it has listed everything, so a namespace it has shown no quota of
may have one not listed yet: its quotas are listed from the API server once, and what that
found is kept until an event of a quota of that namespace arrives. A run must not start
unadmitted because its namespace's quota came late in the watch's first listing.

Whoever must hear of a change (the scheduler: a quota raised, lowered or deleted can let queued
runs go) is told of each namespace whose quotas changed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from agentrun._errors import ConfigurationError
from agentrun.operator._quota_resource import NamedQuota, effective_quota

log = logging.getLogger(__name__)

List = Callable[[str], Awaitable[list[dict[str, Any]]]]
"""The API server's list of one namespace's RunQuotas (``KubeApi.list_quotas``)."""


class QuotaBook:
    """The watched RunQuotas, by namespace; who to tell when a namespace's quota changes."""

    def __init__(self, read: List, changed: Callable[[str], None] | None = None) -> None:
        self._read = read
        self.changed = changed or (lambda _: None)
        """Told of each namespace whose quotas changed (the scheduler looks at its queue)."""
        self._quotas: dict[str, dict[str, dict[str, Any]]] = {}
        """Each namespace shown or listed: its quotas by name (none: it has none)."""
        self._events = 0
        """Watch events so far: a list that began before one of the namespace does not
        overwrite it."""
        self._seen_at: dict[str, int] = {}
        self._parsed: dict[str, NamedQuota | ConfigurationError | None] = {}
        """Each namespace's quota as parsed since its quotas last changed (or why it does not
        parse): asked at every watch event that frees a place and at every fair-queue take,
        parsed once."""

    def seen(self, event_type: str, body: Mapping[str, Any]) -> None:
        """A watch event of a RunQuota."""
        meta = body["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        before = self.known(namespace)
        quotas = self._quotas.setdefault(namespace, {})
        if event_type == "DELETED":
            quotas.pop(name, None)
        else:
            quotas[name] = dict(body)
        self._parsed.pop(namespace, None)
        self._events += 1
        self._seen_at[namespace] = self._events
        if self.known(namespace) != before:
            self.changed(namespace)

    def known(self, namespace: str) -> NamedQuota | None:
        """The namespace's quota as this replica knows it now, without asking anybody; None
        too for one that does not parse (stored under an older CRD), which its runs' workers
        report instead (``get``): the scheduler's choices do not stop on it."""
        parsed = self._parse(namespace)
        return None if isinstance(parsed, ConfigurationError) else parsed

    def _effective(self, namespace: str) -> NamedQuota | None:
        parsed = self._parse(namespace)
        if isinstance(parsed, ConfigurationError):
            raise ConfigurationError(str(parsed))
        return parsed

    def _parse(self, namespace: str) -> NamedQuota | ConfigurationError | None:
        if namespace not in self._parsed:
            try:
                self._parsed[namespace] = effective_quota(self._quotas.get(namespace, {}).values())
            except ConfigurationError as error:
                log.warning("%s", error)  # once, until the namespace's quotas change
                self._parsed[namespace] = error
        return self._parsed[namespace]

    def body(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The quota as the watch last showed it (its status, for the scheduler's summary)."""
        return self._quotas.get(namespace, {}).get(name)

    async def get(self, namespace: str) -> NamedQuota | None:
        """The quota the namespace's runs are held to, or None if it has none.

        Raises:
            ConfigurationError: The quota honoured does not parse: no run of the namespace is
                worked on unbounded because of it.
        """
        if namespace not in self._quotas:
            asked_at = self._events
            listed = await self._read(namespace)
            if self._seen_at.get(namespace, -1) <= asked_at:  # else the watch's is newer
                self._quotas[namespace] = {str(q["metadata"]["name"]): q for q in listed}
                self._parsed.pop(namespace, None)
        return self._effective(namespace)
