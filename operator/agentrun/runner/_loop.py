"""``AgentRunner``: start a run or carry one on, under its lease, and say how it stopped.

Every step that could be repeated by a crash is arranged so that repeating it is harmless or
refused; each arrangement lives in the module named for it:

* ``_turns`` — the loop: ask the model, charge the ledger (which, not the checkpoint, decides
  what the run may still spend), dispatch, and checkpoint at the boundaries.
* ``_checkpoint_writer`` — the frontier is written only at the three unambiguous boundaries
  (``after_model_call`` holds the reply and the calls it asked for, none dispatched;
  ``after_tool_result`` holds every result of the turn; ``before_approval`` holds the held call
  and the request id).
* ``_turns`` also keeps a call's id unique within the run (``unique_call_ids``): a provider may
  reuse ids, and a keyless call's dispatch marker derives from its id.
* ``_dispatch`` — before a call is handed to its tool, its intent is claimed in the idempotency
  store; the outcome is recorded after. So the record, not the frontier, says what happened
  after the frontier was written.
* here — a resume takes the run's lease before it reads anything (``Resumer``), refuses calls
  nobody can decide (``IndeterminateToolCallError``) and a changed agent, and holds the lease
  with a ``Leaseholder`` for all the work after it. Before every model call and every dispatch
  the lease is checked (``_state``): a worker that lost it stops on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypedDict, Unpack

from opentelemetry.trace import Tracer

from agentrun._backend import Backend, StoreSet
from agentrun._checkpointing import Checkpointer, CheckpointPolicy
from agentrun._continuation import ContinuationPolicy
from agentrun._errors import BudgetExceededError, ConfigurationError, RevisionMismatchError
from agentrun._frontier import Checkpoint
from agentrun._idempotency import IdempotencyStore, masking
from agentrun._leases import (
    MONOTONIC,
    Clock,
    Leaseholder,
    LeasePolicy,
    LeaseStore,
    RunLease,
    default_holder,
)
from agentrun._ledger import Ledger
from agentrun._messages import Message
from agentrun._resume import ClaimingLeaseStore, ResumePlan, Resumer, refuse_if_undecidable
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._checkpoint_writer import BoundaryObserver, CheckpointWriter
from agentrun.runner._dispatch import Dispatcher
from agentrun.runner._pricing import DEFAULT_PRICES, PriceTable
from agentrun.runner._providers.base import Provider
from agentrun.runner._registry import RegisteredAgent
from agentrun.runner._results import RunResult, RunStatus
from agentrun.runner._spend_gate import SpendGate
from agentrun.runner._state import Interrupted, Paused, RunState
from agentrun.runner._tracing import STATUS, record_usage, run_span, tracer
from agentrun.runner._turns import Turns
from agentrun.stores._memory import MemoryLeaseStore

LeaseObserver = Callable[[RunLease, bool], Awaitable[None]]
ResultObserver = Callable[[RunResult], Awaitable[None]]


class Observers(TypedDict, total=False):
    """What a caller hears of a run while it goes: see ``AgentRunner``."""

    on_boundary: BoundaryObserver | None
    on_lease: LeaseObserver | None
    on_result: ResultObserver | None
    spans: Tracer | None


@dataclass(kw_only=True, eq=False)
class AgentRunner:
    """Runs an agent and carries runs on from their checkpoints, never making a call twice.

    ``run`` starts a run and ``resume`` carries one on; both hold the run's lease for all their
    work. Each returns a ``RunResult`` saying where the run stopped. ``on_backend`` builds one
    over every store of a ``Backend``.

    ``on_lease`` hears of each lease taken (and whether it resumes a run); ``on_result`` hears
    how the run stopped while its lease is still held, so what it records lands before another
    worker can take the run. ``clock`` is what the lease's holder keeps its deadline on (a
    test's hand-moved one). ``spans`` traces the run, its model calls and tool calls (default:
    the global tracer provider's; see ``tracing``).

    Without ``leases`` the runner holds its leases in a memory lease store of its own, which
    keeps only this runner's runs apart, and takes with each the at-most-once resume claim in
    the idempotency store (``ClaimingLeaseStore``), which keeps apart the workers sharing it: a
    second one gets ``ResumeConflictError``. The claim lasts five minutes, unrenewed; workers
    whose runs last longer share a lease store (``open_backend`` gives one).

    When the run's tenure ends the checkpointer lets go of what it kept of the run
    (``Checkpointer.let_go``), so a long-lived runner keeps nothing of its finished runs.

    Args:
        provider: The model the runs talk to.
        idempotency: Where each call's claim and outcome are kept.
        checkpoints: Writes and reads the runs' frontiers (and their transcripts).
        leases: Where the runs' fenced leases are kept; by default a memory lease store of the
            runner's own, each lease taken with the run's resume claim.
        ledger: Where the runs' spend is charged; None (the default) keeps no ledger, and the
            frontier's cost is what a resume starts from.
        prices: What each model's tokens cost, in micros (default: only the scripted demo
            model has a price).
        lease_policy: The lease's TTL and when it is renewed (default: 60 s, renewed within 20).
        continuation: When a run starts its execution again (``ContinuationPolicy``); None (the
            default) never.
        holder: This worker's identity (default: host, pid and a random suffix).
        on_boundary: Hears each boundary's write, or why it was not made.
        on_lease: Hears each lease taken, and whether it resumes a run.
        on_result: Hears how a run stopped, while its lease is still held.
        clock: What the lease's holder keeps its deadline on (default: the monotonic clock).
        spans: The tracer for the run's spans (default: the global tracer provider's).
        spend_gate: What each model call is reserved against beyond the run's own budget (a
            namespace's, shared with other runs: see ``_spend_gate``); None (the default): only
            the run's own budget.
    """

    provider: Provider
    idempotency: IdempotencyStore
    checkpoints: Checkpointer
    leases: LeaseStore | None = None
    ledger: Ledger | None = None
    prices: PriceTable = DEFAULT_PRICES
    lease_policy: LeasePolicy = field(default_factory=LeasePolicy)
    continuation: ContinuationPolicy | None = None
    holder: str = field(default_factory=default_holder)
    on_boundary: BoundaryObserver | None = None
    on_lease: LeaseObserver | None = None
    on_result: ResultObserver | None = None
    clock: Clock = MONOTONIC
    spans: Tracer | None = None
    spend_gate: SpendGate | None = None
    _turns: Turns = field(init=False, repr=False)
    _leases: LeaseStore = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.spans is None:
            self.spans = tracer()
        # Outcomes are masked as the frontier masks them (see ``MaskedOutcomes``).
        self.idempotency = masking(self.idempotency, self.checkpoints.masker.outcome)
        self._leases = (
            self.leases
            if self.leases is not None
            else ClaimingLeaseStore(self.idempotency, MemoryLeaseStore())
        )
        checkpoint_writer = CheckpointWriter(self.checkpoints, self.on_boundary, self.ledger)
        self._turns = Turns(
            provider=self.provider,
            prices=self.prices,
            ledger=self.ledger,
            continuation=self.continuation,
            checkpoint_writer=checkpoint_writer,
            dispatcher=Dispatcher(self.idempotency, checkpoint_writer, self.spans),
            spans=self.spans,
            gate=self.spend_gate,
        )

    @classmethod
    def on_backend(
        cls,
        backend: Backend,
        registered: RegisteredAgent,
        *,
        lease_policy: LeasePolicy,
        holder: str,
        checkpoint_policy: CheckpointPolicy | None = None,
        spend_gate: SpendGate | None = None,
        **observers: Unpack[Observers],
    ) -> AgentRunner:
        """A runner for ``registered`` over all five stores of ``backend``, the transcript out
        of line in its history store: what the CLI and the operator both run.

        Args:
            backend: The stores, as ``open_backend`` opened them.
            registered: The agent and how to build its provider and prices.
            lease_policy: The lease's TTL and when it is renewed.
            holder: This worker's identity.
            checkpoint_policy: Where frontiers are written and how large they may be (default:
                every boundary, 1 MiB).
            spend_gate: A shared budget the runs' model calls are reserved against (see
                ``AgentRunner``).
            **observers: ``on_boundary``, ``on_lease`` and ``on_result`` (see ``AgentRunner``).

        Returns:
            The runner.

        Raises:
            ConfigurationError: The agent's provider cannot be built as registered (whatever
                ``registered.provider`` raises, such as a missing key).
        """
        return cls(
            provider=registered.provider(),
            idempotency=backend.idempotency,
            checkpoints=Checkpointer(
                backend.checkpoints,
                checkpoint_policy,
                history=backend.history,
                masker=backend.masker.with_secrets(registered.secrets),
                commits=backend.commits if isinstance(backend, StoreSet) else None,
            ),
            leases=backend.leases,
            ledger=backend.ledger,
            prices=registered.prices,
            lease_policy=lease_policy,
            holder=holder,
            spend_gate=spend_gate,
            **observers,
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

        Args:
            agent: The agent to run.
            input: The request the run starts from (the first user message).
            tenant: The tenant the run belongs to.
            run_id: The new run's id (default: generated, ``run-`` and 12 hex digits).
            budget_micros: The most the run may spend, in micros; None for no limit. Pinned in
                the frontier, so a resume keeps it.
            deadline: Seconds this call may take; past it the run stops with status
                ``deadline_exceeded``, resumable. None for no deadline.
            user: Who the run acts for, kept in the frontier.
            grant: The grant the run acts under, kept in the frontier and carried across a
                continuation.
            scopes: The scopes the run acts under, kept in the frontier.
            stop: Asked before every model call and every dispatch; True stops the run.

        Returns:
            Where the run stopped: completed, awaiting approval, over its budget or deadline,
            at its iteration limit, continued or interrupted (``RunResult.status``).

        Raises:
            ConfigurationError: The run id already has a checkpoint, or an id no store can keep.
            RunLeaseError: A live worker holds the run, or this worker lost its lease.
            StaleFenceError: Another worker took the run over; this one wrote nothing more.
            IndeterminateToolCallError: A tool failed in a way that leaves unknown whether it
                acted, or a claim could not be recorded; a person must answer.
            CheckpointTooLargeError: A frontier naming calls not safe to repeat could not be
                written (as could any other write error of such a frontier): the run stopped
                before making them.
            ProviderError: The model could not be reached or refused the request.
            StoreUnavailableError: A store could not be reached or answered with an error.
        """
        run_id = run_id or f"run-{uuid.uuid4().hex[:12]}"
        # Asked before the lease too, so an existing run is refused without taking (and
        # bumping the fence of) its lease; asked again under it, where the answer holds.
        await self._refuse_existing(tenant, run_id)
        async with self._held(tenant, run_id) as lease:
            await self._refuse_existing(tenant, run_id)
            state = RunState(
                agent=agent,
                tenant=tenant,
                run_id=run_id,
                holder=self.holder,
                fence=lease.fence,
                lease=lease,
                messages=[Message.of("system", agent.instructions), Message.of("user", input)],
                budget_micros=budget_micros,
                grant=grant,
                scopes=tuple(scopes),
                user=user,
                stop=stop,
                measure_history=self.continuation is not None,
            )
            return await self._drive(state, deadline, self._turns.take(state))

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
        ``Resumer.resume``).

        Args:
            agent: The agent the run was started with, at the same revision.
            run_id: The run to carry on.
            tenant: The tenant the run belongs to.
            deadline: Seconds this call may take; None for no deadline.
            budget_micros: The most the run may spend, in micros; None keeps the budget pinned
                in the frontier.
            stop: Asked before every model call and every dispatch; True stops the run.
            before_planning: Runs under the lease with the frontier read, before the calls are
                decided (the operator records people's answers there).

        Returns:
            Where the run stopped (``RunResult.status``), as for ``run``.

        Raises:
            NothingCheckpointedError: The run has no frontier.
            RunLeaseError: A live worker holds the run, or this worker lost its lease.
            RevisionMismatchError: The frontier was written by another revision of the agent.
            IndeterminateToolCallError: Nobody can say whether some pending call happened; a
                person must answer (``resolve``).
            CheckpointFormatError: The frontier is in a format this kit cannot read.
            HistoryUnavailableError: The transcript the frontier names does not resolve.
            StaleFenceError: Another worker took the run over.
            CheckpointTooLargeError: A frontier naming calls not safe to repeat could not be
                written, as for ``run``.
            ProviderError: The model could not be reached or refused the request.
            StoreUnavailableError: A store could not be reached or answered with an error.
        """
        resumer = Resumer(
            checkpoints=self.checkpoints,
            leases=self._leases,
            idempotency=self.idempotency,
            policy=self.lease_policy,
        )
        taken_at = self.clock()
        carried = await resumer.resume(
            run_id, tenant=tenant, holder=self.holder, before_planning=before_planning
        )
        holder = Leaseholder(
            self._leases, carried.lease, self.lease_policy, taken_at=taken_at, clock=self.clock
        )
        async with self._tenure(holder, resumed=True) as lease:
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

    async def _refuse_existing(self, tenant: str, run_id: str) -> None:
        if await self.checkpoints.store.latest(tenant, run_id) is not None:
            raise ConfigurationError(
                f"run {run_id!r} of tenant {tenant!r} already has a checkpoint; resume it "
                "or pick another run id"
            )

    # -- resume -------------------------------------------------------------------------------

    async def _carry_on(
        self,
        agent: AgentDefinition,
        checkpoint: Checkpoint,
        messages: tuple[Message, ...],
        plan: ResumePlan,
        lease: Leaseholder,
        deadline: float | None,
        budget_micros: int | None,
        stop: Callable[[], bool] | None,
    ) -> RunResult:
        if checkpoint.agent_revision != agent.revision:
            raise RevisionMismatchError(
                run_id=checkpoint.run_id, pinned=checkpoint.agent_revision, offered=agent.revision
            )
        refuse_if_undecidable(plan)
        budget = checkpoint.metadata.get("budget_micros")
        state = RunState(
            agent=agent,
            tenant=checkpoint.tenant,
            run_id=checkpoint.run_id,
            holder=self.holder,
            fence=lease.fence,
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
            measure_history=self.continuation is not None,
        )
        if self.ledger is not None:
            state.cost_micros = await self.ledger.spent(state.tenant, state.run_id)
        return await self._drive(state, deadline, self._turns.carry_on(state, checkpoint, plan))

    # -- how a run stops ------------------------------------------------------------------------

    async def _drive(
        self, state: RunState, deadline: float | None, work: Awaitable[RunResult]
    ) -> RunResult:
        """``work`` until the run stops, inside the run's span, which ends saying how."""
        assert self.spans is not None  # set in __post_init__
        with run_span(
            self.spans,
            agent=state.agent.name,
            revision=state.agent.revision,
            run_id=state.run_id,
            tenant=state.tenant,
            fence=state.fence,
            resumed=state.resumed,
        ) as span:
            result = await self._stopped(state, deadline, work)
            span.set_attribute(STATUS, result.status.value)
            record_usage(span, result.usage)
            return result

    async def _stopped(
        self, state: RunState, deadline: float | None, work: Awaitable[RunResult]
    ) -> RunResult:
        """How ``work`` stopped, told to ``on_result``. The run ran out of time only when its
        own deadline expired: a ``TimeoutError`` a tool raised itself (or anything else the run
        awaits) is that tool's failure, and leaves as the tool's other exceptions do."""
        timer = asyncio.timeout(deadline)
        try:
            async with timer:
                result = await work
        except Interrupted:
            result = state.result(RunStatus.INTERRUPTED, self.checkpoints.last_error)
        except Paused as paused:
            result = state.result(
                RunStatus.AWAITING_APPROVAL, self.checkpoints.last_error, approval=paused.approval
            )
        except TimeoutError:
            if not timer.expired():
                raise
            result = state.result(RunStatus.DEADLINE_EXCEEDED, self.checkpoints.last_error)
        except BudgetExceededError:
            result = state.result(RunStatus.BUDGET_EXCEEDED, self.checkpoints.last_error)
        # The answer is masked as its message is in the transcript, and as the operator shows
        # it: the model may echo a secret in it, and a caller may print or log it.
        result = replace(result, output=self.checkpoints.masker.text(result.output))
        if self.on_result is not None:
            await self.on_result(result)
        return result

    @contextlib.asynccontextmanager
    async def _held(self, tenant: str, run_id: str) -> AsyncIterator[Leaseholder]:
        lease = await Leaseholder.acquire(
            self._leases, tenant, run_id, self.holder, self.lease_policy, clock=self.clock
        )
        async with self._tenure(lease, resumed=False) as held:
            yield held

    @contextlib.asynccontextmanager
    async def _tenure(self, holder: Leaseholder, *, resumed: bool) -> AsyncIterator[Leaseholder]:
        """The run's tenure under ``holder``: ``on_lease`` hears of it inside, so the lease goes
        back if it raises; on every way out the checkpointer lets go of the run before the
        lease is released, so nothing of it stays in this process once another may take it."""
        async with holder:
            try:
                if self.on_lease is not None:
                    await self.on_lease(holder.lease, resumed)
                yield holder
            finally:
                self.checkpoints.let_go(holder.lease.tenant, holder.lease.run_id)
