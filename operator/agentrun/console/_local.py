"""The local console (``agentrun console``): the same pages over a store, without Kubernetes.

For kit users whose runs live in a store and nowhere else: the runs page, the inbox and each
run's page are rendered from the frontiers the store holds (``RunLister``), and approve, deny
and "it ran / it did not run" are recorded as ``agentrun approve`` and ``agentrun resolve`` record
them (``answer_approval``, ``answer_call``: the same checks, the answer to a call made under the
run's lease). There is no API server, so no sign-in: the console listens on loopback only, and
whoever reaches it acts as the operating system's user who started it, as at their terminal.

A run's state here is what its frontier says: ``AwaitingApproval`` (it holds a call for a
person's decision), ``Indeterminate`` (a call may or may not have taken effect) or
``Checkpointed`` (nothing waits on a person: ``agentrun run --resume`` carries it on, or finds it
done). Its age is the age of its newest frontier. The store is read again at most once a second
while a page asks, and every ``POLL`` seconds while a browser listens for live updates: a local
console nobody looks at costs the store nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from starlette.requests import Request
from starlette.responses import Response

from agentrun._backend import Backend, RunLister, StoreSet
from agentrun._checkpointing import Checkpointer
from agentrun._decisions import ApprovalDecision, answer_approval, answer_call
from agentrun._errors import AgentRunError
from agentrun._resume import ToolDisposition, plan_resume
from agentrun.console._actions import refused_before
from agentrun.console._index import RunIndex
from agentrun.console._runs import Approval, RunRow, Undecidable
from agentrun.console._timeline import TRANSCRIPT_PAGE, Moment, read_store
from agentrun.console._web import (
    back_to,
    console_of,
    nothing_here,
    person_of,
    render,
    sign_in_first,
    what_was_said,
)

POLL = 2.0
FRESH = 1.0
"""Seconds a listing stays fresh for the pages that ask."""
MOST = 5_000
"""Runs listed at most: a local store's worth."""
AT_ONCE = 16


async def _row(backend: Backend, tenant: str, run_id: str) -> RunRow | None:
    commits = backend.commits if isinstance(backend, StoreSet) else None
    found = await Checkpointer(
        backend.checkpoints, history=backend.history, commits=commits
    ).resumable(tenant, run_id)
    if found is None:
        return None
    checkpoint, transcript = found
    plan = await plan_resume(checkpoint, backend.idempotency, transcript)
    lease = await backend.leases.held(tenant, run_id)
    undecidable = tuple(
        Undecidable(call_id=d.pending.call.id, tool=d.pending.call.name)
        for d in plan.decisions
        if d.disposition is ToolDisposition.INDETERMINATE and not d.pending.safe_to_repeat
    ) + tuple(
        Undecidable(call_id=record.call_id or record.key, tool=record.tool or "")
        for record in plan.unaccounted
    )
    approval = checkpoint.approval
    state = "AwaitingApproval" if approval else "Indeterminate" if undecidable else "Checkpointed"
    return RunRow(
        namespace=tenant,
        name=run_id,
        uid=f"{tenant}/{run_id}",
        resource_version=f"{checkpoint.fence}/{checkpoint.written_at.isoformat()}/{state}",
        agent=checkpoint.agent_name,
        state=state,
        iteration=checkpoint.iteration,
        input_tokens=checkpoint.usage.input_tokens,
        output_tokens=checkpoint.usage.output_tokens,
        cost_micros=checkpoint.cost_micros,
        holder=lease.holder if lease else "",
        fence=checkpoint.fence,
        tenant=tenant,
        created=checkpoint.written_at,
        waiting_since=checkpoint.written_at if approval or undecidable else None,
        approval=None
        if approval is None
        else Approval(request_id=approval.request_id, call_id=approval.call_id, tool=approval.tool),
        undecidable=undecidable,
    )


class StoreListing:
    """Keeps the console's index to what the store holds, when someone looks."""

    def __init__(self, backend: Backend, index: RunIndex) -> None:
        if not isinstance(backend.checkpoints, RunLister):
            raise TypeError("this store cannot list its runs; the local console needs it to")
        self._lister: RunLister = backend.checkpoints
        self._backend = backend
        self._index = index
        self._listed = 0.0
        self._lock = asyncio.Lock()

    async def fresh(self) -> None:
        """List the store again unless it was listed within ``FRESH`` seconds."""
        async with self._lock:
            if time.monotonic() - self._listed < FRESH and self._index.synced.is_set():
                return
            await self._list()
            self._listed = time.monotonic()

    async def _list(self) -> None:
        keys: list[tuple[str, str]] = []
        after: tuple[str, str] | None = None
        while len(keys) < MOST:
            page = await self._lister.runs(after=after)
            keys.extend(page)
            if not page:
                break
            after = page[-1]
        gate = asyncio.Semaphore(AT_ONCE)

        async def one(tenant: str, run_id: str) -> RunRow | None:
            async with gate:
                return await _row(self._backend, tenant, run_id)

        rows = [r for r in await asyncio.gather(*(one(*k) for k in keys[:MOST])) if r]
        if not self._index.synced.is_set():
            self._index.replace_all(rows)
            return
        now = {row.uid: row for row in rows}
        for row in list(self._index.rows()):
            if row.uid not in now:
                self._index.delete(row)
        known = {row.uid: row for row in self._index.rows()}
        for row in rows:
            if known.get(row.uid) != row:
                self._index.upsert(row)

    async def keep_listing(self) -> None:
        """List while browsers listen for live updates; nothing while nobody does."""
        while True:
            if self._index.listened_to:
                with contextlib.suppress(AgentRunError):  # the page that asks next says why
                    await self.fresh()
            await asyncio.sleep(POLL)


async def local_run_page(request: Request) -> Response:
    console = console_of(request)
    assert console.backend is not None
    if person_of(request) is None:
        return sign_in_first(request)
    tenant, run_id = request.path_params["namespace"], request.path_params["name"]
    row = await _row(console.backend, tenant, run_id)
    if row is None:
        return nothing_here(request)
    page_text = request.query_params.get("transcript", "1")
    page = int(page_text) if page_text.isdigit() and int(page_text) > 0 else 1
    store = await read_store(console.backend, tenant, run_id, page)
    writable = not console.settings.read_only
    said, refused = what_was_said(request)
    return render(
        request,
        "run_live.html" if request.headers.get("X-Console-Fragment") else "run.html",
        row=row,
        moments=[Moment(at=row.created, kind="checkpoint", title=f"frontier at {store.boundary}")],
        events_refused="",
        approvals=[],
        resolutions=[],
        store=store,
        transcript_page=page,
        transcript_pages=max(1, -(-store.turn_count // TRANSCRIPT_PAGE)),
        may={"approve": writable, "resolve": writable, "patch": writable, "suspend": False,
             "delete": False},
        said=said,
        refused=refused,
    )  # fmt: skip


async def local_act(request: Request) -> Response:
    console = console_of(request)
    person = person_of(request)
    assert console.backend is not None
    if person is None:
        return sign_in_first(request)
    tenant, run_id = request.path_params["namespace"], request.path_params["name"]
    action = request.path_params["action"]
    form = {k: str(v) for k, v in (await request.form()).items()}
    refused = refused_before(request, form)
    if refused is not None:
        return refused
    target = f"/runs/{tenant}/{run_id}"
    try:
        if action == "decide":
            approved = form.get("decision") != "deny"
            decision = ApprovalDecision(
                approved=approved, by=person.user, reason=form.get("reason", "").strip()
            )
            await answer_approval(
                console.backend, tenant, run_id, form.get("request", ""), decision
            )
            said = f"{'approved' if approved else 'denied'}; {_carry_on(tenant, run_id)}"
        elif action == "resolve":
            ran = form.get("outcome") == "ran"
            await answer_call(
                console.backend, tenant, run_id, form.get("call", ""),
                ran=ran, result=form.get("result", "") if ran else None, by=person.user,
            )  # fmt: skip
            said = f"your answer was recorded; {_carry_on(tenant, run_id)}"
        else:
            return render(request, "error.html", status=404, title="No such action", detail=action)
    except AgentRunError as error:
        return back_to(request, target, "refused", str(error))
    return back_to(request, target, "said", said)


def _carry_on(tenant: str, run_id: str) -> str:
    return f"`agentrun run --resume {run_id} --tenant {tenant}` carries the run on"
