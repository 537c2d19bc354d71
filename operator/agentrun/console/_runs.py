"""A run as the console's pages show it, read from an AgentRun object as the watch gives it.

A run's state is its ``Succeeded`` condition's reason (Running, AwaitingApproval, Indeterminate,
Queued, Suspended, StoreDataLost, Completed, Failed, ...): the one word ``kubectl get agentruns``
shows in its Status column, so the console and kubectl never name a state differently. What a
person is waiting on comes from the status the operator writes (``pendingApproval``,
``indeterminateCalls``), and since when from the condition's ``lastTransitionTime``.

Built from the object's raw fields and not from the operator's models: a run whose status no
longer validates against them (written by an older operator, say) is still shown.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import Field

from agentrun._base import FrozenModel
from agentrun._outcomes import AWAITING_APPROVAL, INDETERMINATE, SUCCEEDED

NEW = "Pending"
"""The state of a run whose status the operator has not written yet."""


class Approval(FrozenModel):
    """The call a run holds until someone approves or denies it."""

    request_id: str
    call_id: str
    tool: str


class Settling(FrozenModel):
    """What the operator does about an undecidable call whose tool's service can be asked
    (``status.indeterminateCalls[].settlement``): wait until ``due``, ask, or leave it to a
    person with what it saw."""

    phase: str
    due: datetime | None = None
    attempts: int = 0
    message: str = ""


class Undecidable(FrozenModel):
    """A call that may or may not have taken effect, which a person must answer for (unless
    the operator settles it first by asking the tool's service: ``settling``)."""

    call_id: str
    tool: str
    settling: Settling | None = None


def _settling(note: object) -> Settling | None:
    if not isinstance(note, dict):
        return None
    return Settling(
        phase=str(note.get("phase", "")),
        due=parse_time(note.get("dueAt")),
        attempts=_int(note.get("attempts")),
        message=str(note.get("message", "") or ""),
    )


class RunRow(FrozenModel):
    """One run's row: everything the runs page, the inbox and the live updates need."""

    namespace: str
    name: str
    uid: str
    resource_version: str = ""
    agent: str = ""
    state: str = NEW
    message: str = ""
    ended: bool = False
    iteration: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_micros: int = 0
    holder: str = ""
    fence: int = 0
    resumes: int = 0
    tenant: str = ""
    suspended: bool = False
    trace_id: str = ""
    created: datetime = Field(default_factory=lambda: datetime.now(UTC))
    waiting_since: datetime | None = None
    approval: Approval | None = None
    undecidable: tuple[Undecidable, ...] = ()

    @property
    def waits_on_a_person(self) -> bool:
        return self.approval is not None or bool(self.undecidable)

    @property
    def dom_id(self) -> str:
        return f"run-{self.uid}"


def parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _condition(conditions: list[dict[str, Any]], type_: str) -> dict[str, Any]:
    return next((c for c in conditions if c.get("type") == type_), {})


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def row_of(obj: dict[str, Any]) -> RunRow:
    """The row of an AgentRun object (as listed, watched or read)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    conditions = [c for c in status.get("conditions") or () if isinstance(c, dict)]
    succeeded = _condition(conditions, SUCCEEDED)
    usage = status.get("usage") or {}
    lease = status.get("lease") or {}
    pending = status.get("pendingApproval") or None
    undecidable = tuple(
        Undecidable(
            call_id=str(c.get("callId", "")),
            tool=str(c.get("tool", "")),
            settling=_settling(c.get("settlement")),
        )
        for c in status.get("indeterminateCalls") or ()
        if isinstance(c, dict)
    )
    waiting = None
    if pending:
        waiting = parse_time(_condition(conditions, AWAITING_APPROVAL).get("lastTransitionTime"))
    elif undecidable:
        waiting = parse_time(_condition(conditions, INDETERMINATE).get("lastTransitionTime"))
    return RunRow(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        resource_version=str(meta.get("resourceVersion", "")),
        agent=str(spec.get("agent", "")),
        state=str(succeeded.get("reason") or NEW),
        message=str(succeeded.get("message", "")),
        ended=succeeded.get("status") in ("True", "False"),
        iteration=_int(status.get("iteration")),
        input_tokens=_int(usage.get("inputTokens")),
        output_tokens=_int(usage.get("outputTokens")),
        cost_micros=_int(usage.get("costMicros")),
        holder=str(lease.get("holder", "")),
        fence=_int(lease.get("fence")),
        resumes=_int(status.get("resumeCount")),
        tenant=str(status.get("tenant", "")),
        suspended=spec.get("suspend") is True,
        trace_id=str(status.get("traceId", "") or ""),
        created=parse_time(meta.get("creationTimestamp")) or datetime.now(UTC),
        waiting_since=waiting,
        approval=None
        if not pending
        else Approval(
            request_id=str(pending.get("requestId", "")),
            call_id=str(pending.get("callId", "")),
            tool=str(pending.get("tool", "")),
        ),
        undecidable=undecidable,
    )
