"""Conditions in the metav1.Condition shape, written by one helper so they are always right.

As cert-manager's condition helpers do: every condition written carries the generation it was
computed from (``observedGeneration``), and ``lastTransitionTime`` changes only when the status
does — a reason or message that changes under the same status is not a transition, and a
``kubectl describe`` that shows "True for 3 days" must mean it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from agentrun._outcomes import (
    AWAITING_APPROVAL,
    CHECKPOINTED,
    INDETERMINATE,
    SUCCEEDED,
    ConditionReason,
    ConditionStatus,
)

ConditionUpdate = tuple[str, ConditionStatus, str, str]
"""A condition to write: its type, status, reason and message."""

# Where a run is, as opposed to how an attempt at it ended (that is an ``Outcome``'s to say).
PENDING = ConditionReason(SUCCEEDED, "Unknown", "Pending")
RUNNING = ConditionReason(SUCCEEDED, "Unknown", "Running")
RESUMING = ConditionReason(SUCCEEDED, "Unknown", "Resuming")
NOT_WAITING = ConditionReason(AWAITING_APPROVAL, "False", "NotWaiting")
DECIDED = ConditionReason(INDETERMINATE, "False", "Decided")
NOT_YET = ConditionReason(CHECKPOINTED, "Unknown", "NotYet")
WRITTEN = ConditionReason(CHECKPOINTED, "True", "Written")
TOO_LARGE = ConditionReason(CHECKPOINTED, "False", "TooLarge")
STORE_UNAVAILABLE = ConditionReason(CHECKPOINTED, "False", "StoreUnavailable")


def update(condition: ConditionReason, message: str) -> ConditionUpdate:
    return (condition.type, condition.status, condition.reason, message)


def _timestamp(now: datetime) -> str:
    return now.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def set_condition(
    conditions: Sequence[Mapping[str, Any]],
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    *,
    generation: int,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """The conditions with ``type_`` set; the others are kept as they are, in order."""
    stamp = _timestamp(now or datetime.now(UTC))

    def written(transition: str) -> dict[str, Any]:
        return {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message[:32768],
            "observedGeneration": generation,
            "lastTransitionTime": transition,
        }

    updated = [dict(condition) for condition in conditions]
    for index, condition in enumerate(updated):
        if condition.get("type") == type_:
            kept = condition.get("lastTransitionTime", stamp)
            updated[index] = written(stamp if condition.get("status") != status else kept)
            return updated
    updated.append(written(stamp))
    return updated


def initial_conditions(generation: int, now: datetime | None = None) -> list[dict[str, Any]]:
    """What a run shows the first time an operator sees it: nothing decided yet."""
    conditions: list[dict[str, Any]] = []
    first = (
        update(PENDING, "waiting for a worker to take the run's lease"),
        update(NOT_WAITING, "no approval is pending"),
        update(DECIDED, "no call is undecidable"),
        update(NOT_YET, "no checkpoint has been written yet"),
    )
    for type_, status, reason, message in first:
        conditions = set_condition(
            conditions,
            type_,
            status,
            reason,
            message,
            generation=generation,
            now=now,
        )
    return conditions


def find(conditions: Sequence[Mapping[str, Any]], type_: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == type_), None)


def is_terminal(conditions: Sequence[Mapping[str, Any]]) -> bool:
    """A run whose ``Succeeded`` is True or False is over; only Unknown is still going."""
    succeeded = find(conditions, SUCCEEDED)
    return succeeded is not None and succeeded.get("status") in ("True", "False")
