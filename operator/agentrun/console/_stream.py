"""Live updates: Server-Sent Events from the console's one watch, filtered per person.

A page opens ``/events`` with its view (``runs`` with the page's filter, ``inbox``, or ``run``
with the run's uid). Each browser is a listener on the index, never a watch of its own: the API
server sees one watch per console replica however many people look. Changes are gathered for a
quarter of a second and sent as one batch: a row's new HTML where the page shows it, or word that
the page should refetch its live part (a run entered or left the view, or the watch listed
afresh). A browser that reconnects (the console restarted, the network blinked) refetches as it
opens again (``static/console.js``), so it catches up with what it missed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import Response

from agentrun.console._callers import Person
from agentrun.console._index import Change
from agentrun.console._listing import BadFilter, Filter, state_counts
from agentrun.console._pages import visible_rows
from agentrun.console._runs import RunRow
from agentrun.console._settings import AuthMode
from agentrun.console._web import Console, console_of, person_of

GATHER = 0.25
"""Seconds changes are gathered for before a batch is sent."""
PING = 15
"""Seconds between keep-alive comments, so proxies keep an idle stream open."""


def _event(name: str, **data: object) -> ServerSentEvent:
    return ServerSentEvent(data=json.dumps(data), event=name)


async def _changes(
    request: Request,
    console: Console,
    person: Person,
    view: str,
    uid: str,
    runs_filter: Filter,
    since: str,
) -> AsyncIterator[ServerSentEvent]:
    index = console.index
    with index.listening() as listener:
        yield _event("hello", view=view)
        if since != index.generation:
            # Something changed between the page's render and this stream (or the console
            # restarted since): the page refetches rather than miss it.
            yield _event("refresh")
        while not await request.is_disconnected():
            if not index.listening_to(listener):
                yield _event("refresh")
                return  # dropped for falling behind: the browser reconnects and catches up
            try:
                first = await asyncio.wait_for(listener.next(), timeout=PING)
            except TimeoutError:
                continue
            await asyncio.sleep(GATHER)
            batch = [first, *listener.drain()]
            async for event in _events_for(request, console, person, view, uid, runs_filter, batch):
                yield event


async def _events_for(
    request: Request,
    console: Console,
    person: Person,
    view: str,
    uid: str,
    runs_filter: Filter,
    batch: list[Change],
) -> AsyncIterator[ServerSentEvent]:
    if any(change.kind == "reset" for change in batch):
        yield _event("refresh")
        return
    latest: dict[str, Change] = {}
    for change in batch:
        assert change.row is not None
        latest[change.row.uid] = change
    namespaces = {c.row.namespace for c in latest.values() if c.row is not None}
    allowed = await console.access.listable(person, namespaces)
    seen = [c for c in latest.values() if c.row is not None and c.row.namespace in allowed]
    if not seen:
        return
    now = datetime.now(UTC)
    since = runs_filter.youngest(now)
    template = console.templates.get_template("_row.html")
    for change in seen:
        row: RunRow = change.row  # type: ignore[assignment]
        if view == "run":
            if row.uid == uid:
                yield _event("gone" if change.kind == "delete" else "refresh", id=row.dom_id)
            continue
        if change.kind == "delete":
            yield _event("gone", id=row.dom_id)
            continue
        if view == "inbox":
            yield _event("change", id=row.dom_id, matches=row.waits_on_a_person)
            continue
        yield _event(
            "change",
            id=row.dom_id,
            matches=runs_filter.matches(row, since),
            html=template.render(
                row=row,
                now=now,
                read_only=console.settings.read_only,
                local=console.settings.auth is AuthMode.LOCAL,
            ),
        )
    if view == "runs":
        # Counted, not listed: every browser on the runs page gets this for every batch.
        counts = state_counts(runs_filter, await visible_rows(request, person), now)
        template = console.templates.get_template("_counts.html")
        yield _event("counts", html=template.render(view=runs_filter, counts=counts))


async def events(request: Request) -> Response:
    person = person_of(request)
    if person is None:
        return Response("sign in first", status_code=401)
    console = console_of(request)
    query = dict(request.query_params)
    view = query.pop("view", "runs")
    uid = query.pop("uid", "")
    since = query.pop("since", "")
    if view not in ("runs", "inbox", "run"):
        return Response(f"view={view!r}: runs, inbox or run", status_code=400)
    try:
        runs_filter = Filter.of(query) if view == "runs" else Filter()
    except BadFilter as error:
        return Response(str(error), status_code=400)
    return EventSourceResponse(
        _changes(request, console, person, view, uid, runs_filter, since),
        ping=PING,
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
