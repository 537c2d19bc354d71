"""One AgentRun at work in one replica: take its lease, run it, carry on after each attempt,
until it waits again.

The scheduler (``_scheduler``) starts a worker for a run that has work to do, in one replica,
and the worker runs it while it holds the run's fenced lease, through ``AgentRunner``. It ends
when the run waits (on a person, on its Agent, on ``spec.suspend``), is over, or is held by
another replica that is alive (``_heartbeat``); a holder that died is waited for until its
lease lapses, then the run is resumed from the checkpoint with a higher fence. A replica told
to stop (SIGTERM, deletion, ``spec.suspend``) lets the run reach its next step and releases the
lease, so another takes over at once.

This module is that loop and what it does after an attempt, decided by the attempt's
``Outcome``; the spec becomes policies in ``_policies``, people's answers reach the store through
``_answers``, and everything people see is written by the ``_reporter``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from agentrun._errors import AgentRunError, IndeterminateToolCallError, NothingCheckpointedError
from agentrun._frontier import Checkpoint
from agentrun._leases import RunLease
from agentrun._outcomes import SUCCEEDED, Outcome
from agentrun.operator import _conditions as c
from agentrun.operator._admission import QUOTA_REASONS, Place, Queued, take_place
from agentrun.operator._agent_resolver import ResolvedAgent
from agentrun.operator._answers import record_approvals, record_resolutions, waiting_on_people
from agentrun.operator._claims import claim
from agentrun.operator._context import OperatorContext
from agentrun.operator._decision_authentication import Kind
from agentrun.operator._events import CLAIMED_ELSEWHERE, notice
from agentrun.operator._finalizers import ensure_finalizer
from agentrun.operator._forget import forget_run, forget_stored
from agentrun.operator._kubeapi import Rejected
from agentrun.operator._namespace_budget import NamespaceBudget
from agentrun.operator._news import News
from agentrun.operator._policies import checkpoint_policy, lease_policy
from agentrun.operator._reporter import Logger, RunReporter
from agentrun.operator._resource import AgentRunSpec
from agentrun.operator._retrying import Backoff, recoverable
from agentrun.operator._status import PinnedElsewhere
from agentrun.operator._tenancy import tenant_of
from agentrun.operator._witness import is_parked, refuse_fresh_start_if_lost, refuse_if_lost
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._loop import AgentRunner
from agentrun.runner._registry import RegisteredAgent
from agentrun.runner._results import RunResult
from agentrun.runner._tracing import attempt_span, tracer

RETRY_BACKOFF = 2.0
"""Seconds before trying again after the first failure that a retry can help (a store briefly
away); each failure in a row doubles it, up to ``_retrying.BACKOFF_CAP``."""


class Faulted(Exception):
    """The worker stopped on an error that trying again cannot mend, shown on the run already;
    the scheduler must not start it again (``_scheduler``)."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"the worker of run {run_id} stopped on an error it cannot mend")


LAPSE_SLACK = 0.2
"""Seconds before its expiry within which a lease gone is taken as lapsed, not let go (the
store's clock and this process's differ by a round trip)."""


class RunWorker:
    """The daemon of one AgentRun in one replica: runs it while it holds the run's lease."""

    def __init__(
        self,
        context: OperatorContext,
        body: Mapping[str, Any],
        stopping: Callable[[], bool],
        logger: Logger,
        news: News | None = None,
    ) -> None:
        meta = body["metadata"]
        self.context = context
        self.body = body
        self.stopping = stopping
        self.news = news or News()
        self.namespace: str = meta["namespace"]
        self.name: str = meta["name"]
        self.run_id: str = meta["uid"]
        self.report = RunReporter(context, body, logger)
        self.tenant = ""
        self.backoff = Backoff(RETRY_BACKOFF)
        """How long to wait after a failure a retry can help, growing while they come in a row
        and reset by a success: one for every kind, since they mostly share a cause (a store
        away fails the lease check, the attempt and the forgetting alike)."""
        self._decisions_asked_at: object = None
        """The run's generation when this worker last asked whether its decisions may be acted
        on (``_decisions_unauthenticated``)."""
        self.queued_ahead: Callable[[str], int] = lambda _: 0
        """How many runs of a namespace wait on its quota (the scheduler's ``QuotaQueue``)."""
        self._on_quota = False
        """The last attempt left the run waiting on its namespace's quota."""
        """How many runs of a namespace wait on its quota (the scheduler's ``QuotaQueue``)."""
        self._returned: Mapping[str, Any] | None = None
        """The run as the API server last returned it to this worker, until an attempt uses it:
        fresher than the watch's view, so the attempt need not read it again."""

    def saw(self, body: Mapping[str, Any]) -> None:
        """The watch's latest view of the run."""
        self.body = self.report.body = body

    def _spec(self) -> AgentRunSpec:
        return AgentRunSpec.model_validate(dict(self.body["spec"]))

    async def _pause(self) -> None:
        self._returned = None  # stale by the end of the pause
        await asyncio.sleep(self.context.config.poll_interval)

    # -- the daemon ---------------------------------------------------------------------------

    def _deleted(self) -> bool:
        return bool(self.body["metadata"].get("deletionTimestamp"))

    def _over(self) -> bool:
        """Told to stop, the run waiting on its quota, gone, or finished as the watch shows it or
        as this replica's last status write left it (the watch may not show that write yet)."""
        return (
            self.stopping()
            or self._on_quota
            or self.news.gone
            or any(
                c.is_terminal(status.get("conditions") or []) or is_parked(status)
                for status in (self.report.current(), self.report.status.shown())
            )
        )

    def _waiting_on_people(self, spec: AgentRunSpec) -> bool:
        return any(
            waiting_on_people(spec, status)
            for status in (self.report.current(), self.report.status.shown())
        )

    async def work(self) -> None:
        """Run the run while this replica may; if it stopped because the run is being deleted,
        forget it now, under its lease, rather than leave that to the next watch event.

        A store or the API server away ends a turn of it, not the worker: it starts again after
        a wait that grows with each failure in a row (``retrying``). Any other error is shown on
        the run (``RunReporter.fault``) and raised as ``Faulted``: the worker stops for good."""
        while True:
            try:
                await self._work()
                if self._deleted() and not self.news.gone:
                    await forget_run(self.context, self.body)
                return
            except Exception as error:
                if not recoverable(error):
                    await self.report.fault(error)
                    raise Faulted(self.run_id) from error
                wait = self.backoff.next()
                self.report.say("will try again in %.1fs: %s", wait, error, level=logging.WARNING)
            await self._wait(wait)
            if self._over():  # told to stop meanwhile, or the run went on without us
                return

    async def _wait(self, seconds: float) -> None:
        """``seconds``, or until the run is over or the replica told to stop (the watch's
        news, at least every poll interval): a stopping replica does not wait out a backoff."""
        deadline = time.monotonic() + seconds
        while not self._over() and (left := deadline - time.monotonic()) > 0:
            await self.news.next(min(left, self.context.config.poll_interval))

    async def _seen_again(self, run: Mapping[str, Any], attempt: int) -> Mapping[str, Any] | None:
        """The run after a patch computed from ``run`` was rejected. The first time, the watch's
        view of it, once it differs from ``run`` (the change that made the patch fail is on its
        way: at most a poll interval is waited for it); else, or if that too was rejected, the
        object as read."""
        return await self._seen_within(run, attempt, self.context.config.poll_interval)

    async def _claim_seen_again(
        self, run: Mapping[str, Any], attempt: int
    ) -> Mapping[str, Any] | None:
        """``_seen_again`` after a rejected claim, waiting for the watch up to a lease TTL: a
        claim is refused because another landed first, and the run is then the claimer's to
        start, so nothing is late for the wait. A
        busy replica's watch brings that claim more than a poll interval later, and the read
        that followed cost a ``GET`` for nearly every run (0.8 a run at 1,000 runs)."""
        return await self._seen_within(run, attempt, self.context.config.lease_ttl)

    async def _seen_within(
        self, run: Mapping[str, Any], attempt: int, patience: float
    ) -> Mapping[str, Any] | None:
        seen = run["metadata"].get("resourceVersion")
        if attempt == 0:
            deadline = time.monotonic() + patience
            while (
                self.body["metadata"].get("resourceVersion") == seen
                and not self.news.gone
                and time.monotonic() < deadline
            ):
                await self.news.next(deadline - time.monotonic())
            if self.news.gone:
                return None
            if self.body["metadata"].get("resourceVersion") != seen:
                return self.body
        return await self.context.api.get(self.namespace, self.name)

    async def _work(self) -> None:
        controller = self.context.config.controller_name
        claimed = await claim(self.context.api, self.body, controller, self._claim_seen_again)
        if claimed.owner != controller:
            if claimed.owner is not None:
                notice(
                    self.context.backend.masker,
                    self.body,
                    CLAIMED_ELSEWHERE,
                    f"operator install {claimed.owner} runs this AgentRun; {controller} leaves "
                    "it alone",
                )
            return
        self._returned = claimed.run if claimed.written else None
        if self._over():
            return
        # Pinned by the first lease's holder; else decided now, as this replica would pin it.
        tenant = await tenant_of(self.context.api, self._returned or self.body)
        if tenant is None:
            await self.report.ended(
                Outcome.TENANT_NOT_ALLOWED,
                f"namespace {self.namespace} does not grant tenant {self._spec().tenant!r}; "
                "drop spec.tenant or label the namespace agentrun.dev/tenant",
            )
            return
        self.tenant = self.report.tenant = tenant
        # Until the run waits (on a person, its Agent, its spec), another replica holds it, or
        # it is over: the scheduler wakes it again when the watch shows that change.
        while not self._over():
            spec = self._spec()
            if self._waiting_on_people(spec):
                return
            held = await self.context.backend.leases.held(self.tenant, self.run_id)
            if held is not None:
                mine = held.holder == self.context.config.worker_id  # a release that failed
                if (
                    not mine
                    and not self._letting_go(held)
                    and await self.context.heartbeat.alive(held.holder)
                ):
                    return  # the holder's to run and to report on
                await self._wait_for_lease()  # a holder that died, or lets go: it lapses or goes
                continue
            try:  # an Agent resource of that name, else one in the image (agent_resolver)
                resolved = await self.context.resolver.resolve(self.namespace, spec.agent)
            except AgentRunError as unusable:  # none, not ready yet, a secret it lists missing
                await self._idle(unusable.outcome, str(unusable))
                return
            if spec.suspend:
                await self._idle(Outcome.SUSPENDED, Outcome.SUSPENDED.meaning)
                return
            unauthenticated = await self._decisions_unauthenticated(spec)
            if unauthenticated is not None:
                await self._idle(Outcome.DECISIONS_UNAUTHENTICATED, unauthenticated)
                return
            # The watch may lag the last holder's final status write, or the deletion, by a
            # moment; the object as the API server just returned it does not, so a finished
            # run is never taken up again, nor one being deleted (which another replica may
            # already have forgotten).
            returned = self._returned or await self.context.api.get(self.namespace, self.name)
            self._returned = None
            try:
                fresh = returned and await ensure_finalizer(
                    self.context.api, returned, self._seen_again
                )
            except Rejected:  # the object kept changing under the patch: next turn
                await self._pause()
                continue
            if (
                fresh is None
                or fresh["metadata"].get("deletionTimestamp")
                or c.is_terminal((fresh.get("status") or {}).get("conditions") or [])
            ):
                return
            # Nor one that this replica has just parked on a person, before the watch shows it.
            if waiting_on_people(spec, fresh.get("status") or {}):
                return
            await self._attempt(spec, resolved, fresh)

    async def _decisions_unauthenticated(self, spec: AgentRunSpec) -> str | None:
        """Why the approvals and resolutions ``spec`` holds may not be acted on (the API server
        does not authenticate them: ``decision_authentication``), or None. Asked again only
        once the spec changed since (its generation): a run held on this costs no request while
        it waits."""
        kinds: list[Kind] = []
        if spec.approvals:
            kinds.append("approvals")
        if spec.resolutions:
            kinds.append("resolutions")
        generation = self.body["metadata"].get("generation")
        ask, self._decisions_asked_at = generation != self._decisions_asked_at, generation
        return await self.context.decisions.unauthenticated(self.body, kinds, ask=ask)

    async def _idle(self, outcome: Outcome, message: str) -> None:
        """Say why the run is not going on — unless a holder is still finishing its step: then
        it is the holder's to say, once it has stopped and handed the lease back."""
        succeeded = c.find(self.report.current().get("conditions") or [], SUCCEEDED) or {}
        if succeeded.get("reason") != outcome.reason and (
            await self.context.backend.leases.held(self.tenant, self.run_id) is None
        ):
            await self.report.show(outcome, message, once=True)

    # -- one attempt at the lease ---------------------------------------------------------------

    def _runner(
        self,
        spec: AgentRunSpec,
        registered: RegisteredAgent,
        took_lease: Callable[[RunLease, bool], Awaitable[None]],
        gate: NamespaceBudget | None,
    ) -> AgentRunner:
        config = self.context.config

        async def finished(result: RunResult) -> None:
            await self.report.finished(result, suspended=bool(self.body["spec"].get("suspend")))

        return AgentRunner.on_backend(
            self.context.backend,
            registered,
            checkpoint_policy=checkpoint_policy(spec, config),
            lease_policy=lease_policy(spec, config),
            holder=config.worker_id,
            on_boundary=self.report.at_boundary,
            on_lease=took_lease,
            on_result=finished,
            spend_gate=gate,
        )

    async def _attempt(
        self, spec: AgentRunSpec, resolved: ResolvedAgent, fresh: Mapping[str, Any]
    ) -> None:
        # The namespace's quota as the watch shows it: its places are taken in the store.
        quota = await self.context.quotas.get(self.namespace)
        shared = quota.spec.budget if quota is not None else None
        gate = (
            NamespaceBudget(self.context.backend.quotas, self.namespace, quota, shared, self.run_id)
            if quota is not None and shared is not None
            else None
        )
        places: list[Place] = []

        async def took_lease(lease: RunLease, resumed: bool) -> None:
            # Its place among the namespace's active runs first (``_admission``): a run with
            # none gives the lease back having written nothing, and waits as Queued.
            place = await take_place(
                self.context.backend.quotas, self.namespace, quota, lease, starting=not resumed
            )
            if place is not None:
                places.append(place)
            vet = None
            if not resumed:  # about to start from the input: unless the store lost the run
                started = await refuse_fresh_start_if_lost(
                    self.context, lease, fresh.get("status") or {}
                )

                def vet(run: Mapping[str, Any]) -> None:
                    status = run.get("status") or {}
                    refuse_if_lost(lease.tenant, lease.run_id, status, started_in_store=started)

            try:
                await self.report.took_lease(lease, resumed, fresh, vet)
            except PinnedElsewhere:  # nothing of the run is the lease's tenant's: take it back
                await forget_stored(self.context, lease.tenant, lease.run_id)
                raise

        # What this attempt writes is masked of its agent's secrets too, as the runner's
        # checkpoints are (``AgentRunner.on_backend``): the model may echo one in its answer.
        self.report.status.masker = self.context.backend.masker.with_secrets(
            resolved.registered.secrets
        )
        runner = self._runner(spec, resolved.registered, took_lease, gate)
        agent = resolved.registered.definition
        budget = spec.budget.max_cost_micros if spec.budget else resolved.budget_micros
        backend = self.context.backend
        self.report.status.release()
        await record_approvals(backend.idempotency, self.tenant, self.run_id, spec)

        def stop() -> bool:
            return (
                self.stopping()
                or self.news.gone
                or self._deleted()
                or bool(self.body["spec"].get("suspend"))
            )

        try:
            with attempt_span(
                tracer(), name=f"{self.namespace}/{self.name}",
                run_id=self.run_id, tenant=self.tenant,
            ):  # fmt: skip
                await self._resume_or_start(runner, spec, agent, budget, stop)
        except AgentRunError as error:
            await self._after(error, agent)
        else:
            self.backoff.reset()
        finally:
            for place in places:  # the attempt is over: the run holds no lease any more
                await place.give_back()

    async def _resume_or_start(
        self,
        runner: AgentRunner,
        spec: AgentRunSpec,
        agent: AgentDefinition,
        budget: int | None,
        stop: Callable[[], bool],
    ) -> None:
        """Carry the run on from its frontier, or start it from its input if it has none."""
        try:
            await runner.resume(
                agent,
                self.run_id,
                tenant=self.tenant,
                stop=stop,
                budget_micros=budget,
                # Only when there are answers to record: without the hook the frontier,
                # transcript and records are one read (``read_and_plan``). Those of ``spec``,
                # the answers whose authentication was checked: one appended after ``spec``
                # was read is seen by the next attempt (``_waiting_on_people``), which checks
                # it first (``_decisions_unauthenticated``).
                before_planning=(
                    functools.partial(self._record_resolutions, spec) if spec.resolutions else None
                ),
            )
        except NothingCheckpointedError:
            await runner.run(
                agent,
                spec.input or "",
                tenant=self.tenant,
                run_id=self.run_id,
                budget_micros=budget,
                stop=stop,
            )

    async def _after(self, error: AgentRunError, agent: AgentDefinition) -> None:
        """Carry on after an attempt of ``agent`` that ``error`` ended, as its outcome says."""
        outcome = error.outcome
        if isinstance(error, IndeterminateToolCallError):
            settling = self.context.config.settling
            await self.report.indeterminate(error, agent if settling else None)
            return
        if outcome in QUOTA_REASONS:  # it waits on its quota: the scheduler lets it go
            self._on_quota = True
        if isinstance(error, Queued):  # said once, and not over a holder that took it since
            place = self.queued_ahead(self.namespace) + 1
            await self._idle(outcome, f"{error}; it is number {place} in the queue")
            return
        await self.report.ended(outcome, str(error))
        if outcome is Outcome.HELD_ELSEWHERE:
            # Another replica took the lease first (no fence of ours), or took it from us: the
            # loop finds it held and leaves the run to it.
            if self.report.status.fence is not None:
                self.context.metrics.lease_losses.inc()
                self.report.say("lost the lease: %s", error, level=logging.WARNING)
        elif outcome is Outcome.SUPERSEDED:
            # A newer holder owns the run; the store (StaleFenceError) or the API server
            # (Superseded) said so. Ask again after a pause, not at once.
            self.report.say("superseded: %s", error, level=logging.WARNING)
            await self._pause()
        elif outcome.retryable:
            wait = self.backoff.next()
            self.report.say("will retry in %.1fs: %s", wait, error, level=logging.WARNING)
            await self._wait(wait)
        elif not outcome.conditions:  # nothing said it: a failure nobody planned for
            raise error

    def _letting_go(self, held: RunLease) -> bool:
        """Whether ``held``'s holder has written its last status (its fence, no holder named)
        and is about to let the lease go: a holder clears itself from the status first. Left to
        it, the run would be nobody's: the watch shows it held by nobody, so no replica waits
        for its holder to stop beating, and its release brings no event."""
        holder, fence = self._lease_shown()
        return holder is None and fence == held.fence

    def _lease_shown(self) -> tuple[object, object]:
        """The holder and fence the watch shows in the run's status."""
        lease = self.report.current().get("lease") or {}
        return lease.get("holder"), lease.get("fence")

    async def _wait_for_lease(self) -> None:
        """Another replica holds the run: wait until the store says its lease is gone, asking
        again when the watch shows the run's lease change (a holder that stops clears itself
        from the status before it lets go; a new holder writes its fence), when the lease would
        lapse, and while neither happens after a poll interval, then twice as long each time
        (the net for a holder that let go while its last status write failed: found as late as
        a dead holder's lapse at worst); not at all once the watch shows the run over. The
        holder's other status writes (its progress) say nothing of its lease, so they do not
        send this replica to the store: at 1,000 runs, asking at each of them and every poll
        interval was a twentieth of the waiting replica's CPU.

        A holder writes its last status (which names no holder) before it lets the lease go, so
        a lease let go before it would have lapsed, while the watch still names a holder, means
        that write is on its way: it is waited for, a poll interval at most, rather than the run
        being taken up again from a read. A lease that lapsed (its holder died) is taken up at
        once."""
        self._returned = None  # stale once another replica held the run
        lapses: float | None = None
        write_due: float | None = None
        patience, asked_over = self.context.config.poll_interval, None
        while not self._over():
            try:
                held = await self.context.backend.leases.held(self.tenant, self.run_id)
            except AgentRunError as error:
                if not error.retryable:
                    raise
                wait = self.backoff.next()
                self.report.say("will ask again in %.1fs: %s", wait, error, level=logging.WARNING)
                await self._wait(wait)
                continue
            self.backoff.reset()
            poll = self.context.config.poll_interval
            now = time.monotonic()
            if held is not None:
                lapses = now + held.remaining
                shown = self._lease_shown()
                patience = patience * 2 if shown == asked_over else poll
                asked_over, ask_at = shown, now + min(held.remaining, patience)
                while (
                    not self._over() and self._lease_shown() == shown and time.monotonic() < ask_at
                ):
                    await self.news.next(ask_at - time.monotonic())
                continue
            let_go = lapses is not None and now < lapses - LAPSE_SLACK
            write_due = write_due or now + poll
            named = (self.report.current().get("lease") or {}).get("holder")
            if not let_go or not named or now >= write_due:
                return
            await self.news.next(write_due - now)

    async def _record_resolutions(self, spec: AgentRunSpec, checkpoint: Checkpoint) -> None:
        backend = self.context.backend
        recorded = await record_resolutions(backend.idempotency, backend.history, checkpoint, spec)
        for answer in recorded:
            self.report.say(
                "recorded %s's answer for call %s: %s", answer.by, answer.call_id, answer.outcome
            )
