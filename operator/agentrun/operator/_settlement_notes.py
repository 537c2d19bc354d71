"""What a run's status says about settling each of its undecidable calls, and when it is due.

A call whose tool declares a way to settle it (``settle`` on its Agent: replay the request with
its key, or probe the service) gets a note in ``status.indeterminateCalls[].settlement`` when the
run turns Indeterminate: ``dueAt`` (the transition plus the tool's ``delaySeconds``, so a person
looking already can answer first), ``attempts`` 0, phase ``Waiting``. The note is what every
replica decides from, through the watch: nothing is asked of the API server or the store to
know that a run is due, and a restarted replica finds the same ``dueAt`` (``_settle_timers``).

A replica that begins asking writes ``Asking``, one more attempt, and moves ``dueAt`` to when
its lease would lapse: if it dies mid-probe, another replica takes over then. It ends with a
resolution appended (the note stays until the next holder clears the calls) or ``LeftToPerson``
with what it saw. After ``MAX_ATTEMPTS`` begun without a verdict, nobody begins again: a restart
loop cannot ask a service for ever.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from agentrun.operator._resource import IndeterminateCall, Settlement
from agentrun.runner._agents import AgentDefinition

MAX_ATTEMPTS = 3
"""Times replicas begin asking about one call, a round killed mid-way included."""

MESSAGE_LIMIT = 2048
"""The CRD's bound on ``settlement.message``."""

EVIDENCE_LIMIT = 2000
"""The CRD's bound on a resolution's ``evidence``."""


def planned(agent: AgentDefinition, call_id: str, tool: str, at: datetime) -> IndeterminateCall:
    """The status entry of an undecidable call, with its settlement note when ``tool`` declares
    a way to settle it."""
    found = agent.tool(tool)
    way = found.settlement if found is not None else None
    if way is None:
        return IndeterminateCall(call_id=call_id, tool=tool)
    note = Settlement(due_at=at + timedelta(seconds=way.delay_seconds), attempts=0, phase="Waiting")
    return IndeterminateCall(call_id=call_id, tool=tool, settlement=note)


def answered(body: Mapping[str, Any]) -> set[str]:
    """The call ids ``spec.resolutions`` answers."""
    return {str(r.get("callId")) for r in (body.get("spec") or {}).get("resolutions") or ()}


def to_settle(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The undecidable calls (status entries) a replica may still ask about: noted, not answered,
    not left to a person, attempts left."""
    status = body.get("status") or {}
    done = answered(body)
    calls: list[Mapping[str, Any]] = []
    for call in status.get("indeterminateCalls") or ():
        note = call.get("settlement")
        if (
            note is not None
            and call.get("callId") not in done
            and note.get("phase") != "LeftToPerson"
            and int(note.get("attempts") or 0) < MAX_ATTEMPTS
        ):
            calls.append(call)
    return calls


def due_at(calls: Sequence[Mapping[str, Any]]) -> datetime | None:
    """When the first of ``calls`` is due to be asked about."""
    times = [datetime.fromisoformat(str(c["settlement"]["dueAt"])) for c in calls]
    return min(times) if times else None


def is_due(call: Mapping[str, Any], now: datetime) -> bool:
    return datetime.fromisoformat(str(call["settlement"]["dueAt"])) <= now


def noted(
    status: Mapping[str, Any], notes: Mapping[str, Settlement]
) -> list[dict[str, Any]] | None:
    """``status.indeterminateCalls`` with the notes of ``notes`` (by call id) written in; None
    when none of those calls is listed any more (the run moved on)."""
    calls = [dict(call) for call in status.get("indeterminateCalls") or ()]
    changed = False
    for call in calls:
        note = notes.get(str(call.get("callId")))
        if note is not None:
            call["settlement"] = note.model_dump(mode="json", by_alias=True, exclude_none=True)
            changed = True
    return calls if changed else None


def asking(call: Mapping[str, Any], lapses_at: datetime) -> Settlement:
    """The note of a call a replica begins asking about, holding the lease until ``lapses_at``."""
    note = Settlement.model_validate(call["settlement"])
    return note.model_copy(
        update={"phase": "Asking", "attempts": note.attempts + 1, "due_at": lapses_at}
    )


def left_to_person(call: Mapping[str, Any], message: str) -> Settlement:
    """The note of a call the service's answer did not settle: a person answers it."""
    note = Settlement.model_validate(call["settlement"])
    return note.model_copy(update={"phase": "LeftToPerson", "message": message[:MESSAGE_LIMIT]})


def utcnow() -> datetime:
    return datetime.now(UTC)
