"""A holder's progress that waits, a moment at most, to go out with its next status write.

A run reports its progress at every boundary (iteration, usage, the checkpoint just written). A
quick run crosses several boundaries a second, and each was a status write of its own: most of
the requests a run cost the API server. ``StatusWriter.write_soon`` keeps such progress here
instead and writes it at once only when it is due (``PROGRESS_EVERY`` after the last write) or
when it is a transition someone must see now; whatever status write comes first (the next
boundary's, the run's end, a timer at the due time) carries what waits, so the status is never
further behind the run than ``PROGRESS_EVERY``.

Fields are kept as the latest value of each (progress is absolute: an iteration, a usage total,
the latest checkpoint, never an increment), and each condition with the time it was reported, so
a ``lastTransitionTime`` says when the transition happened, not when it was written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from agentrun.operator._conditions import ConditionUpdate
from agentrun.operator._resource import AgentRunStatus

Stamped = tuple[ConditionUpdate, datetime]
"""A condition to write, and when it was reported."""


def stamped(conditions: Sequence[ConditionUpdate]) -> list[Stamped]:
    now = datetime.now(UTC)
    return [(update, now) for update in conditions]


@dataclass
class Pending:
    """Status fields and conditions reported but not written yet."""

    fields: AgentRunStatus = field(default_factory=AgentRunStatus)
    conditions: list[Stamped] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.conditions) or bool(self.fields.model_fields_set)

    def add(self, fields: AgentRunStatus, conditions: Sequence[Stamped]) -> None:
        """Keep ``fields`` (over those kept; each set field replaces the kept one) and
        ``conditions`` (after those kept, so the later report of a type wins)."""
        update = {name: getattr(fields, name) for name in fields.model_fields_set}
        self.fields = self.fields.model_copy(update=update)
        self.conditions.extend(conditions)

    def take(self) -> tuple[AgentRunStatus, list[Stamped]]:
        """What waits, and nothing waits any more."""
        taken = self.fields, self.conditions
        self.fields, self.conditions = AgentRunStatus(), []
        return taken
