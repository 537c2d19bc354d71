"""The Agents of the watched namespaces as the watch shows them: no ``GET`` per run or step.

A run's worker looks its agent up before each attempt (``_agent_resolver``). It used to ask the
API server each time, so a thousand runs waiting on people cost a thousand reads a poll. The
operator watches Agents anyway (their probes), so every watch event of an Agent is kept here,
and the resolver reads it from here.

The watch does not say when it has listed everything, so a name it has not shown may be an
Agent not listed yet: that is asked of the API server once, and its absence is kept until an
event of that Agent arrives (runs of an agent registered in the image, which no Agent names,
cost one read per name and namespace, not one per step).

A run parked because its Agent could not be used is woken by the Agent's next change that can
change that: its generation (the spec edited), its readiness, its appearance or its deletion.
A probe's other writes (when it last probed) wake nobody.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from agentrun._outcomes import ConditionStatus
from agentrun.operator._agent_resource import READY
from agentrun.operator._conditions import find

Key = tuple[str, str]
"""An Agent's namespace and name."""

Read = Callable[[str, str], Awaitable[dict[str, Any] | None]]
"""The API server's read of one Agent (``KubeApi.get_agent``)."""


def _essence(body: Mapping[str, Any] | None) -> tuple[object, ConditionStatus | None] | None:
    """What of an Agent can change whether a run parked on it may go on."""
    if body is None:
        return None
    ready = find((body.get("status") or {}).get("conditions") or [], READY) or {}
    return body["metadata"].get("generation"), ready.get("status")


class AgentBook:
    """The watched Agents, by namespace and name; who to tell when one changes."""

    def __init__(self, read: Read, changed: Callable[[Key], None] | None = None) -> None:
        self._read = read
        self.changed = changed or (lambda _: None)
        """Told of each Agent whose essence changed (the scheduler wakes its parked runs)."""
        self._agents: dict[Key, dict[str, Any] | None] = {}
        """The Agents the watch or a read showed; None for a name read and found absent."""
        self._events = 0
        """Watch events so far: a read that began before one of an Agent does not overwrite it."""
        self._seen_at: dict[Key, int] = {}

    def seen(self, event_type: str, body: Mapping[str, Any]) -> None:
        """A watch event of an Agent."""
        meta = body["metadata"]
        key = (str(meta["namespace"]), str(meta["name"]))
        before = _essence(self._agents.get(key))
        now = None if event_type == "DELETED" else dict(body)
        self._agents[key] = now
        self._events += 1
        self._seen_at[key] = self._events
        if _essence(now) != before:
            self.changed(key)

    def ready(self, namespace: str, name: str) -> bool:
        """Whether the watch shows the Agent, and its probe found it ready."""
        essence = _essence(self._agents.get((namespace, name)))
        return essence is not None and essence[1] == "True"

    async def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The Agent ``name`` in ``namespace``, or None if there is none."""
        key = (namespace, name)
        if key in self._agents:
            return self._agents[key]
        asked_at = self._events
        found = await self._read(namespace, name)
        if self._seen_at.get(key, -1) > asked_at:  # the watch spoke of it meanwhile: newer
            return self._agents[key]
        self._agents[key] = found
        return found
