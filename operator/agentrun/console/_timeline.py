"""A run's page: its timeline, its tool calls and its transcript, from the API server and the store.

What the API server holds (the object, its conditions, its events, the decisions appended to its
spec) is read as the person. What only the store holds (the frontier, each tool call's claim,
the conversation) is read by the console, after a SubjectAccessReview has said this person may
``get`` this AgentRun: the store does not know who is asking, so the console asks for it.

The store's texts were masked when they were written; they are masked again on the way to the
page, as every string is (``_web.environment``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar

from pydantic import JsonValue

from agentrun._backend import Backend, StoreSet
from agentrun._base import FrozenModel
from agentrun._checkpointing import Checkpointer
from agentrun._decisions import APPROVAL_PREFIX
from agentrun._errors import AgentRunError
from agentrun._idempotency import marker_key
from agentrun._ledger import ChargeLister
from agentrun._messages import ModelCall
from agentrun._resume import plan_resume
from agentrun.console._runs import parse_time
from agentrun.operator._witness import RUN_STARTED_KEY

TRANSCRIPT_PAGE = 50
BOOKKEEPING = (APPROVAL_PREFIX, RUN_STARTED_KEY)
"""Keys of the idempotency store that record no tool call: a person's decision on an approval
(shown with the decisions), and the operator's record that a run started."""


class Moment(FrozenModel):
    """One line of the timeline: when, what kind of thing, and what it says."""

    at: datetime | None
    kind: str
    title: str
    detail: str = ""
    warning: bool = False


class ToolCallRow(FrozenModel):
    """A tool call as its claim in the store and the frontier's plan show it."""

    call_id: str
    tool: str
    key: str = ""
    claim: str = ""
    holder: str = ""
    fence: int = 0
    disposition: str = ""
    arguments: JsonValue = None


class Turn(FrozenModel):
    """One message of the transcript, as shown."""

    number: int
    role: str
    text: str
    calls: tuple[tuple[str, str, JsonValue], ...] = ()
    answers: str = ""
    model_call: ModelCall | None = None


class ModelCallRow(FrozenModel):
    """One model call of the run: which message it answered with, its tokens, price and time."""

    number: int
    """The transcript's number of the assistant message the call produced (from 1)."""
    call: ModelCall

    @property
    def page(self) -> int:
        """The transcript's page the message is on."""
        return (self.number - 1) // TRANSCRIPT_PAGE + 1


class CostChart(FrozenModel):
    """A run's cost over its iterations, from the ledger's charges, as an SVG polyline."""

    WIDTH: ClassVar[int] = 360
    HEIGHT: ClassVar[int] = 80

    last: int
    """The last iteration charged (the first is 0, as ``status.iteration`` counts)."""
    total_micros: int
    points: str
    """``x,y`` pairs of the cumulative cost after each iteration, in the chart's box."""

    @classmethod
    def of(cls, charges: Sequence[tuple[str, int]]) -> CostChart | None:
        """The chart of ``charges`` (``model:{execution}:{iteration}`` ids, as the runner names
        a model call's); None with fewer than two iterations to draw. A call charged in two
        executions (made again after a crash) counts in both: both were paid for."""
        by_iteration: dict[int, int] = {}
        for charge_id, micros in charges:
            kind, _, rest = charge_id.partition(":")
            digits = rest.rpartition(":")[2]
            if kind != "model" or not digits.isdigit():
                continue
            by_iteration[int(digits)] = by_iteration.get(int(digits), 0) + micros
        if len(by_iteration) < 2:
            return None
        last = max(by_iteration)
        running, cumulative = 0, []
        for iteration in range(last + 1):
            running += by_iteration.get(iteration, 0)
            cumulative.append(running)
        top = max(cumulative[-1], 1)
        points = " ".join(
            f"{round(i * cls.WIDTH / last, 1)},{round(cls.HEIGHT - c * cls.HEIGHT / top, 1)}"
            for i, c in enumerate(cumulative)
        )
        return cls(last=last, total_micros=cumulative[-1], points=points)


class StoreView(FrozenModel):
    """What the store says of a run; ``error`` instead when it could not be read."""

    boundary: str = ""
    iteration: int = 0
    fence: int = 0
    written_at: datetime | None = None
    lease: str = ""
    calls: tuple[ToolCallRow, ...] = ()
    turns: tuple[Turn, ...] = ()
    turn_count: int = 0
    model_calls: tuple[ModelCallRow, ...] = ()
    """Every model call the transcript kept (not only the page's): the run page's table."""
    cost: CostChart | None = None
    error: str = ""


def moments(obj: dict[str, Any], events: list[dict[str, Any]]) -> list[Moment]:
    """The object's own history, in time order: created, each condition's last transition,
    and every event; decisions carry no time of their own and are shown apart."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    found = [Moment(at=parse_time(meta.get("creationTimestamp")), kind="created", title="created")]
    for condition in status.get("conditions") or ():
        found.append(
            Moment(
                at=parse_time(condition.get("lastTransitionTime")),
                kind="condition",
                title=f"{condition.get('type')}={condition.get('status')} "
                f"({condition.get('reason')})",
                detail=str(condition.get("message", "")),
            )
        )
    checkpoint = status.get("checkpoint") or {}
    if checkpoint.get("writtenAt"):
        found.append(
            Moment(
                at=parse_time(checkpoint.get("writtenAt")),
                kind="checkpoint",
                title=f"checkpoint at {checkpoint.get('boundary')}, iteration "
                f"{checkpoint.get('iteration', 0)} ({checkpoint.get('bytes', 0)} bytes)",
                detail=str(checkpoint.get("lastError", "")),
                warning=bool(checkpoint.get("lastError")),
            )
        )
    for event in events:
        when = parse_time(event.get("lastTimestamp")) or parse_time(event.get("eventTime"))
        count = event.get("count") or 1
        found.append(
            Moment(
                at=when,
                kind="event",
                title=str(event.get("reason", "")) + (f" (x{count})" if count > 1 else ""),
                detail=str(event.get("message", "")),
                warning=event.get("type") == "Warning",
            )
        )
    return sorted(found, key=lambda m: (m.at is None, m.at or datetime.min))


def _turn(number: int, message: Any) -> Turn:
    return Turn(
        number=number,
        role=str(message.role),
        text=message.text,
        calls=tuple((c.id, c.name, c.arguments) for c in message.tool_calls),
        answers=message.tool_call_id or "",
        model_call=message.model_call,
    )


async def read_store(backend: Backend, tenant: str, run_id: str, page: int) -> StoreView:
    """The frontier, the calls' claims and one page of the transcript (``page`` from 1)."""
    try:
        commits = backend.commits if isinstance(backend, StoreSet) else None
        found = await Checkpointer(
            backend.checkpoints, history=backend.history, commits=commits
        ).resumable(tenant, run_id)
        lease = await backend.leases.held(tenant, run_id)
        records = await backend.idempotency.records(tenant, run_id)
        ledger = backend.ledger
        charges = await ledger.charges(tenant, run_id) if isinstance(ledger, ChargeLister) else ()
        if found is None:
            return StoreView(error="nothing is checkpointed for this run yet")
        checkpoint, transcript = found
        plan = await plan_resume(checkpoint, backend.idempotency, transcript)
    except AgentRunError as error:
        return StoreView(error=f"the store could not be read: {error}")
    dispositions = {d.pending.call.id: d.disposition.value for d in plan.decisions}
    asked = {c.id: c for m in transcript for c in m.tool_calls}
    asked.update({d.pending.call.id: d.pending.call for d in plan.decisions})
    by_marker = {marker_key(call_id): call_id for call_id in asked}
    calls = []
    for record in records:
        if record.key.startswith(BOOKKEEPING):
            continue  # a decision, or that the run started: not a tool call
        call_id = record.call_id or by_marker.get(record.key, "")
        call = asked.get(call_id)
        calls.append(
            ToolCallRow(
                call_id=call_id,
                tool=record.tool or (call.name if call else ""),
                key=record.key,
                claim=record.state.value,
                holder=record.holder,
                fence=record.fence,
                disposition=dispositions.get(call_id, ""),
                arguments=call.arguments if call else None,
            )
        )
    claimed = {c.call_id for c in calls}
    calls.extend(
        ToolCallRow(
            call_id=d.pending.call.id,
            tool=d.pending.call.name,
            key=d.pending.idempotency_key or "",
            disposition=d.disposition.value,
            arguments=d.pending.call.arguments,
        )
        for d in plan.decisions
        if d.pending.call.id not in claimed
    )
    start = (page - 1) * TRANSCRIPT_PAGE
    return StoreView(
        boundary=checkpoint.boundary.value,
        iteration=checkpoint.iteration,
        fence=checkpoint.fence,
        written_at=checkpoint.written_at,
        lease="free"
        if lease is None
        else f"held by {lease.holder}, fence {lease.fence}, {lease.remaining:.0f} s left",
        calls=tuple(sorted(calls, key=lambda c: c.call_id)),
        turns=tuple(
            _turn(start + i + 1, m)
            for i, m in enumerate(transcript[start : start + TRANSCRIPT_PAGE])
        ),
        turn_count=len(transcript),
        model_calls=tuple(
            ModelCallRow(number=number, call=m.model_call)
            for number, m in enumerate(transcript, start=1)
            if m.model_call is not None
        ),
        cost=CostChart.of(charges),
    )
