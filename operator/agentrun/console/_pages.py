"""The runs page and the inbox: rendered from the watch's index, filtered to what the person may
list (one access review per namespace, kept a few seconds)."""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import Response

from agentrun.console._callers import Person
from agentrun.console._listing import BadFilter, Filter, listing
from agentrun.console._runs import RunRow
from agentrun.console._web import console_of, person_of, render, sign_in_first

FRAGMENT = "X-Console-Fragment"
"""Sent by the page's script when it refetches only the live part of a page."""


async def visible_rows(request: Request, person: Person) -> list[RunRow]:
    console = console_of(request)
    if console.refresh is not None:
        await console.refresh()
    rows = list(console.index.rows())
    allowed = await console.access.listable(person, {row.namespace for row in rows})
    return [row for row in rows if row.namespace in allowed]


async def runs_page(request: Request) -> Response:
    person = person_of(request)
    if person is None:
        return sign_in_first(request)
    try:
        view = Filter.of(request.query_params)
    except BadFilter as error:
        return render(request, "error.html", status=400, title="Bad filter", detail=str(error))
    rows = await visible_rows(request, person)
    page = listing(view, rows, datetime.now(UTC))
    return render(
        request,
        "runs_live.html" if request.headers.get(FRAGMENT) else "runs.html",
        view=view,
        page=page,
        namespaces=sorted({r.namespace for r in rows}),
        agents=sorted({r.agent for r in rows if r.agent}),
        now=datetime.now(UTC),
    )


async def inbox_page(request: Request) -> Response:
    person = person_of(request)
    if person is None:
        return sign_in_first(request)
    rows = [row for row in await visible_rows(request, person) if row.waits_on_a_person]
    rows.sort(key=lambda row: (row.waiting_since or row.created, row.namespace, row.name))
    console = console_of(request)
    arguments = await console.inbox_arguments.of(console.access, console.backend, person, rows)
    return render(
        request,
        "inbox_live.html" if request.headers.get(FRAGMENT) else "inbox.html",
        rows=rows,
        arguments=arguments,
        now=datetime.now(UTC),
    )
