"""A run's page: the object read as the person, its events, and what the store says of it.

The object is read with the person's own credentials: a run they may not get is "no such run",
whether it exists or not. The store is read only after a SubjectAccessReview (made as them) says
they may ``get`` it, and the action buttons are shown for what the same reviews allow; the
actions themselves are decided by the API server all the same (``_actions``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from agentrun.console._callers import Person
from agentrun.console._pages import FRAGMENT
from agentrun.console._runs import row_of
from agentrun.console._timeline import TRANSCRIPT_PAGE, StoreView, moments, read_store
from agentrun.console._watch import collection
from agentrun.console._web import (
    console_of,
    nothing_here,
    person_of,
    render,
    sign_in_first,
    what_was_said,
)


async def read_run(
    request: Request, person: Person, namespace: str, name: str
) -> dict[str, Any] | None:
    """The AgentRun as the person may read it; None when it is gone or not theirs to see."""
    answer = await console_of(request).apiserver.call(
        "GET", f"{collection(namespace)}/{name}", person.caller
    )
    return answer.body if answer.ok else None


async def run_page(request: Request) -> Response:
    person = person_of(request)
    if person is None:
        return sign_in_first(request)
    console = console_of(request)
    namespace, name = request.path_params["namespace"], request.path_params["name"]
    obj = await read_run(request, person, namespace, name)
    if obj is None or not await console.access.may(person, "get", namespace, name):
        return nothing_here(request)
    row = row_of(obj)
    events_answer = await console.apiserver.call(
        "GET",
        f"/api/v1/namespaces/{namespace}/events",
        person.caller,
        params={"fieldSelector": f"involvedObject.uid={row.uid}"},
    )
    events = list(events_answer.body.get("items") or ()) if events_answer.ok else []
    page_text = request.query_params.get("transcript", "1")
    page = int(page_text) if page_text.isdigit() and int(page_text) > 0 else 1
    if console.backend is None and console.settings.store:
        store = StoreView(error=f"the store cannot be reached yet: {console.store_error}")
    elif console.backend is None:
        store = StoreView(error="the console was started without the store (--store)")
    elif not row.tenant:
        store = StoreView(error="the operator has not started this run yet")
    else:
        store = await read_store(console.backend, row.tenant, row.uid, page)
    may = {
        verb: not console.settings.read_only
        and await console.access.may(person, verb, namespace, name)
        for verb in ("patch", "approve", "resolve", "delete")
    }
    may["suspend"] = may["patch"] and not row.ended  # a finished run has nothing to hold
    spec = obj.get("spec") or {}
    said, refused = what_was_said(request)
    return render(
        request,
        "run_live.html" if request.headers.get(FRAGMENT) else "run.html",
        row=row,
        obj=obj,
        moments=moments(obj, events),
        events_refused="" if events_answer.ok else events_answer.message,
        approvals=list(spec.get("approvals") or ()),
        resolutions=list(spec.get("resolutions") or ()),
        store=store,
        transcript_page=page,
        transcript_pages=max(1, -(-store.turn_count // TRANSCRIPT_PAGE)),
        may=may,
        said=said,
        refused=refused,
        now=datetime.now(UTC),
    )
