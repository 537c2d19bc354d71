"""Runs queued on their namespace's RunQuota, and which of them may go when places free.

A run its quota had no room for shows ``Queued`` (no place among the active runs, or the
budget spent before it started: ``_admission``) or ``QuotaSpent`` (the budget spent before its
next model call: ``_namespace_budget``), and waits holding nothing.
Like every waiting run it costs no task, timer, request or store command of its own: the
scheduler keeps its name under its namespace, in the order it was queued, and looks at the
namespace, not at the run, when something can have freed a place:

* the watch shows a run of a namespace with a quota stop being held (it stopped, waits, or is
  handed over), or one deleted;
* the namespace's quota changed (raised, lowered, deleted: ``_quota_book``);
* ``SWEEP`` passed while runs wait in it (a signal this replica missed, a place left taken by a
  worker that died).

One replica looks at a namespace: the one rendezvous hashing prefers for it (``_peers``), so
that places are not handed out twice over. A look reads the places taken (one store command),
frees those of runs the watch shows stopped under the fence they took it with, lets the first
queued runs go, as many as there are places, none while the window's budget is spent (their
workers take the places in the store, so a race can only queue one again, never start one too
many), and writes the quota's status when what it shows changed. Looks at one namespace come
one at a time, at most one every ``SETTLE``: a burst of watch events makes one look, not one
each.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime
from typing import Any

from agentrun._errors import StaleFenceError
from agentrun._outcomes import SUCCEEDED
from agentrun._quotas import Spending
from agentrun.operator._admission import QUOTA_REASONS, TENANT, allowance, exhausted, window_of
from agentrun.operator._conditions import find
from agentrun.operator._context import OperatorContext
from agentrun.operator._events import notice
from agentrun.operator._quota_resource import (
    NamedQuota,
    WhenSpent,
    active_summary,
    spent_summary,
    window_start,
)

SWEEP = 10.0
"""Seconds between looks at a namespace with queued runs when nothing else calls for one."""

SETTLE = 0.5
"""Seconds a look waits for the watch events that come with the one that called for it."""

START_GRACE = 60.0
"""Seconds after start-up before a place held by a run the watch has not shown is taken as a
deleted run's (the watch's first listing may not have reached it yet)."""

WAITING = frozenset(outcome.reason for outcome in QUOTA_REASONS)

QUEUING = "Queuing"
"""The event a quota posts when runs start waiting on it."""

BUDGET_SPENT = "BudgetSpent"
"""The warning a quota posts when its budget for a window is spent."""

log = logging.getLogger(__name__)

Spawn = Callable[[Coroutine[Any, Any, None], str], asyncio.Task[None]]
Wake = Callable[[str, str, str], None]
"""Let a queued run go: its uid, namespace and name (``Scheduler._start``)."""


class QuotaQueue:
    """The queued runs of every namespace this replica sees, and the looks that let them go."""

    def __init__(
        self,
        context: OperatorContext,
        wake: Wake,
        at_work: Callable[[str], set[str]],
        spawn: Spawn,
    ) -> None:
        self.context = context
        self.wake = wake
        self.at_work = at_work
        """The runs of a namespace this replica has a worker for."""
        self.spawn = spawn
        self._queued: dict[str, dict[str, tuple[str, str]]] = {}
        """Queued runs by namespace: when each was queued, and its name."""
        self._namespace_of: dict[str, str] = {}
        self._shown: dict[str, tuple[str, str | None, int | None]] = {}
        """Every run the watch shows: its namespace, holder and the fence its status names."""
        self._looking: set[str] = set()
        self._looks_at_work: set[asyncio.Task[None]] = set()
        """The looks under way: held here, or the loop (which keeps only weak references to
        its tasks) may collect one mid-look; cancelled at ``stop``."""
        self._again: set[str] = set()
        self._started = time.monotonic()
        self._sweeper: asyncio.Task[None] | None = None
        self._spent_windows: dict[str, str] = {}
        """The last window of each namespace found spent (its event was posted)."""

    # -- what the watch says ----------------------------------------------------------------

    def seen(self, body: Mapping[str, Any]) -> None:
        """A watch event of a run (not a deletion): keep what a look needs of it."""
        meta, status = body["metadata"], body.get("status") or {}
        uid, namespace = str(meta["uid"]), str(meta["namespace"])
        lease = status.get("lease") or {}
        holder = lease.get("holder")
        fence = lease.get("fence")
        before = self._shown.get(uid)
        self._shown[uid] = (namespace, holder, None if fence is None else int(fence))
        succeeded = find(status.get("conditions") or [], SUCCEEDED) or {}
        if succeeded.get("reason") in WAITING and not holder:
            if uid not in self._namespace_of:
                since = str(succeeded.get("lastTransitionTime") or "")
                self._queued.setdefault(namespace, {})[uid] = (since, str(meta["name"]))
                self._namespace_of[uid] = namespace
                self.poke(namespace)
        else:
            self.unpark(uid)
        if before is not None and before[1] and not holder:
            self.poke(namespace)  # a run stopped being held: a place may be free

    def gone(self, uid: str) -> None:
        """The run was deleted."""
        shown = self._shown.pop(uid, None)
        self.unpark(uid)
        if shown is not None:
            self.poke(shown[0])

    def holds(self, uid: str) -> bool:
        """Whether the run is kept here as queued (nothing else wakes it)."""
        return uid in self._namespace_of

    def unpark(self, uid: str) -> None:
        namespace = self._namespace_of.pop(uid, None)
        if namespace is not None:
            runs = self._queued[namespace]
            del runs[uid]
            if not runs:
                del self._queued[namespace]

    def queued(self, namespace: str) -> int:
        return len(self._queued.get(namespace, {}))

    # -- looks ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._sweeper = self.spawn(self._sweep(), "quota sweep")

    def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        for look in self._looks_at_work:
            look.cancel()

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(SWEEP)
            for namespace in list(self._queued):
                self.poke(namespace)

    def poke(self, namespace: str) -> None:
        """Something can have freed a place in the namespace: look at it soon, if this replica
        is the one that looks at it and its quota is known to cap anything."""
        if self.context.quotas.known(namespace) is None and namespace not in self._queued:
            return
        if self.context.peers.preferred(f"quota/{namespace}") != self.context.config.worker_id:
            return
        if namespace in self._looking:
            self._again.add(namespace)
            return
        self._looking.add(namespace)
        look = self.spawn(self._looks(namespace), f"quota {namespace}")
        self._looks_at_work.add(look)
        look.add_done_callback(self._looks_at_work.discard)

    async def _looks(self, namespace: str) -> None:
        try:
            while True:
                await asyncio.sleep(SETTLE)
                self._again.discard(namespace)
                try:
                    await self._look(namespace)
                except Exception as error:  # the store or the API server away: at the sweep
                    log.warning("could not look at namespace %s's quota: %s", namespace, error)
                if namespace not in self._again:
                    return
        finally:
            self._looking.discard(namespace)

    async def _look(self, namespace: str) -> None:
        quota = await self.context.quotas.get(namespace)
        limit = None if quota is None else quota.spec.max_active_runs
        queued = sorted(self._queued.get(namespace, {}).items(), key=lambda each: each[1])
        at_work = self.at_work(namespace)
        if limit is None:  # no places: the runs the watch shows held are the active ones
            free, active = len(queued), self._held(namespace)
        else:
            places = await self.context.backend.quotas.admitted(TENANT, namespace)
            for uid, fence in list(places.items()):
                if uid not in at_work and self._stopped(uid, fence):
                    await self._free(namespace, uid, fence)
                    del places[uid]
            active = len(places.keys() | at_work)
            free = max(0, limit - active)
        spending = None
        if quota is not None and (budget := quota.spec.budget) is not None:
            window = window_of(budget)
            spending = await self.context.backend.quotas.spending(TENANT, namespace, window)
            if exhausted(spending, allowance(budget)):
                free = 0  # nobody goes on until the window turns or the budget is raised
                self._spent(namespace, quota, window)
        for uid, (_, name) in queued[:free]:
            self.unpark(uid)
            self.wake(uid, namespace, name)
        if quota is not None:
            await self._show(namespace, quota, active, self.queued(namespace), spending)

    def _held(self, namespace: str) -> int:
        return sum(shown[0] == namespace and bool(shown[1]) for shown in self._shown.values())

    def _stopped(self, uid: str, fence: int) -> bool:
        """Whether the watch shows the run stopped under ``fence`` or later (its worker died
        before giving its place back), or gone."""
        shown = self._shown.get(uid)
        if shown is None:
            return time.monotonic() - self._started > START_GRACE
        _, holder, shown_fence = shown
        return not holder and shown_fence is not None and shown_fence >= fence

    async def _free(self, namespace: str, uid: str, fence: int) -> None:
        try:
            await self.context.backend.quotas.leave(TENANT, namespace, uid, fence=fence)
        except StaleFenceError:
            return  # taken again under a later fence meanwhile: its holder's
        log.info("freed the place run %s left taken in %s's quota", uid, namespace)

    def _spent(self, namespace: str, quota: NamedQuota, window: str) -> None:
        """Post ``BudgetSpent`` on the quota the first time this replica finds a window spent."""
        if self._spent_windows.get(namespace) == window:
            return
        self._spent_windows[namespace] = window
        body = self.context.quotas.body(namespace, quota.name)
        if body is not None:
            paused = quota.spec.when_spent is WhenSpent.PAUSE
            notice(
                self.context.backend.masker,
                body,
                BUDGET_SPENT,
                f"the budget for the window {window} is spent: runs that have not started wait"
                + (", and runs at work stop before their next model call" if paused else ""),
                warning=True,
            )

    async def _show(
        self,
        namespace: str,
        quota: NamedQuota,
        active: int,
        queued: int,
        spending: Spending | None,
    ) -> None:
        """Write the quota's status if what it shows changed."""
        body = self.context.quotas.body(namespace, quota.name)
        if body is None:
            return
        shown = body.get("status") or {}
        limit = quota.spec.max_active_runs
        wanted: dict[str, object] = {
            "active": active,
            "queued": queued,
            "activeSummary": active_summary(active, quota.spec),
            "observedGeneration": body["metadata"].get("generation"),
        }
        budget = quota.spec.budget
        if spending is not None and budget is not None:
            wanted |= {
                "spentMicros": spending.spent.micros,
                "spentTokens": spending.spent.tokens,
                "spentSummary": spent_summary(
                    spending.spent.micros, spending.spent.tokens, quota.spec
                ),
                "windowStart": window_start(datetime.now(UTC), budget.window).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"
                ),
            }
        if all(shown.get(key) == value for key, value in wanted.items()):
            return
        await self.context.api.patch_quota_status(namespace, quota.name, wanted)
        if queued and not shown.get("queued"):
            notice(
                self.context.backend.masker,
                body,
                QUEUING,
                f"{active} runs are active of the {'-' if limit is None else limit} allowed: "
                f"{queued} wait",
            )
