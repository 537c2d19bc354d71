"""What one replica tells people about one run: its status, its events, its metrics, its log.

Everything a run's ending says comes from its ``Outcome``: the conditions and reason written,
the event posted, the label it is counted under. This module adds only what the outcome cannot
know: the message (which call, which request, what the model said) and the status fields that go
with it (the pending approval, the undecidable calls). The status is written through
``StatusWriter``, fenced while this replica holds the run, and typed as ``AgentRunStatus``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from agentrun._checkpointing import WriteReceipt
from agentrun._errors import CheckpointTooLargeError, IndeterminateToolCallError
from agentrun._frontier import Checkpoint
from agentrun._leases import RunLease
from agentrun._messages import Usage as TokenUsage
from agentrun._outcomes import Outcome
from agentrun.operator import _conditions as c
from agentrun.operator._context import OperatorContext
from agentrun.operator._events import CHECKPOINT_REFUSED, LEASE_TAKEN, RUN_RESUMED, notice
from agentrun.operator._resource import (
    AgentRunStatus,
    CheckpointStatus,
    IndeterminateCall,
    LeaseStatus,
    PendingApproval,
    Usage,
)
from agentrun.operator._retrying import described
from agentrun.operator._settlement_notes import planned, utcnow
from agentrun.operator._status import NOTHING, StatusWriter, Superseded
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._results import RunResult
from agentrun.runner._tracing import current_trace_id

Logger = logging.Logger | logging.LoggerAdapter[Any]


def _progress(iteration: int, usage: TokenUsage, cost_micros: int) -> AgentRunStatus:
    """How far the run got and what it used, as the status shows it."""
    return AgentRunStatus(
        iteration=iteration,
        usage=Usage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_micros=cost_micros,
        ),
    )


class RunReporter:
    """Writes one run's status, posts its events and keeps its metrics, for one replica."""

    def __init__(self, context: OperatorContext, body: Mapping[str, Any], log: Logger) -> None:
        meta = body["metadata"]
        self.context = context
        self.body = body
        self.run_id: str = meta["uid"]
        self.status = StatusWriter(
            context.api, meta["namespace"], meta["name"], context.backend.masker
        )
        self.log = log
        self.tenant: str | None = None
        self._refused_checkpoint = False

    def current(self) -> Mapping[str, Any]:
        """The run's status as the watch last delivered it (it may lag a write of ours)."""
        return self.body.get("status") or {}

    def say(self, message: str, *args: object, level: int = logging.INFO) -> None:
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

    async def show(
        self,
        outcome: Outcome,
        message: str,
        fields: AgentRunStatus = NOTHING,
        *,
        once: bool = False,
    ) -> None:
        """Write ``outcome``'s conditions with ``message`` (and ``fields``) and post its event; an
        outcome with no conditions changes nothing. ``once``: not if the run already shows it
        (a waiting run, which every replica looks at, gets one event).

        Written by the last holder, it also clears the holder from ``status.lease`` (keeping the
        fence its writes are tested against): an outcome is shown once the run stopped, and
        nobody holds a stopped run."""
        if not outcome.conditions:
            return
        updates = [c.update(each, message) for each in outcome.conditions]
        written = await self.status.write(
            self._let_go(fields), updates, unless_reason=outcome.reason if once else None
        )
        if written and outcome.event is not None:
            notice(
                self.status.masker,
                self.body,
                outcome.event.reason,
                message,
                warning=outcome.event.warning,
            )

    def _let_go(self, fields: AgentRunStatus) -> AgentRunStatus:
        """``fields`` and, if this replica was the holder, ``status.lease`` without the holder."""
        if self.status.fence is None:
            return fields
        return fields.model_copy(update={"lease": LeaseStatus(fence=self.status.fence)})

    async def ended(self, outcome: Outcome, message: str, fields: AgentRunStatus = NOTHING) -> None:
        """An attempt at the run ended with ``outcome``: count it, and show it."""
        self.context.metrics.outcomes.labels(outcome=outcome.value).inc()
        await self.show(outcome, message, fields)

    # -- what the runner tells us while it holds the run --------------------------------------

    async def took_lease(
        self,
        lease: RunLease,
        resumed: bool,
        known: Mapping[str, Any] | None,
        vet: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> None:
        """Write this holder's fence, and the tenant its lease is in, into the status before
        anything else of the run, over ``known`` (the object as last returned by the API server)
        if it still stands.

        ``LeaseTaken`` is posted whenever the status carried an earlier fence (a handover, or
        this replica taking its own run up again, after a pause or an approval), not for a run's
        first lease: there the ``Succeeded`` condition
        (``Running``, naming the holder and fence) says the same, and the event cost every run a
        request and both the API server and the replica its share of CPU at 1,000 runs. A person
        reading ``kubectl describe`` still sees every handover (``LeaseTaken``, ``RunResumed``)."""
        metrics = self.context.metrics
        metrics.lease_acquisitions.inc()
        taking = c.RESUMING if resumed else c.RUNNING
        held = f"{lease.holder} holds the run with fence {lease.fence}"
        previous = await self.status.take_over(
            lease.holder,
            lease.fence,
            resumed=resumed,
            # The attempt's trace, or none (a trace id from an earlier attempt names nothing
            # this holder does).
            fields=AgentRunStatus(
                pending_approval=None, indeterminate_calls=[], trace_id=current_trace_id()
            ),
            conditions=(
                c.update(taking, held),
                c.update(c.NOT_WAITING, "no approval is pending"),
                c.update(c.DECIDED, "no call is undecidable"),
            ),
            tenant=lease.tenant,
            known=known,
            vet=vet,
        )
        self.say("took the lease (%s)", taking.reason.lower())
        if previous is not None or resumed:
            notice(self.status.masker, self.body, LEASE_TAKEN, held)
        if resumed:
            metrics.resumes.inc()
            notice(
                self.status.masker,
                self.body,
                RUN_RESUMED,
                f"{lease.holder} carries the run on from its checkpoint (fence {lease.fence})",
            )

    async def at_boundary(
        self, checkpoint: Checkpoint, receipt: WriteReceipt | None, error: Exception | None
    ) -> None:
        """Progress, and whether the frontier was written; a status write that fails does not
        stop the run (unless it says the run is another replica's now). A boundary the policy
        does not write still reports the run's progress: the status must not lag the run
        because its checkpoints are sparse. Progress may wait a moment to go out with the next
        write (``StatusWriter.write_soon``); a first checkpoint, or a refused one, does not."""
        progress = _progress(checkpoint.iteration, checkpoint.usage, checkpoint.cost_micros)
        updates: tuple[c.ConditionUpdate, ...] = ()
        if receipt is not None:
            progress, written = self._written(progress, receipt)
            updates = (written,)
        elif error is not None:
            progress, refused = self._refused(progress, error)
            updates = (refused,)
        try:
            await self.status.write_soon(progress, updates)
        except Superseded:
            raise
        except Exception as failure:  # the run matters more than its status line
            self.say("could not write status: %s", failure, level=logging.WARNING)

    def _written(
        self, progress: AgentRunStatus, receipt: WriteReceipt
    ) -> tuple[AgentRunStatus, c.ConditionUpdate]:
        metrics = self.context.metrics
        metrics.checkpoint_bytes.observe(receipt.size)
        metrics.checkpoint_seconds.observe(receipt.seconds)
        self._refused_checkpoint = False
        written = CheckpointStatus(
            boundary=receipt.boundary.value,
            iteration=receipt.iteration,
            bytes=receipt.size,
            written_at=receipt.written_at,
        )
        return progress.model_copy(update={"checkpoint": written}), c.update(
            c.WRITTEN,
            f"{receipt.boundary.value} at iteration {receipt.iteration}, {receipt.size} bytes",
        )

    def _refused(
        self, progress: AgentRunStatus, error: Exception
    ) -> tuple[AgentRunStatus, c.ConditionUpdate]:
        why = c.TOO_LARGE if isinstance(error, CheckpointTooLargeError) else c.STORE_UNAVAILABLE
        self.context.metrics.checkpoint_refusals.labels(reason=why.reason).inc()
        if not self._refused_checkpoint:
            notice(self.status.masker, self.body, CHECKPOINT_REFUSED, str(error), warning=True)
        self._refused_checkpoint = True
        previous = CheckpointStatus.model_validate(self.current().get("checkpoint") or {})
        refused = previous.model_copy(update={"last_error": str(error)[:4096]})
        return progress.model_copy(update={"checkpoint": refused}), c.update(
            why, f"the run goes on, but a resume would start from an older frontier: {error}"
        )

    async def finished(self, result: RunResult, *, suspended: bool) -> None:
        """How the run stopped, written while this replica still holds the lease, so no other
        replica sees a finished run as one to take up."""
        outcome = result.outcome
        if outcome is Outcome.INTERRUPTED and suspended:
            outcome = Outcome.SUSPENDED
        progress = _progress(result.iteration, result.usage, result.cost_micros)
        if outcome is Outcome.AWAITING_APPROVAL and result.approval is not None:
            approval = result.approval
            pending = PendingApproval(
                request_id=approval.request_id, call_id=approval.call_id, tool=approval.tool
            )
            await self.ended(
                outcome,
                f"{approval.tool} (call {approval.call_id}) waits on approval "
                f"{approval.request_id}; add it to spec.approvals",
                progress.model_copy(update={"pending_approval": pending}),
            )
            return
        if outcome is Outcome.COMPLETED:
            message = result.output or "the run finished"
        elif outcome is Outcome.DENIED:
            message = f"a person denied {', '.join(result.denied)}: {result.output}"
        else:
            message = outcome.meaning
        await self.ended(outcome, message, progress)
        if outcome is Outcome.INTERRUPTED:  # told to stop: no verdict, but nobody holds it now
            await self.status.write(self._let_go(progress))
        if outcome.reason is not None:
            self.say("finished: %s", outcome.value)

    async def fault(self, error: Exception) -> None:
        """The replica stopped working on the run on ``error``, which trying again cannot mend
        (``retrying``): logged with its traceback, and shown on the run (condition and event),
        which is where a person looks; unless the status write fails too, and then the log is
        all there is."""
        self.log.error(
            "run=%s stopped on an error trying again cannot mend: %r",
            self.run_id,
            error,
            exc_info=error,
        )
        try:
            await self.ended(Outcome.OPERATOR_FAULT, described(error))
        except Exception as failure:
            self.say("could not show the fault: %s", failure, level=logging.ERROR)

    async def indeterminate(
        self, error: IndeterminateToolCallError, agent: AgentDefinition | None
    ) -> None:
        """The calls nobody can decide, named in the status for the person who must answer;
        with ``agent`` (None: the operator settles nothing), each call whose tool declares a
        way to settle it is noted for the operator to ask its service (``settlement_notes``)."""
        now = utcnow()
        calls = [
            planned(agent, call_id, tool, now)
            if agent is not None
            else IndeterminateCall(call_id=call_id, tool=tool)
            for call_id, tool in error.calls
        ]
        named = ", ".join(f"{tool} (call {call_id})" for call_id, tool in error.calls)
        message = (
            f"nobody can say whether {named} happened; check the tool's own records, "
            "then add to spec.resolutions: outcome ran (with result) or didNotRun"
        )
        asked = [call for call in calls if call.settlement is not None]
        if asked:
            first = min(call.settlement.due_at for call in asked if call.settlement is not None)
            message += (
                f". The operator asks the service of {', '.join(c.tool for c in asked)} itself "
                f"from {first.isoformat(timespec='seconds')} unless a person answers first"
            )
        self.context.metrics.indeterminate.inc(len(error.calls))
        await self.ended(error.outcome, message, AgentRunStatus(indeterminate_calls=calls))
        self.say("refused: %s", message, level=logging.WARNING)
