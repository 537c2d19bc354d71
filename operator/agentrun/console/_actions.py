"""Approve, deny, resolve, suspend, resume and delete: each sent to the API server as the person.

The console decides nothing here. It checks that the form came from its own page (the CSRF
token) and that it is not read-only, then makes the write with the person's credentials: RBAC
and the chart's decisions policy accept or refuse it, and a refusal is shown as the API server
worded it. So a person without ``approve`` who forges the POST gets the API server's no, and the
``by`` of every decision is the user the API server authenticated, which the policy checks.

Appends are JSON patches guarded by the resourceVersion the console read, as ``agentrun approve
--kube`` makes them: an answer never lands on a run that changed since the person saw it (a
second try is made once on a fresh read, in case only the status moved).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from agentrun._base import FrozenModel
from agentrun._decisions import append_operations
from agentrun.console._apiserver import JSON_PATCH, Answer
from agentrun.console._callers import Person
from agentrun.console._run_page import read_run
from agentrun.console._runs import row_of
from agentrun.console._watch import collection
from agentrun.console._web import (
    back_to,
    console_of,
    csrf_ok,
    person_of,
    render,
    sign_in_first,
)


class Refusal(Exception):
    """What the person asked for cannot be done; the message says why."""


def _decision(obj: dict[str, Any], form: dict[str, str], person: Person) -> list[dict[str, Any]]:
    pending = (obj.get("status") or {}).get("pendingApproval") or {}
    request_id = form.get("request", "")
    if not pending or pending.get("requestId") != request_id:
        raise Refusal(f"the run is no longer waiting on approval {request_id}")
    entry: dict[str, Any] = {
        "requestId": request_id,
        "decision": "deny" if form.get("decision") == "deny" else "approve",
        "by": person.user,
    }
    if form.get("reason", "").strip():
        entry["reason"] = form["reason"].strip()
    return append_operations(obj, "approvals", entry)


def _resolution(obj: dict[str, Any], form: dict[str, str], person: Person) -> list[dict[str, Any]]:
    call_id = form.get("call", "")
    undecidable = {
        c.get("callId") for c in (obj.get("status") or {}).get("indeterminateCalls") or ()
    }
    if call_id not in undecidable:
        raise Refusal(f"call {call_id} is no longer undecidable")
    outcome = form.get("outcome", "")
    if outcome not in ("ran", "didNotRun"):
        raise Refusal("say whether the call ran or did not run")
    entry: dict[str, Any] = {"callId": call_id, "outcome": outcome, "by": person.user}
    if outcome == "ran":
        entry["result"] = form.get("result", "")
    return append_operations(obj, "resolutions", entry)


def _suspension(suspend: bool) -> Any:
    def patch(obj: dict[str, Any], form: dict[str, str], person: Person) -> list[dict[str, Any]]:
        if row_of(obj).ended:
            raise Refusal("the run has finished: there is nothing to suspend or resume")
        has = "suspend" in (obj.get("spec") or {})
        return [{"op": "replace" if has else "add", "path": "/spec/suspend", "value": suspend}]

    return patch


PATCHES = {
    "decide": _decision,
    "resolve": _resolution,
    "suspend": _suspension(True),
    "resume": _suspension(False),
}
DONE = {
    "decide": "your decision was recorded; the operator carries the run on",
    "resolve": "your answer was recorded; the operator carries the run on",
    "suspend": "the run is suspended: no worker carries it on until it is resumed",
    "resume": "the run is resumed",
}


def refused_before(request: Request, form: dict[str, str]) -> Response | None:
    """The refusal of a write the console makes itself, before anything reaches the API
    server: a form that did not come from its page, or a read-only console."""
    if not csrf_ok(request, form.get("csrf", "")):
        return render(
            request, "error.html", status=403, title="Refused",
            detail="This form did not come from this console's page (its CSRF token is "
            "missing or wrong). Reload the page and try again.",
        )  # fmt: skip
    if console_of(request).settings.read_only:
        return render(
            request, "error.html", status=403, title="Read-only",
            detail="This console is read-only (console.readOnly): use kubectl or agentrun.",
        )  # fmt: skip
    return None


class Outcome(FrozenModel):
    """What became of one action on one run: done, or refused and why."""

    namespace: str
    name: str
    done: bool
    message: str


async def perform(
    request: Request, person: Person, namespace: str, name: str, action: str, form: dict[str, str]
) -> Outcome:
    """``action`` on one run, as ``person``; never raises for a refusal, which it returns."""
    console = console_of(request)

    def outcome(done: bool, message: str) -> Outcome:
        return Outcome(namespace=namespace, name=name, done=done, message=message)

    if action == "delete":
        deleted = await console.apiserver.call(
            "DELETE", f"{collection(namespace)}/{name}", person.caller
        )
        if not deleted.ok:
            return outcome(False, f"the API server refused: {deleted.message}")
        return outcome(True, "deleted: the operator forgets it in the store")
    if action not in PATCHES:
        return outcome(False, f"no action {action!r}")
    answer: Answer | None = None
    for _ in range(2):
        obj = await read_run(request, person, namespace, name)
        if obj is None:
            return outcome(False, "there is no such run, or you may not see it")
        try:
            operations = PATCHES[action](obj, form, person)
        except Refusal as refusal:
            return outcome(False, str(refusal))
        answer = await console.apiserver.call(
            "PATCH", f"{collection(namespace)}/{name}", person.caller,
            body=operations, content_type=JSON_PATCH,
        )  # fmt: skip
        # 422 from a failed "test": the run moved on since it was read; read it again, once.
        if answer.status != 422 or "test" not in answer.message:
            break
    assert answer is not None
    if not answer.ok:
        return outcome(False, f"the API server refused: {answer.message}")
    return outcome(True, DONE[action])


async def act(request: Request) -> Response:
    person = person_of(request)
    if person is None:
        return sign_in_first(request)
    namespace, name, action = (
        request.path_params["namespace"],
        request.path_params["name"],
        request.path_params["action"],
    )
    form = {k: str(v) for k, v in (await request.form()).items()}
    refused = refused_before(request, form)
    if refused is not None:
        return refused
    if action == "delete" and form.get("confirm") != name:
        return back_to(
            request, f"/runs/{namespace}/{name}", "refused",
            f"type the run's name ({name}) to confirm the delete",
        )  # fmt: skip
    result = await perform(request, person, namespace, name, action, form)
    if result.done and action == "delete":
        return RedirectResponse(f"/runs?namespace={quote(namespace, safe='')}", status_code=303)
    key = "said" if result.done else "refused"
    return back_to(request, f"/runs/{namespace}/{name}", key, result.message)
