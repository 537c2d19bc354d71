"""The same actions on a selection of runs: suspend, resume or delete the runs ticked on the runs
page; approve or deny the approvals ticked in the inbox.

Each run is its own request to the API server as the person, so each is allowed or refused on its
own (a selection across namespaces may be half theirs), and the page that follows lists every
run with what became of it. A delete of a selection is confirmed by typing how many runs it
deletes, which names what is lost as the single delete does.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response

from agentrun.console._actions import perform, refused_before
from agentrun.console._web import person_of, render, sign_in_first

ACTIONS = ("suspend", "resume", "delete", "approve", "deny")
MOST = 200
"""Runs one selection may act on: a page's worth and more, not a namespace's thousands."""
AT_ONCE = 8


async def bulk(request: Request) -> Response:
    person = person_of(request)
    if person is None:
        return sign_in_first(request)
    submitted = await request.form()
    form = {k: str(v) for k, v in submitted.items() if k != "run"}
    refused = refused_before(request, form)
    if refused is not None:
        return refused
    action = form.get("action", "")
    chosen = [str(v) for v in submitted.getlist("run")]
    problem = ""
    if action not in ACTIONS:
        problem = f"action={action!r}: one of {', '.join(ACTIONS)}"
    elif not chosen:
        problem = "no run was selected: tick the runs to act on"
    elif len(chosen) > MOST:
        problem = f"{len(chosen)} runs selected; at most {MOST} at once"
    elif action == "delete" and form.get("confirm", "").strip() != str(len(chosen)):
        problem = (
            f"deleting forgets each run in the store and cannot be undone: type the number of "
            f"runs selected ({len(chosen)}) to confirm"
        )
    targets: list[tuple[str, str, str]] = []
    for value in chosen:
        # "namespace/name", or "namespace/name/requestId" for an approval in the inbox
        parts = value.split("/")
        if len(parts) not in (2, 3) or not all(parts):
            problem = problem or f"run={value!r}: namespace/name, or namespace/name/requestId"
            continue
        targets.append((parts[0], parts[1], parts[2] if len(parts) == 3 else ""))
    if problem:
        return render(request, "error.html", status=400, title="Nothing done", detail=problem)
    gate = asyncio.Semaphore(AT_ONCE)

    async def one(namespace: str, name: str, request_id: str) -> object:
        fields = dict(form)
        verb = action
        if action in ("approve", "deny"):
            verb, fields["decision"], fields["request"] = "decide", action, request_id
        async with gate:
            return await perform(request, person, namespace, name, verb, fields)

    outcomes = await asyncio.gather(*(one(*target) for target in targets))
    return render(request, "bulk.html", action=action, outcomes=outcomes)
