"""Which runs this replica works on, and when: decided from the watch, one task per run at work.

Every replica of an install sees every AgentRun through the watch. A run that waits — on a
person (an approval, an undecidable call), on its Agent, on ``spec.suspend``, on an edit of its
decisions, on the store (its data lost) — has nothing to do until its object or its Agent
changes, and the watch says when that happens. So a waiting run costs nothing here: no task, no
timer, no request, no store command; it is looked at again when a watch event of it, or of its
Agent, arrives.

A run with work to do gets a worker (``_worker.RunWorker``) in one replica: the one rendezvous
hashing prefers among the replicas seen lately (``_peers``) takes it at once; the others look
again ``DEFER`` later and take it only if nobody has taken its lease by then (the preferred
replica died, is full, or its watch lags). The worker runs the run until it waits again, then
ends. While another replica holds a run, this one keeps only the holder's name: a replica
lost with its pod stops beating (``_heartbeat``), and each of its runs is then taken up by a
worker here, which waits for that run's lease to lapse and resumes it.

A replica has room for as many workers as its status writes stay quick with (``StartLimit``),
and never more than ``capacity`` (``AGENTRUN_MAX_ACTIVE_RUNS``; 0 is no limit). Runs with work
to do beyond it wait in a queue that holds only their latest watch view, and are taken in
weighted fair order across namespaces (``FairQueue``, each namespace weighted by its RunQuota's
``weight``), so a flood of runs in one namespace does not starve another.

A run its namespace's RunQuota has no room for (``_admission``: no place among the active runs,
or the budget spent) waits like any other, holding nothing; the ``QuotaQueue`` keeps it under its
namespace and lets it go when room comes.

A run waiting on a person for calls whose tools declare a way to settle them has a timer here
until they are due, no task (``_settle_timers``); the replica it prefers then asks the services
(``_settler``) and answers in its spec, which wakes it like a person's answer.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections import deque
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from agentrun._outcomes import SUCCEEDED, Outcome
from agentrun.operator import _stopping as stopping
from agentrun.operator._agent_book import Key
from agentrun.operator._answers import waiting_on_people
from agentrun.operator._claims import ours
from agentrun.operator._conditions import find, is_terminal
from agentrun.operator._context import OperatorContext
from agentrun.operator._heartbeat import Heartbeat
from agentrun.operator._news import News
from agentrun.operator._quota_queue import WAITING as QUOTA_WAITS
from agentrun.operator._quota_queue import QuotaQueue
from agentrun.operator._resource import AgentRunSpec
from agentrun.operator._settle_timers import SettleTimers
from agentrun.operator._start_limit import StartLimit
from agentrun.operator._witness import is_parked
from agentrun.operator._worker import Faulted, RunWorker

log = logging.getLogger(__name__)

GRACE = 20.0
"""Seconds the workers get, once the replica is told to stop, to reach their next step and hand
their leases back. A worker checks before each model call and each dispatch, so a tool call in
flight completes and its outcome is recorded (cancelling it would leave a keyless call
undecidable). Together with ``CANCELLED_GRACE`` it stays under the chart's
``terminationGracePeriodSeconds``."""

CANCELLED_GRACE = 5.0
"""Seconds a worker still running after ``GRACE`` gets, once cancelled, to release its lease."""

RETRY_AFTER = 5.0
"""Seconds before a run whose worker failed outside its own retries is worked on again."""

AGENT_REASONS = frozenset({Outcome.AGENT_NOT_REGISTERED.reason, Outcome.AGENT_NOT_READY.reason})
"""A run that shows one of these waits for its Agent: woken by the Agent's changes."""


def _reason(status: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """The ``Succeeded`` condition's reason, and the generation it was written for."""
    succeeded = find(status.get("conditions") or [], SUCCEEDED) or {}
    generation = succeeded.get("observedGeneration")
    return succeeded.get("reason"), None if generation is None else int(generation)


class FairQueue:
    """Runs waiting for a worker, by namespace, taken in weighted fair order: the namespace
    that has been served least for its weight goes first (start-time fair queueing over
    namespaces), each namespace's runs in the order they came."""

    def __init__(self, weight: Callable[[str], int] | None = None) -> None:
        self.weight = weight or (lambda _: 1)
        self._runs: dict[str, deque[str]] = {}
        self._views: dict[str, tuple[str, Mapping[str, Any] | None]] = {}
        self._namespace: dict[str, str] = {}
        self._served: dict[str, float] = {}
        self._clock = 0.0

    def __len__(self) -> int:
        return len(self._views)

    def __contains__(self, uid: object) -> bool:
        return uid in self._views

    def put(self, uid: str, namespace: str, name: str, view: Mapping[str, Any] | None) -> None:
        """Queue ``uid`` (or refresh the view of it the queue holds; None: none yet)."""
        if uid not in self._views:
            queue = self._runs.setdefault(namespace, deque())
            if not queue:  # a namespace that comes back starts at the present, owed nothing
                self._served[namespace] = max(self._served.get(namespace, 0.0), self._clock)
            queue.append(uid)
            self._namespace[uid] = namespace
        self._views[uid] = (name, view)

    def drop(self, uid: str) -> None:
        if uid in self._views:
            del self._views[uid]
            namespace = self._namespace.pop(uid)
            queue = self._runs[namespace]
            queue.remove(uid)
            if not queue:
                del self._runs[namespace]

    def take(self) -> tuple[str, str, str, Mapping[str, Any] | None] | None:
        """The next run (its uid, namespace and name) and its view, or None when nothing
        waits."""
        if not self._runs:
            return None
        namespace = min(self._runs, key=lambda each: (self._served[each], each))
        uid = self._runs[namespace].popleft()
        if not self._runs[namespace]:
            del self._runs[namespace]
        self._clock = self._served[namespace]
        self._served[namespace] += 1.0 / max(1, self.weight(namespace))
        del self._namespace[uid]
        name, view = self._views.pop(uid)
        return uid, namespace, name, view


@dataclass
class _Drive:
    """A worker at work on one run in this replica."""

    namespace: str
    name: str
    generation: object
    task: asyncio.Task[None] | None = None
    worker: RunWorker | None = None
    news: News = field(default_factory=News)
    dirty: bool = False
    """Something changed while the worker worked that it may not have seen (its spec, its
    Agent, its holder's death): the run is looked at again when the worker ends."""
    view: Mapping[str, Any] | None = None
    """The watch's latest view of the run, once one came."""


class Scheduler:
    """One replica's runs at work, and the decision of which run to work on next."""

    def __init__(self, context: OperatorContext, logger: logging.Logger | None = None) -> None:
        self.context = context
        self.me = context.config.worker_id
        self.capacity = context.config.max_active_runs
        self.start_limit = StartLimit()
        context.metrics.start_limit.set(self.start_limit.limit)
        context.api.holder_wrote = self._holder_wrote
        self.log = logger or log
        self.queue = FairQueue(self._weight)
        self.quota_queue = QuotaQueue(context, self._wake, self._at_work, self._spawn)
        self.settle_timers = SettleTimers(context, self._spawn, self._copied)
        self._drives: dict[str, _Drive] = {}
        self._deferred: dict[str, tuple[Mapping[str, Any], asyncio.TimerHandle, float]] = {}
        """Runs another replica is preferred for: their latest view, when to look again, and
        since when (``time.monotonic``)."""
        self._holders: dict[str, dict[str, tuple[str, str]]] = {}
        """The runs the watch shows another replica holding, by holder: their namespace and
        name."""
        self._held_by: dict[str, str] = {}
        self._beating: dict[str, float] = {}
        """When each other replica's heartbeat was last found beating (``time.monotonic``)."""
        self._on_agent: dict[Key, dict[str, tuple[str, str]]] = {}
        """Runs waiting for their Agent, by the Agent: their namespace and name."""
        self._agent_of: dict[str, Key] = {}
        self._faulted: set[str] = set()
        """Runs whose worker met an error trying again cannot mend (shown on the run): not
        worked on again by this replica."""
        self._stopping = False
        self._monitor: asyncio.Task[None] | None = None
        self._kopf_context: contextvars.Context | None = None
        """The context of kopf's handling of a watch event: a worker posts events through kopf,
        which finds its poster in context variables it sets only there, so every worker and
        timer runs in a copy of it, whatever started it (an event, an Agent, the monitor)."""

    # -- what the watch says ----------------------------------------------------------------

    def seen(self, event_type: str, body: Mapping[str, Any]) -> None:
        """A watch event of a run."""
        if self._kopf_context is None:
            self._kopf_context = contextvars.copy_context()
        uid = str(body["metadata"]["uid"])
        drive = self._drives.get(uid)
        if drive is not None:
            if event_type != "DELETED":
                drive.view = body
                if drive.worker is not None:
                    drive.worker.saw(body)
                meta = body["metadata"]
                if meta.get("generation") != drive.generation or meta.get("deletionTimestamp"):
                    drive.dirty = True
            drive.news.arrived(event_type)
        if event_type == "DELETED" or not ours(body, self.context.config.controller_name):
            self._forget(uid)  # gone, or claimed by another install: nothing of it is ours
            return
        self.settle_timers.seen(body)
        if drive is not None:
            return
        self._index(uid, body)
        if not self._wants(body):
            self._unqueue(uid)
            return
        if uid in self.queue:
            meta = body["metadata"]
            self.queue.put(uid, str(meta["namespace"]), str(meta["name"]), body)
        elif self.context.peers.preferred(uid) == self.me:
            self._unqueue(uid)
            self._start(uid, body)
        else:
            self._defer(uid, body)

    def _wants(self, body: Mapping[str, Any]) -> bool:
        """Whether the run has work for a worker, as the watch shows it (see the module's notes
        for what a waiting run waits on)."""
        meta, status = body["metadata"], body.get("status") or {}
        uid = str(meta["uid"])
        if (
            self._stopping
            or uid in self._faulted
            or meta.get("deletionTimestamp")
            or is_terminal(status.get("conditions") or [])
            or is_parked(status)
            or (status.get("lease") or {}).get("holder")
        ):
            return False
        try:
            spec = AgentRunSpec.model_validate(dict(body.get("spec") or {}))
        except ValidationError:
            return True  # the worker says what is wrong with it
        if waiting_on_people(spec, status):
            return False
        reason, shown_for = _reason(status)
        unchanged = shown_for == int(meta.get("generation") or 1)
        if spec.suspend:
            return reason != Outcome.SUSPENDED.reason
        if reason == Outcome.DECISIONS_UNAUTHENTICATED.reason and unchanged:
            return False
        if reason in QUOTA_WAITS and unchanged and self.quota_queue.holds(uid):
            return False  # let go by the quota queue when a place frees
        # Shown as waiting on its Agent, and kept under it by ``_index``: woken by its change.
        return not (reason in AGENT_REASONS and unchanged and uid in self._agent_of)

    def _index(self, uid: str, body: Mapping[str, Any]) -> None:
        """Keep who holds the run, and whether it waits on its Agent or its quota."""
        meta, status = body["metadata"], body.get("status") or {}
        self.quota_queue.seen(body)
        holder = (status.get("lease") or {}).get("holder")
        was = self._held_by.get(uid)
        if was != holder:
            self._not_held(uid)
            if holder and holder != self.me and not is_terminal(status.get("conditions") or []):
                self._held_by[uid] = str(holder)
                self._holders.setdefault(str(holder), {})[uid] = (
                    str(meta["namespace"]),
                    str(meta["name"]),
                )
        reason, _ = _reason(status)
        agent = (str(meta["namespace"]), str((body.get("spec") or {}).get("agent") or ""))
        waits = (
            reason in AGENT_REASONS
            and not holder
            and not is_terminal(status.get("conditions") or [])
        )
        known = self._agent_of.get(uid)
        if known is not None and (not waits or known != agent):
            self._unpark(uid)
        if waits and uid not in self._agent_of and not self.context.resolver.book.ready(*agent):
            # Shown as waiting on an Agent that is ready by now (it changed before this replica
            # saw the run, at start-up say): the run is not parked, and is looked at again.
            self._agent_of[uid] = agent
            self._on_agent.setdefault(agent, {})[uid] = (agent[0], str(meta["name"]))

    def _unpark(self, uid: str) -> None:
        agent = self._agent_of.pop(uid, None)
        if agent is not None:
            runs = self._on_agent.get(agent, {})
            runs.pop(uid, None)
            if not runs:
                self._on_agent.pop(agent, None)

    def agent_changed(self, agent: Key) -> None:
        """An Agent changed in a way that can change whether its runs may go on: each run that
        waits on it is read and looked at again."""
        for uid, (namespace, name) in list(self._on_agent.get(agent, {}).items()):
            self._unpark(uid)
            drive = self._drives.get(uid)
            if drive is not None:
                drive.dirty = True
            else:
                self._start(uid, None, namespace, name)

    def _forget(self, uid: str) -> None:
        """The run is gone: keep nothing of it."""
        self._unqueue(uid)
        self._unpark(uid)
        self._not_held(uid)
        self._faulted.discard(uid)
        self.quota_queue.gone(uid)
        self.settle_timers.forget(uid)

    def _not_held(self, uid: str) -> None:
        holder = self._held_by.pop(uid, None)
        if holder is not None:
            runs = self._holders[holder]
            runs.pop(uid, None)
            if not runs:
                del self._holders[holder]

    # -- starting workers --------------------------------------------------------------------

    def _defer(self, uid: str, body: Mapping[str, Any], since: float | None = None) -> None:
        """Look at the run again two poll intervals from now, unless its preferred replica took
        it meanwhile."""
        known = self._deferred.get(uid)
        if known is not None:
            self._deferred[uid] = (body, known[1], known[2])
            return
        delay = 2 * self.context.config.poll_interval
        timer = asyncio.get_running_loop().call_later(
            delay, self._deferred_due, uid, context=self._copied()
        )
        self._deferred[uid] = (body, timer, time.monotonic() if since is None else since)

    def _deferred_due(self, uid: str) -> None:
        """Take the run up, unless its preferred replica shows signs of life (the watch showed
        it hold a run, or its heartbeat was found beating, within two poll intervals): a busy
        replica's claim and lease show late, and taking the run then only races it. That
        patience lasts a lease TTL at most (as long as a holder that died keeps a run waiting),
        and only a poll interval where replicas have a limit on their runs (the preferred one
        may be full)."""
        body, _, since = self._deferred.pop(uid)
        if uid in self._drives or not self._wants(body):
            return
        config, peers = self.context.config, self.context.peers
        now = time.monotonic()
        preferred = peers.preferred(uid)
        seen = max(peers.last_seen(preferred), self._beating.get(preferred, 0.0))
        alive = now - seen < 2 * config.poll_interval
        if alive and not self.capacity and now - since < config.lease_ttl:
            self._defer(uid, body, since)
        else:
            self._start(uid, body)

    def _unqueue(self, uid: str) -> None:
        self.queue.drop(uid)
        deferred = self._deferred.pop(uid, None)
        if deferred is not None:
            deferred[1].cancel()

    def _room(self) -> bool:
        at_work = len(self._drives)
        return at_work < self.start_limit.limit and (not self.capacity or at_work < self.capacity)

    def _holder_wrote(self, seconds: float) -> None:
        """A lease holder's status write came back: the limit follows, and runs that wait for
        room start if it grew."""
        self.start_limit.wrote(seconds, len(self._drives), bool(self.queue))
        self.context.metrics.start_limit.set(self.start_limit.limit)
        self._next()

    def _start(
        self,
        uid: str,
        body: Mapping[str, Any] | None,
        namespace: str | None = None,
        name: str | None = None,
    ) -> None:
        """Work on the run now if there is room, else queue it. ``body`` None: read it first
        (the run is woken by something other than its own watch event)."""
        if self._stopping or uid in self._drives:
            return
        self.quota_queue.unpark(uid)
        meta = body["metadata"] if body is not None else {"namespace": namespace, "name": name}
        if not self._room():
            self.queue.put(uid, str(meta["namespace"]), str(meta["name"]), body)
            return
        drive = _Drive(
            namespace=str(meta["namespace"]),
            name=str(meta["name"]),
            generation=meta.get("generation"),
            view=body,
        )
        self._drives[uid] = drive
        drive.task = asyncio.create_task(
            self._drive(uid, drive), name=f"run {uid}", context=self._copied()
        )

    def _next(self) -> None:
        """Start queued runs while there is room."""
        while self._room() and not self._stopping:
            taken = self.queue.take()
            if taken is None:
                return
            uid, namespace, name, view = taken
            self._start(uid, view, namespace, name)

    async def _drive(self, uid: str, drive: _Drive) -> None:
        retry = False
        try:
            if drive.view is None:  # woken by its Agent or its holder's death: read it
                read = await self.context.api.get(drive.namespace, drive.name)
                if read is None or drive.news.gone:
                    return
                if drive.view is None:  # else a watch event came during the read: fresher
                    drive.view = read
                drive.generation = drive.view["metadata"].get("generation")
            drive.worker = RunWorker(
                self.context, drive.view, self._told_to_stop, self.log, drive.news
            )
            drive.worker.queued_ahead = self.quota_queue.queued
            await drive.worker.work()
        except Faulted as fault:
            self._faulted.add(uid)
            self.log.error("%s", fault)
        except Exception:
            self.log.exception("the worker of run %s failed; again in %.0fs", uid, RETRY_AFTER)
            retry = True
        finally:
            del self._drives[uid]
            self._ended(uid, drive, retry)

    def _ended(self, uid: str, drive: _Drive, retry: bool) -> None:
        """A worker ended: look at its run again if something changed meanwhile that it may not
        have seen, or after ``RETRY_AFTER`` if it failed; then start what waits for room."""
        if not self._stopping and not drive.news.gone:
            view = drive.view
            if view is not None:  # what the run waits on, as its last event while at work says
                self._index(uid, view)
            if retry:
                asyncio.get_running_loop().call_later(
                    RETRY_AFTER,
                    self._start,
                    uid,
                    None,
                    drive.namespace,
                    drive.name,
                    context=self._copied(),
                )
            elif drive.dirty and view is not None and self._wants(view):
                self._start(uid, view)
        self._next()

    def _wake(self, uid: str, namespace: str, name: str) -> None:
        self._start(uid, None, namespace, name)

    def _at_work(self, namespace: str) -> set[str]:
        return {uid for uid, drive in self._drives.items() if drive.namespace == namespace}

    def _weight(self, namespace: str) -> int:
        quota = self.context.quotas.known(namespace)
        return 1 if quota is None else quota.spec.weight

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        return asyncio.create_task(work, name=name, context=self._copied())

    def _copied(self) -> contextvars.Context | None:
        return None if self._kopf_context is None else self._kopf_context.copy()

    def _told_to_stop(self) -> bool:
        return self._stopping or stopping.heard() is not None

    # -- replicas that died ------------------------------------------------------------------

    def start(self) -> None:
        self._monitor = asyncio.create_task(self._watch_holders(), name="holders")
        self.quota_queue.start()

    async def _watch_holders(self) -> None:
        """Every poll interval, ask whether each replica the watch shows holding runs still
        beats; the runs of one that does not are taken up here (their workers wait for their
        leases to lapse). Nothing is asked while no other replica holds a run."""
        heartbeat = self.context.heartbeat
        while not self._stopping:
            await asyncio.sleep(self.context.config.poll_interval)
            if self._deferred:  # whether the replicas they wait on still beat
                await self._ask_beating(heartbeat)
            for holder in list(self._holders):
                try:
                    alive = await heartbeat.alive(holder)
                except Exception as error:  # the store away: ask again at the next poll
                    self.log.warning("could not ask whether %s is alive: %s", holder, error)
                    break
                if alive:
                    continue
                runs = self._holders.pop(holder, {})
                self.log.info("replica %s stopped beating: taking up %d runs", holder, len(runs))
                for uid, (namespace, name) in runs.items():
                    self._held_by.pop(uid, None)
                    drive = self._drives.get(uid)
                    if drive is not None:
                        drive.dirty = True
                        continue
                    self._start(uid, None, namespace, name)

    async def _ask_beating(self, heartbeat: Heartbeat) -> None:
        """Note each other replica whose heartbeat beats: runs deferred to one of them wait
        for its claim (``_deferred_due``) even when the watch has not shown it hold a run
        lately, as on a loaded machine, where its claims show late. One store command a
        replica a poll interval, and only while runs are deferred."""
        for peer in self.context.peers.live():
            if peer == self.me:
                continue
            try:
                if await heartbeat.alive(peer):
                    self._beating[peer] = time.monotonic()
            except Exception as error:  # the store away: the watch's signs alone
                self.log.warning("could not ask whether %s is alive: %s", peer, error)
                return

    # -- stopping ----------------------------------------------------------------------------

    async def stop(self) -> None:
        """Stop taking runs; give the workers ``GRACE`` to hand their runs back, then cancel
        those still at work and give them ``CANCELLED_GRACE`` to release their leases."""
        self._stopping = True
        if self._monitor is not None:
            self._monitor.cancel()
        self.quota_queue.stop()
        for _, timer, _ in self._deferred.values():
            timer.cancel()
        self._deferred.clear()
        # Beside the workers, within their grace: a settling holds a lease too.
        settling = asyncio.create_task(self.settle_timers.stop(CANCELLED_GRACE))
        tasks = [d.task for d in self._drives.values() if d.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=GRACE)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=CANCELLED_GRACE)
        await settling
