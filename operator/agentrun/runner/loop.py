"""The agent loop: ask the model, dispatch what it asks for, checkpoint at the boundaries.

Every step that could be repeated by a crash is arranged so that repeating it is harmless or
refused:

* The frontier is written only at the three unambiguous boundaries (``after_model_call`` holds
  the reply and the calls it asked for, none dispatched; ``after_tool_result`` holds every result
  of the turn; ``before_approval`` holds the held call and the request id).
* Before a call is handed to its tool, its intent is claimed in the idempotency store (under its
  key, or a dispatch marker for a keyless call); the outcome is recorded after. So the record,
  not the frontier, says what happened after the frontier was written.
* A call's id is unique within the run. Nothing obliges a provider to keep it so (a server may
  number calls per reply, or send none), and a dispatch marker derives from the id: a later call
  reusing an earlier one's id would be taken for it, skipped and reported as done. So a reply
  whose call reuses an id is given a new one before it enters the conversation and the frontier
  (``unique_call_ids``); the model sees its call under that id from then on.
* A resume takes the run's lease before it reads anything (``Resumer``), refuses calls nobody can
  decide (``IndeterminateToolCallError``), replays recorded outcomes, dispatches what never ran,
  and holds the lease with a ``Leaseholder`` for all the work after it. Before every model call
  and every dispatch the lease is checked: a worker that lost it stops on its own.
* Spend is charged to the ledger after every model call; the ledger, not the checkpoint, decides
  what the run may still spend.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from agentrun.checkpointing import Checkpointer, CheckpointPolicy, WriteReceipt
from agentrun.continuation import ContinuationPolicy, continued
from agentrun.errors import (
    BudgetExceededError,
    ConfigurationError,
    IndeterminateToolCallError,
    RevisionMismatchError,
)
from agentrun.frontier import Boundary, Checkpoint, PendingApproval, PendingCall
from agentrun.idempotency import ClaimState, IdempotencyStore, derive_key, masking, remote_key
from agentrun.leases import Leaseholder, LeasePolicy, LeaseStore, RunLease, default_holder
from agentrun.ledger import Ledger
from agentrun.messages import Message, TextPart, ToolCall, Usage
from agentrun.resume import (
    ResumePlan,
    Resumer,
    claim_resume,
    read_and_plan,
    refuse_if_undecidable,
    release_resume,
    tracking_key,
)
from agentrun.runner.agents import AgentDefinition
from agentrun.runner.decisions import approval_request_id, decision_for
from agentrun.runner.pricing import DEFAULT_PRICES, PriceTable
from agentrun.runner.providers.base import Provider
from agentrun.runner.registry import RegisteredAgent
from agentrun.runner.results import RunResult, RunStatus
from agentrun.runner.tools import Tool, ToolArgumentsError, ToolError
from agentrun.stores.backend import Backend

logger = logging.getLogger(__name__)

BoundaryObserver = Callable[[Checkpoint, WriteReceipt | None, Exception | None], Awaitable[None]]


class _Interrupted(Exception):
    """Internal: the caller asked the run to stop; it stops before its next step."""


class _Paused(Exception):
    """Internal: the run stops here to wait on a person."""

    def __init__(self, approval: PendingApproval) -> None:
        self.approval = approval


@dataclass
class _Run:
    agent: AgentDefinition
    tenant: str
    run_id: str
    holder: str
    fence: int
    lease: Leaseholder | None
    messages: list[Message]
    execution: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    usage: Usage = field(default_factory=Usage)
    cost_micros: int = 0
    iteration: int = 0
    budget_micros: int | None = None
    grant: str | None = None
    scopes: tuple[str, ...] = ()
    user: str | None = None
    denied: list[str] = field(default_factory=list)
    journal: list[str] = field(default_factory=list)
    history_bytes: int = 0
    resumed: bool = False
    stop: Callable[[], bool] | None = None
    call_ids: set[str] = field(init=False)
    """Every call id the conversation holds, which a new call may not reuse."""

    def __post_init__(self) -> None:
        self.call_ids = {call.id for message in self.messages for call in message.tool_calls}

    def ensure_held(self) -> None:
        """Before every model call and every dispatch: still ours, and still wanted?"""
        if self.stop is not None and self.stop():
            raise _Interrupted
        if self.lease is not None:
            self.lease.ensure_held()


class AgentRunner:
    def __init__(
        self,
        *,
        provider: Provider,
        idempotency: IdempotencyStore,
        checkpoints: Checkpointer,
        leases: LeaseStore | None = None,
        ledger: Ledger | None = None,
        prices: PriceTable = DEFAULT_PRICES,
        lease_policy: LeasePolicy | None = None,
        continuation: ContinuationPolicy | None = None,
        holder: str | None = None,
        on_boundary: BoundaryObserver | None = None,
        on_lease: Callable[[RunLease, bool], Awaitable[None]] | None = None,
        on_result: Callable[[RunResult], Awaitable[None]] | None = None,
    ) -> None:
        """``on_lease`` hears of each lease taken (and whether it resumes a run);
        ``on_result`` hears how the run stopped while its lease is still held, so what it
        records lands before another worker can take the run."""
        self.provider = provider
        self.checkpoints = checkpoints
        self.masker = checkpoints.masker
        # Outcomes are masked as the frontier masks them (see ``MaskedOutcomes``).
        self.idempotency = masking(idempotency, self.masker.outcome)
        self.leases = leases
        self.ledger = ledger
        self.prices = prices
        self.lease_policy = lease_policy or LeasePolicy()
        self.continuation = continuation
        self.holder = holder or default_holder()
        self.on_boundary = on_boundary
        self.on_lease = on_lease
        self.on_result = on_result

    @classmethod
    def on_backend(
        cls,
        backend: Backend,
        registered: RegisteredAgent,
        *,
        lease_policy: LeasePolicy,
        holder: str,
        checkpoint_policy: CheckpointPolicy | None = None,
        on_boundary: BoundaryObserver | None = None,
        on_lease: Callable[[RunLease, bool], Awaitable[None]] | None = None,
        on_result: Callable[[RunResult], Awaitable[None]] | None = None,
    ) -> AgentRunner:
        """A runner for ``registered`` over all five stores of ``backend``, the transcript out
        of line in its history store: what the CLI and the operator both run."""
        return cls(
            provider=registered.provider(),
            idempotency=backend.idempotency,
            checkpoints=Checkpointer(
                backend.checkpoints,
                checkpoint_policy,
                history=backend.history,
                masker=backend.masker,
            ),
            leases=backend.leases,
            ledger=backend.ledger,
            prices=registered.prices,
            lease_policy=lease_policy,
            holder=holder,
            on_boundary=on_boundary,
            on_lease=on_lease,
            on_result=on_result,
        )

    # -- entry points -------------------------------------------------------------------------

    async def run(
        self,
        agent: AgentDefinition,
        input: str,
        *,
        tenant: str,
        run_id: str | None = None,
        budget_micros: int | None = None,
        deadline: float | None = None,
        user: str | None = None,
        grant: str | None = None,
        scopes: Sequence[str] = (),
        stop: Callable[[], bool] | None = None,
    ) -> RunResult:
        """Start a new run; refuses a run id that already has a checkpoint (resume it).

        ``stop`` is asked before every model call and every dispatch; once it says yes the run
        stops there (status ``interrupted``), at a point a resume carries on from cleanly.
        """
        run_id = run_id or f"run-{uuid.uuid4().hex[:12]}"
        async with self._held(tenant, run_id) as lease:
            if await self.checkpoints.store.latest(tenant, run_id) is not None:
                raise ConfigurationError(
                    f"run {run_id!r} of tenant {tenant!r} already has a checkpoint; resume it "
                    "(`agentrun run --resume`) or pick another run id"
                )
            state = _Run(
                agent=agent,
                tenant=tenant,
                run_id=run_id,
                holder=self.holder,
                fence=lease.fence if lease else 0,
                lease=lease,
                messages=[Message.of("system", agent.instructions), Message.of("user", input)],
                budget_micros=budget_micros,
                grant=grant,
                scopes=tuple(scopes),
                user=user,
                stop=stop,
            )
            return await self._drive(state, deadline, self._loop(state))

    async def resume(
        self,
        agent: AgentDefinition,
        run_id: str,
        *,
        tenant: str,
        deadline: float | None = None,
        budget_micros: int | None = None,
        stop: Callable[[], bool] | None = None,
        before_planning: Callable[[Checkpoint], Awaitable[None]] | None = None,
    ) -> RunResult:
        """Carry a run on from its checkpoint, deciding every call that was outstanding.

        ``before_planning`` runs under the run's lease once the frontier is read (see
        ``Resumer.resume``); without a lease store it runs under the resume claim.
        """
        if self.leases is None:
            claim = await claim_resume(self.idempotency, tenant, run_id, holder=self.holder)
            try:
                checkpoint, messages, plan = await read_and_plan(
                    self.checkpoints,
                    self.idempotency,
                    tenant,
                    run_id,
                    before_planning=before_planning,
                )
                return await self._carry_on(
                    agent, checkpoint, messages, plan, None, deadline, budget_micros, stop
                )
            finally:
                await release_resume(self.idempotency, tenant, run_id, claim)
        resumer = Resumer(
            checkpoints=self.checkpoints,
            leases=self.leases,
            idempotency=self.idempotency,
            policy=self.lease_policy,
        )
        taken_at = time.monotonic()
        carried = await resumer.resume(
            run_id, tenant=tenant, worker=self.holder, before_planning=before_planning
        )
        holder = Leaseholder(self.leases, carried.lease, self.lease_policy, taken_at=taken_at)
        async with holder as lease:
            if self.on_lease is not None:  # inside, so the lease goes back if it raises
                await self.on_lease(carried.lease, True)
            return await self._carry_on(
                agent,
                carried.checkpoint,
                carried.messages,
                carried.plan,
                lease,
                deadline,
                budget_micros,
                stop,
            )

    # -- resume -------------------------------------------------------------------------------

    async def _carry_on(
        self,
        agent: AgentDefinition,
        checkpoint: Checkpoint,
        messages: tuple[Message, ...],
        plan: ResumePlan,
        lease: Leaseholder | None,
        deadline: float | None,
        budget_micros: int | None,
        stop: Callable[[], bool] | None,
    ) -> RunResult:
        if checkpoint.agent_revision != agent.revision:
            raise RevisionMismatchError(
                checkpoint.run_id, checkpoint.agent_revision, agent.revision
            )
        refuse_if_undecidable(plan)
        budget = checkpoint.metadata.get("budget_micros")
        state = _Run(
            agent=agent,
            tenant=checkpoint.tenant,
            run_id=checkpoint.run_id,
            holder=self.holder,
            fence=lease.fence if lease else checkpoint.fence,
            lease=lease,
            messages=list(messages),
            usage=checkpoint.usage,
            cost_micros=checkpoint.cost_micros,
            iteration=checkpoint.iteration,
            budget_micros=budget_micros
            if budget_micros is not None
            else budget
            if isinstance(budget, int)
            else None,
            grant=checkpoint.grant,
            scopes=checkpoint.scopes,
            user=checkpoint.user,
            resumed=True,
            stop=stop,
        )
        if self.ledger is not None:
            state.cost_micros = await self.ledger.spent(state.tenant, state.run_id)
        return await self._drive(state, deadline, self._resume_loop(state, checkpoint, plan))

    async def _resume_loop(
        self, state: _Run, checkpoint: Checkpoint, plan: ResumePlan
    ) -> RunResult:
        if checkpoint.pending:
            _refuse_over_budget(state)
            decided = {d.pending.call.id: d for d in plan.decisions}
            for index, pending in enumerate(checkpoint.pending):
                decision = decided[pending.call.id]
                if decision.withheld:
                    state.messages.append(
                        Message.tool_result(
                            pending.call.id,
                            "error: this call was not made. Its arguments were masked as secrets "
                            "when the run was checkpointed, so it cannot be sent as written; ask "
                            "for it again with the real values if it is still needed.",
                        )
                    )
                elif decision.outcome is not None:
                    state.messages.append(Message.tool_result(pending.call.id, decision.outcome))
                else:
                    await self._dispatch(state, pending, checkpoint.pending[index:])
            await self._checkpoint(state, Boundary.AFTER_TOOL_RESULT)
        elif _finished(state.messages):
            return self._result(state, RunStatus.COMPLETED)
        return await self._loop(state)

    # -- the loop -----------------------------------------------------------------------------

    async def _drive(
        self, state: _Run, deadline: float | None, work: Awaitable[RunResult]
    ) -> RunResult:
        try:
            async with asyncio.timeout(deadline):
                result = await work
        except _Interrupted:
            result = self._result(state, RunStatus.INTERRUPTED)
        except _Paused as paused:
            result = self._result(state, RunStatus.AWAITING_APPROVAL, approval=paused.approval)
        except TimeoutError:
            result = self._result(state, RunStatus.DEADLINE_EXCEEDED)
        except BudgetExceededError:
            result = self._result(state, RunStatus.BUDGET_EXCEEDED)
        if self.on_result is not None:
            await self.on_result(result)
        return result

    async def _loop(self, state: _Run) -> RunResult:
        tools = [each.schema() for each in state.agent.tools]
        while True:
            if state.iteration >= state.agent.max_iterations:
                return self._result(state, RunStatus.MAX_ITERATIONS)
            _refuse_over_budget(state, at_most=True)
            state.ensure_held()
            reply = await self.provider.complete(
                model=state.agent.model, messages=tuple(state.messages), tools=tools
            )
            state.iteration += 1
            state.journal.append(f"model {state.iteration}")
            await self._charge(state, reply.usage)
            calls = unique_call_ids(reply.tool_calls, state.call_ids, state.iteration)
            assistant = Message(
                role="assistant",
                parts=(TextPart(text=reply.text),) if reply.text else (),
                tool_calls=calls,
            )
            self._append(state, assistant)
            if not calls:
                await self._checkpoint(state, Boundary.AFTER_MODEL_CALL)
                return self._result(state, RunStatus.COMPLETED)
            pending = tuple(self._pending(state.agent, call) for call in calls)
            await self._checkpoint(state, Boundary.AFTER_MODEL_CALL, pending=pending)
            # Over budget, the reply is paid for and kept: a resume with more budget dispatches
            # what it asked for instead of paying for the same answer again.
            _refuse_over_budget(state)
            for index, call in enumerate(pending):
                await self._dispatch(state, call, pending[index:])
            written = await self._checkpoint(state, Boundary.AFTER_TOOL_RESULT)
            # Only from this turn's own frontier: if it was not written, the latest one still
            # has this turn's calls outstanding and would carry them across without results.
            if written and self._continuation_due(state):
                latest = await self.checkpoints.latest(state.tenant, state.run_id)
                if latest is not None and latest.history_handle is not None:
                    carry = continued(latest, tenant=state.tenant, agent_name=state.agent.name)
                    return self._result(state, RunStatus.CONTINUED, continuation=carry)

    def _continuation_due(self, state: _Run) -> bool:
        return (
            self.continuation is not None
            and self.checkpoints.history is not None
            and self.continuation.due(state.journal, history_bytes=state.history_bytes)
        )

    async def _charge(self, state: _Run, usage: Usage) -> None:
        state.usage = state.usage + usage
        cost = self.prices.cost(state.agent.model, usage)
        if self.ledger is None:
            state.cost_micros += cost
        else:
            state.cost_micros = await self.ledger.charge(
                state.tenant,
                state.run_id,
                f"model:{state.execution}:{state.iteration}",
                cost,
                budget=None,
                fence=state.fence,
            )

    def _append(self, state: _Run, message: Message) -> None:
        state.messages.append(message)
        if self.continuation is not None:  # only a continuation policy reads the size
            state.history_bytes += len(message.model_dump_json())

    @staticmethod
    def _pending(agent: AgentDefinition, call: ToolCall) -> PendingCall:
        tool = agent.tool(call.name)
        if tool is None:
            return PendingCall(call=call, safe_to_repeat=True)
        key = (
            derive_key(tool.name, call.arguments, tool.key_arguments)
            if tool.key_arguments
            else None
        )
        return PendingCall(
            call=call,
            idempotency_key=key,
            safe_to_repeat=tool.safe_to_repeat,
            requires_approval=tool.requires_approval,
        )

    # -- dispatch -----------------------------------------------------------------------------

    async def _dispatch(
        self, state: _Run, pending: PendingCall, remaining: tuple[PendingCall, ...]
    ) -> None:
        """Run one call (claim, invoke, record) and append its result to the conversation."""
        call = pending.call
        tool = state.agent.tool(call.name)
        if tool is None:
            self._append(
                state, Message.tool_result(call.id, f"error: there is no tool named {call.name!r}")
            )
            return
        try:
            tool.validate(call.arguments)
        except ToolArgumentsError as error:
            self._append(state, Message.tool_result(call.id, f"error: {error}"))
            return
        if tool.requires_approval and not await self._approved(state, pending, remaining):
            return
        state.ensure_held()
        outcome = await self._invoke(state, tool, pending)
        state.journal.append(f"tool {call.id}")
        self._append(state, Message.tool_result(call.id, outcome))

    async def _approved(
        self, state: _Run, pending: PendingCall, remaining: tuple[PendingCall, ...]
    ) -> bool:
        request_id = approval_request_id(state.tenant, state.run_id, pending.call.id)
        decision = await decision_for(self.idempotency, state.tenant, state.run_id, request_id)
        if decision is None:
            approval = PendingApproval(
                request_id=request_id, call_id=pending.call.id, tool=pending.call.name
            )
            await self._checkpoint(
                state, Boundary.BEFORE_APPROVAL, pending=remaining, approval=approval
            )
            raise _Paused(approval)
        if not decision.approved:
            state.denied.append(request_id)
            reason = f": {decision.reason}" if decision.reason else ""
            self._append(
                state,
                Message.tool_result(
                    pending.call.id, f"error: {decision.by} denied this call{reason}"
                ),
            )
        return decision.approved

    async def _invoke(self, state: _Run, tool: Tool, pending: PendingCall) -> str:
        handed = (
            None
            if pending.idempotency_key is None
            else remote_key(state.tenant, state.run_id, pending.idempotency_key)
        )
        if pending.safe_to_repeat:
            return await self._call(tool, pending, key=handed)
        key = tracking_key(pending)
        claim = await self.idempotency.begin(
            state.tenant,
            state.run_id,
            key,
            holder=state.holder,
            fence=state.fence,
            call_id=pending.call.id,
            tool=tool.name,
        )
        if not claim.won:
            if claim.record.state is ClaimState.COMPLETED and claim.record.outcome is not None:
                return claim.record.outcome
            raise IndeterminateToolCallError(state.run_id, [(pending.call.id, tool.name)])
        try:
            outcome = await self._call(tool, pending, key=handed)
        except BaseException as exc:
            logger.error(
                "tool %s (call %s) of run %s failed; nobody knows whether it acted",
                tool.name,
                pending.call.id,
                state.run_id,
            )
            if isinstance(exc, Exception):
                raise IndeterminateToolCallError(
                    state.run_id, [(pending.call.id, tool.name)]
                ) from exc
            raise
        try:
            await self.idempotency.record(
                state.tenant, state.run_id, key, outcome, holder=state.holder, fence=state.fence
            )
        except BaseException:
            # The call stays in flight, so a resume refuses it and a person must answer; say
            # what it returned (masked like a frontier, and cut short), so that they can.
            shown = self.masker.text(outcome)
            logger.error(
                "tool %s (call %s) of run %s returned, but its outcome could not be recorded: %s",
                tool.name,
                pending.call.id,
                state.run_id,
                shown[:2000],
            )
            raise
        return outcome

    @staticmethod
    async def _call(tool: Tool, pending: PendingCall, *, key: str | None) -> str:
        try:
            return await tool.invoke(pending.call.arguments, key=key)
        except ToolError as error:
            return f"error: {error}"

    # -- checkpoints and results --------------------------------------------------------------

    async def _checkpoint(
        self,
        state: _Run,
        boundary: Boundary,
        *,
        pending: tuple[PendingCall, ...] = (),
        approval: PendingApproval | None = None,
    ) -> bool:
        """Write the frontier (as the policy says); whether it was written."""
        metadata: dict[str, JsonValue] = {}
        if state.budget_micros is not None:
            metadata["budget_micros"] = state.budget_micros
        checkpoint = Checkpoint(
            run_id=state.run_id,
            tenant=state.tenant,
            agent_name=state.agent.name,
            agent_revision=state.agent.revision,
            boundary=boundary,
            fence=state.fence,
            messages=tuple(state.messages),
            pending=pending,
            usage=state.usage,
            cost_micros=state.cost_micros,
            iteration=state.iteration,
            approval=approval,
            grant=state.grant,
            scopes=state.scopes,
            user=state.user,
            metadata=metadata,
        )
        receipt = await self.checkpoints.write(checkpoint)
        if self.on_boundary is not None:
            await self.on_boundary(checkpoint, receipt, self.checkpoints.last_error)
        if receipt is None and checkpoint.holds_intent and self.checkpoints.last_error:
            # The one refused write that stops the run: without this frontier a resume could
            # not know these calls may have been made, and would make them again. Stopping
            # here costs a model call on resume; the calls themselves were not made.
            logger.warning(
                "run %s: the frontier naming calls %s could not be written; stopping before "
                "making them",
                state.run_id,
                ", ".join(p.call.id for p in pending if not p.safe_to_repeat),
            )
            raise self.checkpoints.last_error
        return receipt is not None

    def _result(self, state: _Run, status: RunStatus, **extra: Any) -> RunResult:
        # Only a finished run has an answer; a reply kept mid-turn is not one.
        output = state.messages[-1].text if status is RunStatus.COMPLETED else ""
        return RunResult(
            run_id=state.run_id,
            tenant=state.tenant,
            status=status,
            output=output,
            iteration=state.iteration,
            usage=state.usage,
            cost_micros=state.cost_micros,
            fence=state.fence,
            messages=tuple(state.messages),
            denied=tuple(state.denied),
            resumed=state.resumed,
            checkpoint_error=self.checkpoints.last_error,
            **extra,
        )

    @contextlib.asynccontextmanager
    async def _held(self, tenant: str, run_id: str) -> AsyncIterator[Leaseholder | None]:
        if self.leases is None:
            yield None
            return
        lease = await Leaseholder.acquire(
            self.leases, tenant, run_id, self.holder, self.lease_policy
        )
        async with lease:
            if self.on_lease is not None:  # inside, so the lease goes back if it raises
                await self.on_lease(lease.lease, False)
            yield lease


def unique_call_ids(
    calls: Sequence[ToolCall], taken: set[str], iteration: int
) -> tuple[ToolCall, ...]:
    """``calls`` with every id unique among ``taken`` and each other, and ``taken`` grown by them.

    A reused id becomes ``<id>~<iteration>.<position>`` (suffixed further in the unlikely case
    that is taken too): readable, and the same whichever worker asked, so a reply that is asked
    for again after a crash gets the same ids again.
    """
    unique = []
    for position, call in enumerate(calls):
        if call.id in taken:
            renamed = candidate = f"{call.id}~{iteration}.{position}"
            suffix = 1
            while candidate in taken:
                suffix += 1
                candidate = f"{renamed}.{suffix}"
            call = call.model_copy(update={"id": candidate})
        taken.add(call.id)
        unique.append(call)
    return tuple(unique)


def _refuse_over_budget(state: _Run, *, at_most: bool = False) -> None:
    """Stop a run that spent past its budget (or, before a model call, all of it)."""
    budget = state.budget_micros
    if budget is not None and (
        state.cost_micros >= budget if at_most else state.cost_micros > budget
    ):
        raise BudgetExceededError(state.run_id, state.cost_micros, 0, budget)


def _finished(messages: Sequence[Message]) -> bool:
    last = messages[-1] if messages else None
    return last is not None and last.role == "assistant" and not last.tool_calls
