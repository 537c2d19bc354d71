"""One AgentRun, as seen by one replica: wait for its lease, run it, tell people about it.

Every replica keeps a worker per AgentRun (a kopf daemon), and the replicas are the worker pool:
only the one holding the run's fenced lease executes it, through ``AgentRunner``; the others
wait for the lease to lapse, asking the store when, and never touch the run meanwhile. A
replica lost with its pod stops renewing, and after the TTL another takes the lease with a
higher fence and resumes from the checkpoint. A replica told to stop (SIGTERM, deletion,
``spec.suspend``) lets the run reach its next step and releases the lease, so another takes over
at once.

People are in the loop through the spec: ``spec.approvals`` answer an approval the run waits on,
``spec.resolutions`` answer for calls nobody else can decide. Resolutions are recorded only under
the lease, just before the resume plans — never while another replica might be dispatching.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from agentrun.checkpointing import CheckpointPolicy, WriteReceipt
from agentrun.errors import (
    AgentRunError,
    CheckpointFormatError,
    CheckpointTooLargeError,
    HistoryUnavailableError,
    IndeterminateToolCallError,
    NothingCheckpointedError,
    RevisionMismatchError,
    RunLeaseError,
    StaleFenceError,
)
from agentrun.frontier import Boundary, Checkpoint
from agentrun.leases import LeasePolicy, RunLease
from agentrun.operator import conditions as c
from agentrun.operator.context import OperatorContext
from agentrun.operator.events import notice
from agentrun.operator.finalizers import ensure_finalizer
from agentrun.operator.kubeapi import Rejected
from agentrun.operator.resource import AgentRunSpec
from agentrun.operator.status import ConditionUpdate, StatusWriter, Superseded
from agentrun.operator.tenancy import tenant_for
from agentrun.runner.decisions import answerable, decide, resolve
from agentrun.runner.loop import AgentRunner
from agentrun.runner.registry import RegisteredAgent
from agentrun.runner.results import RunResult, RunStatus

Body = Mapping[str, Any]
RETRY_BACKOFF = 2.0

ENDINGS: dict[RunStatus, tuple[str, str]] = {
    RunStatus.BUDGET_EXCEEDED: ("BudgetExceeded", "the run reached its budget"),
    RunStatus.MAX_ITERATIONS: ("Failed", "the run reached its agent's iteration limit"),
    RunStatus.DEADLINE_EXCEEDED: ("Failed", "the run ran out of time"),
}
REFUSALS: dict[type[AgentRunError], str] = {
    RevisionMismatchError: "RevisionMismatch",
    CheckpointFormatError: "FormatUnsupported",
    HistoryUnavailableError: "HistoryUnavailable",
    # The frontier naming a call that is not safe to repeat is over the cap: the run cannot go
    # on without risking that call twice, and the same frontier will be as large next time.
    CheckpointTooLargeError: "CheckpointTooLarge",
}
"""Errors that end a run: carrying it on again would meet the same refusal."""


class RunWorker:
    def __init__(
        self,
        context: OperatorContext,
        body: Body,
        stopping: Callable[[], bool],
        logger: logging.Logger | logging.LoggerAdapter[Any],
    ) -> None:
        self.context = context
        self.body = body
        self.stopping = stopping
        meta = body["metadata"]
        self.namespace: str = meta["namespace"]
        self.name: str = meta["name"]
        self.run_id: str = meta["uid"]
        self.status = StatusWriter(context.api, self.namespace, self.name, context.backend.masker)
        self.log = logger
        self.tenant: str | None = None
        self._refused_checkpoint = False

    # -- helpers ------------------------------------------------------------------------------

    def _spec(self) -> AgentRunSpec:
        return AgentRunSpec.model_validate(dict(self.body["spec"]))

    def _current(self) -> Mapping[str, Any]:
        return self.body.get("status") or {}

    def _say(self, message: str, *args: object, level: int = logging.INFO) -> None:
        fence = self.status.fence if self.status.fence is not None else "-"
        self.log.log(
            level,
            "run=%s tenant=%s holder=%s fence=%s " + message,
            self.run_id,
            self.tenant or "-",
            self.context.config.worker_id,
            fence,
            *args,
        )

    async def _write(
        self,
        fields: dict[str, Any] | None = None,
        updates: tuple[ConditionUpdate, ...] = (),
        reason: str | None = None,
    ) -> None:
        await self.status.write(fields, updates)
        if reason is not None:
            self.context.metrics.run_is(self.run_id, reason)

    async def _pause(self) -> None:
        await asyncio.sleep(self.context.config.poll_interval)

    # -- the daemon ---------------------------------------------------------------------------

    async def work(self) -> None:
        if not self._current().get("conditions"):
            with contextlib.suppress(Rejected):  # kept changing: another replica wrote them
                await self._write(reason="Pending")
        spec = self._spec()
        labels = await self.context.api.namespace_labels(self.namespace)
        self.tenant = tenant_for(self.namespace, labels, spec.tenant)
        if self.tenant is None:
            message = (
                f"namespace {self.namespace} does not grant tenant {spec.tenant!r}; "
                "drop spec.tenant or label the namespace agentrun.dev/tenant"
            )
            await self._write(
                updates=((c.SUCCEEDED, "False", "TenantNotAllowed", message),),
                reason="TenantNotAllowed",
            )
            notice(self.body, "TenantNotAllowed", message, warning=True)
            return
        while not self.stopping():
            if c.is_terminal(self._current().get("conditions") or []):
                return
            spec = self._spec()
            registered = self.context.agents.get(spec.agent)
            if registered is None:
                await self._idle(
                    "AgentNotRegistered",
                    f"no agent {spec.agent!r} is registered in this operator's "
                    f"image (known: {', '.join(sorted(self.context.agents))})",
                )
                continue
            if spec.suspend:
                await self._idle("Suspended", "spec.suspend is true; the run is paused")
                continue
            if self._waiting_on_people(spec, self._current()):
                await self._pause()
                continue
            try:
                fresh = await ensure_finalizer(self.context.api, self.namespace, self.name)
            except Rejected:  # the object kept changing under the patch: next turn
                await self._pause()
                continue
            # The watch may lag the last holder's final status write, or the deletion, by a
            # moment; the object as just read does not, so a finished run is never taken up
            # again, nor one being deleted (which another replica may already have forgotten).
            if (
                fresh is None
                or fresh["metadata"].get("deletionTimestamp")
                or c.is_terminal((fresh.get("status") or {}).get("conditions") or [])
            ):
                return
            # Nor one that this replica has just parked on a person, before the watch shows it.
            if self._waiting_on_people(spec, fresh.get("status") or {}):
                await self._pause()
                continue
            await self._attempt(spec, registered)

    async def _idle(self, reason: str, message: str) -> None:
        """Say why the run is not going on — unless a holder is still finishing its step: then
        it is the holder's to say, once it has stopped and handed the lease back."""
        succeeded = c.find(self._current().get("conditions") or [], c.SUCCEEDED) or {}
        if succeeded.get("reason") != reason:
            assert self.tenant is not None
            if await self.context.backend.leases.held(self.tenant, self.run_id) is None:
                await self._write(
                    updates=((c.SUCCEEDED, "Unknown", reason, message),), reason=reason
                )
        await self._pause()

    @staticmethod
    def _waiting_on_people(spec: AgentRunSpec, status: Mapping[str, Any]) -> bool:
        pending = status.get("pendingApproval")
        if pending is not None:
            answered = {a.request_id for a in spec.approvals or ()}
            if pending["requestId"] not in answered:
                return True
        undecided = {call["callId"] for call in status.get("indeterminateCalls") or ()}
        answered = {r.call_id for r in spec.resolutions or ()}
        return bool(undecided - answered)

    # -- one attempt at the lease ---------------------------------------------------------------

    def _runner(self, spec: AgentRunSpec, registered: RegisteredAgent) -> AgentRunner:
        config = self.context.config
        checkpoint_policy = CheckpointPolicy(
            boundaries=frozenset(Boundary(b) for b in spec.checkpoint_policy.boundaries)
            if spec.checkpoint_policy and spec.checkpoint_policy.boundaries
            else frozenset(Boundary),
            max_bytes=(
                spec.checkpoint_policy.max_bytes
                if spec.checkpoint_policy and spec.checkpoint_policy.max_bytes
                else CheckpointPolicy().max_bytes
            ),
        )
        ttl = (
            float(spec.lease_policy.ttl_seconds)
            if spec.lease_policy and spec.lease_policy.ttl_seconds
            else config.lease_ttl
        )
        renew = (
            float(spec.lease_policy.renew_within_seconds)
            if spec.lease_policy and spec.lease_policy.renew_within_seconds
            else min(config.lease_renew_within, ttl / 3)
        )
        return AgentRunner.on_backend(
            self.context.backend,
            registered,
            checkpoint_policy=checkpoint_policy,
            lease_policy=LeasePolicy(ttl=ttl, renew_within=renew),
            holder=config.worker_id,
            on_boundary=self._on_boundary,
            on_lease=self._on_lease,
            on_result=self._finished,
        )

    async def _attempt(self, spec: AgentRunSpec, registered: RegisteredAgent) -> None:
        assert self.tenant is not None
        runner = self._runner(spec, registered)
        agent = registered.definition
        budget = spec.budget.max_cost_micros if spec.budget else None
        self.status.release()
        for approval in spec.approvals or ():
            await decide(
                self.context.backend.idempotency,
                self.tenant,
                self.run_id,
                approval.request_id,
                approved=approval.decision == "approve",
                by=approval.by,
                reason=approval.reason or "",
            )

        def stop() -> bool:
            return self.stopping() or bool(self.body["spec"].get("suspend"))

        try:
            try:
                await runner.resume(
                    agent,
                    self.run_id,
                    tenant=self.tenant,
                    stop=stop,
                    budget_micros=budget,
                    before_planning=self._record_resolutions,
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
        except RunLeaseError as error:
            if self.status.fence is None:
                await self._wait_for_lease()
            else:
                self.context.metrics.lease_losses.inc()
                self._say("lost the lease: %s", error, level=logging.WARNING)
            return
        except (Superseded, StaleFenceError) as error:
            # A newer holder owns the run; the store (StaleFenceError) or the API server
            # (Superseded) said so. Ask again after a pause, not at once.
            self._say("superseded: %s", error, level=logging.WARNING)
            await self._pause()
            return
        except IndeterminateToolCallError as error:
            await self._indeterminate(error)
            return
        except tuple(REFUSALS) as error:
            reason = REFUSALS[type(error)]
            await self._write(updates=((c.SUCCEEDED, "False", reason, str(error)),), reason=reason)
            notice(self.body, reason, str(error), warning=True)
            return
        except AgentRunError as error:
            if not error.retryable:
                raise
            self._say("will retry: %s", error, level=logging.WARNING)
            await asyncio.sleep(RETRY_BACKOFF)

    async def _wait_for_lease(self) -> None:
        """Another replica holds the run: wait until the store says its lease is gone."""
        assert self.tenant is not None
        while not self.stopping():
            try:
                held = await self.context.backend.leases.held(self.tenant, self.run_id)
            except AgentRunError as error:
                if not error.retryable:
                    raise
                self._say("will ask again: %s", error, level=logging.WARNING)
                await asyncio.sleep(RETRY_BACKOFF)
                continue
            if held is None:
                return
            await asyncio.sleep(min(held.remaining, self.context.config.poll_interval))

    async def _record_resolutions(self, checkpoint: Checkpoint) -> None:
        """Under the lease: a person's answer for each call that is still undecidable."""
        answers = {r.call_id: r for r in self._spec().resolutions or ()}
        idempotency, history = self.context.backend.idempotency, self.context.backend.history
        for call_id in await answerable(idempotency, checkpoint, history) if answers else ():
            answer = answers.get(call_id)
            if answer is not None and await resolve(
                idempotency,
                checkpoint,
                call_id,
                ran=answer.outcome == "ran",
                result=answer.result,
                by=answer.by,
                history=history,
            ):
                self._say(
                    "recorded %s's answer for call %s: %s", answer.by, call_id, answer.outcome
                )

    # -- callbacks from the runner --------------------------------------------------------------

    async def _on_lease(self, lease: RunLease, resumed: bool) -> None:
        self.context.metrics.lease_acquisitions.inc()
        reason = "Resuming" if resumed else "Running"
        await self.status.take_over(
            lease.holder,
            lease.fence,
            resumed=resumed,
            fields={"pendingApproval": None, "indeterminateCalls": []},
            conditions=(
                (
                    c.SUCCEEDED,
                    "Unknown",
                    reason,
                    f"{lease.holder} holds the run with fence {lease.fence}",
                ),
                (c.AWAITING_APPROVAL, "False", "NotWaiting", "no approval is pending"),
                (c.INDETERMINATE, "False", "Decided", "no call is undecidable"),
            ),
        )
        self.context.metrics.run_is(self.run_id, reason)
        self._say("took the lease (%s)", reason.lower())
        notice(self.body, "LeaseTaken", f"{lease.holder} holds the run with fence {lease.fence}")
        if resumed:
            self.context.metrics.resumes.inc()
            notice(
                self.body,
                "RunResumed",
                f"{lease.holder} carries the run on from its checkpoint (fence {lease.fence})",
            )

    async def _on_boundary(
        self, checkpoint: Checkpoint, receipt: WriteReceipt | None, error: Exception | None
    ) -> None:
        metrics = self.context.metrics
        fields: dict[str, Any] = {
            "iteration": checkpoint.iteration,
            "usage": {
                "inputTokens": checkpoint.usage.input_tokens,
                "outputTokens": checkpoint.usage.output_tokens,
                "costMicros": checkpoint.cost_micros,
            },
        }
        if receipt is not None:
            metrics.checkpoint_bytes.observe(receipt.size)
            metrics.checkpoint_seconds.observe(receipt.seconds)
            fields["checkpoint"] = {
                "boundary": receipt.boundary.value,
                "iteration": receipt.iteration,
                "bytes": receipt.size,
                "writtenAt": receipt.written_at.isoformat().replace("+00:00", "Z"),
            }
            update: ConditionUpdate = (
                c.CHECKPOINTED,
                "True",
                "Written",
                f"{receipt.boundary.value} at iteration {receipt.iteration}, {receipt.size} bytes",
            )
            self._refused_checkpoint = False
        elif error is not None:
            why = "TooLarge" if isinstance(error, CheckpointTooLargeError) else "StoreUnavailable"
            metrics.checkpoint_refusals.labels(reason=why).inc()
            previous = dict(self._current().get("checkpoint") or {})
            fields["checkpoint"] = {**previous, "lastError": str(error)[:4096]}
            update = (
                c.CHECKPOINTED,
                "False",
                why,
                f"the run goes on, but a resume would start from an older frontier: {error}",
            )
            if not self._refused_checkpoint:
                notice(self.body, "CheckpointRefused", str(error), warning=True)
            self._refused_checkpoint = True
        else:
            return
        try:
            await self._write(fields, (update,))
        except Superseded:
            raise
        except Exception as failure:  # the run matters more than its status line
            self._say("could not write status: %s", failure, level=logging.WARNING)

    # -- how an attempt ended -----------------------------------------------------------------

    async def _finished(self, result: RunResult) -> None:
        """How the run stopped, written by the runner's ``on_result`` while this replica still
        holds the lease — so no other replica sees a finished run as one to take up."""
        if result.status is RunStatus.COMPLETED:
            if result.denied:
                message = f"a person denied {', '.join(result.denied)}: {result.output}"
                await self._write(
                    updates=((c.SUCCEEDED, "False", "Denied", message),), reason="Denied"
                )
            else:
                await self._write(
                    updates=(
                        (c.SUCCEEDED, "True", "Completed", result.output or "the run finished"),
                    ),
                    reason="Completed",
                )
            self._say("finished: %s", result.status.value)
        elif result.status is RunStatus.AWAITING_APPROVAL and result.approval is not None:
            approval = result.approval
            message = (
                f"{approval.tool} (call {approval.call_id}) waits on approval "
                f"{approval.request_id}; add it to spec.approvals"
            )
            await self._write(
                {
                    "pendingApproval": {
                        "requestId": approval.request_id,
                        "callId": approval.call_id,
                        "tool": approval.tool,
                    }
                },
                (
                    (c.SUCCEEDED, "Unknown", "AwaitingApproval", message),
                    (c.AWAITING_APPROVAL, "True", "ApprovalRequested", message),
                ),
                reason="AwaitingApproval",
            )
            notice(self.body, "ApprovalRequested", message)
        elif result.status in ENDINGS:
            reason, message = ENDINGS[result.status]
            await self._write(updates=((c.SUCCEEDED, "False", reason, message),), reason=reason)
        elif result.status is RunStatus.INTERRUPTED and self.body["spec"].get("suspend"):
            await self._write(
                updates=(
                    (
                        c.SUCCEEDED,
                        "Unknown",
                        "Suspended",
                        "spec.suspend is true; the run is paused",
                    ),
                ),
                reason="Suspended",
            )

    async def _indeterminate(self, error: IndeterminateToolCallError) -> None:
        calls = [{"callId": call_id, "tool": tool} for call_id, tool in error.calls]
        named = ", ".join(f"{tool} (call {call_id})" for call_id, tool in error.calls)
        message = (
            f"nobody can say whether {named} happened; check the tool's own records, "
            "then add to spec.resolutions: outcome ran (with result) or didNotRun"
        )
        self.context.metrics.indeterminate.inc(len(calls))
        await self._write(
            {"indeterminateCalls": calls},
            (
                (c.SUCCEEDED, "Unknown", "Indeterminate", message),
                (c.INDETERMINATE, "True", "UndecidableCall", message),
            ),
            reason="Indeterminate",
        )
        notice(self.body, "IndeterminateCall", message, warning=True)
        self._say("refused: %s", message, level=logging.WARNING)
