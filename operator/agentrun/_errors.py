"""Errors the kit raises, each saying what happened, to which run, and what a person can do.

Every error names its ``outcome`` (``_outcomes.Outcome``): how the run ends when it is raised,
and so the CLI's exit code, the AgentRun's condition and whether it is ``retryable`` — whether
asking again, unchanged, can succeed. The distinction matters more here than in most libraries,
because the cheap reflex of retrying is exactly what books a second seat. An undecidable tool
call or a superseded fence is never retryable; a lease held by a live worker or an unreachable
store is.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentrun._outcomes import Outcome


class AgentRunError(Exception):
    """Base of every error the kit raises on purpose.

    A subclass names its ``outcome``; one that does not (a tool's own refusal, which never ends
    a run) is taken as refused: not retryable.
    """

    outcome: Outcome = Outcome.REFUSED

    @property
    def retryable(self) -> bool:
        """Whether asking again, unchanged, can succeed."""
        return self.outcome.retryable


class ConfigurationError(AgentRunError):
    """A value given to the kit cannot work; the message names the field and the fix."""

    outcome = Outcome.MISCONFIGURED


class StoreError(AgentRunError):
    """A store call that failed: which store, doing what, and why (the driver's error)."""

    then: str = ""
    """What it means for the caller, said after the cause."""

    def __init__(self, store: str, operation: str, cause: BaseException) -> None:
        self.store = store
        self.operation = operation
        super().__init__(
            f"{store} could not {operation}: {cause.__class__.__name__}: {cause}. {self.then}"
        )


class StoreUnavailableError(StoreError):
    """A store could not be reached, timed out or was busy; the same call may succeed later.

    Which driver errors are this and which are ``StoreRefusedError`` is decided in one place for
    every driver (``agentrun._storecore.classify``)."""

    outcome = Outcome.STORE_UNAVAILABLE
    then = "The call changed nothing that the kit relies on; retry when the store is back."


class StoreRefusedError(StoreError):
    """A store refused the call itself (a constraint, a key of the wrong type, a permission, a
    memory limit it will not exceed); sending the same call again would be refused again, so a
    caller that retried on it would retry for ever."""

    outcome = Outcome.REFUSED
    then = "The store refused it; nothing was written, and the same call will be refused."


class CheckpointTooLargeError(AgentRunError):
    """A checkpoint payload is over the cap; it is refused, never truncated."""

    outcome = Outcome.CHECKPOINT_TOO_LARGE

    def __init__(self, *, run_id: str, size: int, limit: int) -> None:
        self.run_id = run_id
        self.size = size
        self.limit = limit
        super().__init__(
            f"checkpoint for run {run_id!r} is {size} bytes, over the {limit}-byte cap; it was "
            "not written. Raise max_bytes or store the transcript out of line "
            "(a HistoryStore) so the frontier stays small. The run itself goes on."
        )


class CheckpointEncodingError(AgentRunError):
    """A frontier (or its transcript's segment) could not be masked or encoded: a bug, or data
    the kit cannot encode (text that is not Unicode, a pattern that fails on it).

    Raised, not kept in ``Checkpointer.last_error`` as an outage is: no store was asked, the
    same data fails the same way at every boundary after, and a run carried on without a
    frontier would be one nobody can resume. Not retryable: the cause says what to fix.
    """

    outcome = Outcome.REFUSED

    def __init__(self, *, run_id: str, cause: Exception) -> None:
        self.run_id = run_id
        super().__init__(
            f"the checkpoint of run {run_id!r} could not be masked and encoded: "
            f"{cause.__class__.__name__}: {cause}. Nothing was written; this is a bug in the "
            "kit or in what the run holds (a tool result, an extra redaction pattern), not a "
            "store outage: fix that, then resume from the last frontier written."
        )


class CheckpointFormatError(AgentRunError):
    """A checkpoint was written in a format this kit cannot read; it is left untouched."""

    outcome = Outcome.FORMAT_UNSUPPORTED

    def __init__(self, *, run_id: str | None, found: object, supported: int) -> None:
        self.run_id = run_id
        self.found = found
        self.supported = supported
        who = f"run {run_id!r}" if run_id else "a run"
        super().__init__(
            f"checkpoint of {who} has format {found!r}; this kit reads format {supported} and "
            "older. It was left as it is: resume it with a worker running a kit that knows "
            "that format."
        )


class IndeterminateToolCallError(AgentRunError):
    """Some outstanding tool calls may or may not have happened; the kit refuses to guess.

    ``unnamed`` are calls dispatched after the run's newest frontier was written (it was lost,
    or never written): no frontier names them, so the conversation a resume carries on does not
    know them, whether they are in flight or completed. ``calls`` holds every call of both kinds,
    (call id, tool) each, as a person answers for them.
    """

    outcome = Outcome.INDETERMINATE

    def __init__(
        self,
        *,
        run_id: str,
        calls: Sequence[tuple[str, str]],
        unnamed: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.run_id = run_id
        self.unnamed = tuple(unnamed)
        self.calls = tuple(calls) + self.unnamed
        said = []
        if calls:
            named = ", ".join(f"{name} (call {call_id})" for call_id, name in calls)
            said.append(f"nobody can say whether {named} happened")
        if unnamed:
            named = ", ".join(f"{name} (call {call_id})" for call_id, name in self.unnamed)
            said.append(
                f"{named} was dispatched after its newest checkpoint was written, so the "
                "conversation it would carry on does not know whether it happened"
            )
        super().__init__(
            f"run {run_id!r} cannot be carried on: {'; and '.join(said)}. Check the tool's own "
            "status (or ask a person), then record the answer with `agentrun resolve` (it ran, "
            "with this result / it did not run) and resume."
        )


class ResumeConflictError(AgentRunError):
    """Another worker already claimed the resumption of this run."""

    outcome = Outcome.HELD_ELSEWHERE

    def __init__(self, *, run_id: str, tenant: str, holder: str) -> None:
        self.run_id = run_id
        self.tenant = tenant
        self.holder = holder
        super().__init__(
            f"run {run_id!r} of tenant {tenant!r} is already being resumed by {holder!r}; "
            "a second resume would be a second run. Wait for it, or for its claim to expire."
        )


class RunLeaseError(AgentRunError):
    """The run's lease is held by a live worker (or was lost); try again once it lapses."""

    outcome = Outcome.HELD_ELSEWHERE

    def __init__(
        self,
        *,
        run_id: str,
        tenant: str,
        requested_by: str,
        holder: str | None,
        fence: int,
        detail: str = "",
    ) -> None:
        self.run_id = run_id
        self.tenant = tenant
        self.requested_by = requested_by
        self.holder = holder
        self.fence = fence
        reason = detail or f"it is held by {holder!r} with fence {fence}"
        super().__init__(
            f"{requested_by!r} cannot hold the lease on run {run_id!r} of tenant {tenant!r}: "
            f"{reason}. Another worker owns the run; it will be free once that lease lapses "
            "or is released."
        )


class StaleFenceError(AgentRunError):
    """A write was made under a fence that a newer lease holder has superseded.

    Not retryable for that writer: its tenure is over, and the run belongs to whoever holds the
    higher fence.
    """

    outcome = Outcome.SUPERSEDED

    def __init__(self, *, run_id: str, tenant: str, fence: int, current: int, what: str) -> None:
        self.run_id = run_id
        self.tenant = tenant
        self.fence = fence
        self.current = current
        super().__init__(
            f"{what} for run {run_id!r} of tenant {tenant!r} was refused: it was made under "
            f"fence {fence}, and fence {current} has since been issued. This worker was "
            "superseded; it must stop working on the run."
        )


class HistoryUnavailableError(AgentRunError):
    """The transcript a checkpoint points at no longer resolves (evicted, or corrupted)."""

    outcome = Outcome.HISTORY_UNAVAILABLE

    def __init__(self, *, run_id: str, handle: str, why: str) -> None:
        self.run_id = run_id
        self.handle = handle
        super().__init__(
            f"the transcript of run {run_id!r} (handle {handle}) cannot be read: {why}. "
            "The run stops rather than continue a conversation with a hole in it; restore the "
            "history store or start the run again."
        )


class RevisionMismatchError(AgentRunError):
    """The agent definition changed since the checkpoint pinned its revision."""

    outcome = Outcome.REVISION_MISMATCH

    def __init__(self, *, run_id: str, pinned: str, offered: str) -> None:
        self.run_id = run_id
        self.pinned = pinned
        self.offered = offered
        super().__init__(
            f"run {run_id!r} was checkpointed under agent revision {pinned}, but this worker "
            f"has revision {offered}. Resuming into a changed agent would be a different run; "
            "deploy the pinned revision to finish it, or start a new run."
        )


class BudgetExceededError(AgentRunError):
    """A charge would take the run past its budget; nothing was charged."""

    outcome = Outcome.BUDGET_EXCEEDED

    def __init__(self, *, run_id: str, spent: int, charge: int, budget: int) -> None:
        self.run_id = run_id
        self.spent = spent
        self.charge = charge
        self.budget = budget
        super().__init__(
            f"run {run_id!r} has spent {spent} of its {budget} micros; a charge of {charge} "
            "would go over. Raise the run's budget to let it carry on."
        )


class QuotaSpentError(AgentRunError):
    """A budget shared with other runs has no room for the run's next model call; nothing was
    sent or reserved."""

    outcome = Outcome.QUOTA_SPENT

    def __init__(self, *, run_id: str, budget: str) -> None:
        self.run_id = run_id
        self.budget = budget
        super().__init__(
            f"run {run_id!r} stopped before its next model call: {budget} has no room for it. "
            "It carries on when the budget's window turns or the budget is raised."
        )


class NothingCheckpointedError(AgentRunError):
    """There is no checkpoint under this run id for this tenant."""

    outcome = Outcome.NOTHING_CHECKPOINTED

    def __init__(self, *, run_id: str, tenant: str) -> None:
        self.run_id = run_id
        self.tenant = tenant
        super().__init__(
            f"nothing is checkpointed for run {run_id!r} of tenant {tenant!r}. Check the run id "
            "and tenant, and that this worker uses the store the run was written to."
        )


class UnreadableRecordError(AgentRunError):
    """A record a store keeps for a run does not decode; it was left as it is.

    Any store raises it the same way (``agentrun._storecore.classify.reading``): a record that was
    not written by this kit, or was damaged, is reported naming the run and the store, never as a
    bare driver or parsing error. Not retryable: reading it again reads the same bytes.
    """

    outcome = Outcome.REFUSED

    def __init__(self, *, run_id: str, tenant: str, store: str, detail: str) -> None:
        self.run_id = run_id
        self.tenant = tenant
        self.store = store
        super().__init__(
            f"a record of run {run_id!r} of tenant {tenant!r} in {store} cannot be read: "
            f"{detail}. It was not written by this kit, or was damaged, and was left untouched; "
            "inspect or delete the run's records by hand."
        )
