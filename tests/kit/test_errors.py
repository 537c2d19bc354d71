"""Every error says what happened, to which run, what a person can do, and how the run ends.

Its ``outcome`` decides whether it is ``retryable``, the property a careless caller acts on, and
retrying the wrong one books a second seat; so each error's outcome is pinned here, and a new
error class added without one fails ``test_every_error_class_is_covered``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pytest

from agentrun import _errors as errors
from agentrun._errors import (
    AgentRunError,
    BudgetExceededError,
    CheckpointEncodingError,
    CheckpointFormatError,
    CheckpointTooLargeError,
    ConfigurationError,
    HistoryUnavailableError,
    IndeterminateToolCallError,
    NothingCheckpointedError,
    QuotaSpentError,
    ResumeConflictError,
    RevisionMismatchError,
    RunLeaseError,
    StaleFenceError,
    StoreError,
    StoreRefusedError,
    StoreUnavailableError,
    UnreadableRecordError,
)
from agentrun._outcomes import Outcome

RUN = "run-7f3a"

# (factory, its outcome, a phrase that tells a person what to do)
CASES: dict[type[AgentRunError], tuple[Callable[[], AgentRunError], Outcome, str]] = {
    StoreUnavailableError: (
        lambda: StoreUnavailableError("redis", "write the checkpoint", TimeoutError("t/o")),
        Outcome.STORE_UNAVAILABLE,
        "retry when the store is back",
    ),
    CheckpointTooLargeError: (
        lambda: CheckpointTooLargeError(run_id=RUN, size=2_000_000, limit=1_048_576),
        Outcome.CHECKPOINT_TOO_LARGE,
        "Raise max_bytes",
    ),
    CheckpointEncodingError: (
        lambda: CheckpointEncodingError(
            run_id=RUN, cause=UnicodeEncodeError("utf-8", "\ud800", 0, 1, "no")
        ),
        Outcome.REFUSED,
        "fix that, then resume from the last frontier written",
    ),
    CheckpointFormatError: (
        lambda: CheckpointFormatError(run_id=RUN, found=9, supported=1),
        Outcome.FORMAT_UNSUPPORTED,
        "resume it with a worker running a kit that knows",
    ),
    IndeterminateToolCallError: (
        lambda: IndeterminateToolCallError(run_id=RUN, calls=[("call-1", "book_flight")]),
        Outcome.INDETERMINATE,
        "Check the tool's own status",
    ),
    ResumeConflictError: (
        lambda: ResumeConflictError(run_id=RUN, tenant="acme", holder="worker-2"),
        Outcome.HELD_ELSEWHERE,
        "Wait for it",
    ),
    RunLeaseError: (
        lambda: RunLeaseError(
            run_id=RUN, tenant="acme", requested_by="worker-9", holder="worker-2", fence=4
        ),
        Outcome.HELD_ELSEWHERE,
        "it will be free once that lease lapses or is released",
    ),
    StaleFenceError: (
        lambda: StaleFenceError(
            run_id=RUN, tenant="acme", fence=3, current=5, what="checkpoint write"
        ),
        Outcome.SUPERSEDED,
        "it must stop working on the run",
    ),
    HistoryUnavailableError: (
        lambda: HistoryUnavailableError(
            run_id=RUN, handle="sha256:ab", why="no segment is stored under it"
        ),
        Outcome.HISTORY_UNAVAILABLE,
        "restore the history store or start the run again",
    ),
    RevisionMismatchError: (
        lambda: RevisionMismatchError(run_id=RUN, pinned="rev-1", offered="rev-2"),
        Outcome.REVISION_MISMATCH,
        "deploy the pinned revision",
    ),
    BudgetExceededError: (
        lambda: BudgetExceededError(run_id=RUN, spent=900, charge=200, budget=1000),
        Outcome.BUDGET_EXCEEDED,
        "Raise the run's budget",
    ),
    QuotaSpentError: (
        lambda: QuotaSpentError(run_id=RUN, budget="RunQuota team's budget for the window W"),
        Outcome.QUOTA_SPENT,
        "when the budget's window turns or the budget is raised",
    ),
    NothingCheckpointedError: (
        lambda: NothingCheckpointedError(run_id=RUN, tenant="acme"),
        Outcome.NOTHING_CHECKPOINTED,
        "Check the run id",
    ),
    StoreRefusedError: (
        lambda: StoreRefusedError("postgres", "write the checkpoint", ValueError("NUL")),
        Outcome.REFUSED,
        "the same call will be refused",
    ),
    UnreadableRecordError: (
        lambda: UnreadableRecordError(
            run_id=RUN, tenant="acme", store="Redis ledger", detail="the total is not a number"
        ),
        Outcome.REFUSED,
        "inspect or delete the run's records by hand",
    ),
}


def test_every_error_class_is_covered() -> None:
    defined = {
        cls
        for _, cls in inspect.getmembers(errors, inspect.isclass)
        if issubclass(cls, AgentRunError)
        and cls not in (AgentRunError, ConfigurationError, StoreError)
    }
    assert defined == set(CASES)


@pytest.mark.parametrize("cls", list(CASES), ids=lambda cls: cls.__name__)
def test_each_error_names_its_outcome_and_retryable_follows_it(cls: type[AgentRunError]) -> None:
    factory, outcome, _ = CASES[cls]
    error = factory()
    assert isinstance(error, cls)
    assert error.outcome is outcome
    assert error.retryable is outcome.retryable


@pytest.mark.parametrize("cls", list(CASES), ids=lambda cls: cls.__name__)
def test_message_says_what_a_person_can_do(cls: type[AgentRunError]) -> None:
    factory, _, advice = CASES[cls]
    assert advice in str(factory())


@pytest.mark.parametrize(
    "cls",
    [cls for cls in CASES if not issubclass(cls, StoreError)],
    ids=lambda c: c.__name__,
)
def test_message_names_the_run(cls: type[AgentRunError]) -> None:
    factory, _, _ = CASES[cls]
    error = factory()
    assert f"run {RUN!r}" in str(error)
    assert getattr(error, "run_id") == RUN  # noqa: B009 - every run error carries run_id


def test_the_two_that_must_never_be_retried() -> None:
    indeterminate = IndeterminateToolCallError(run_id=RUN, calls=[("c1", "charge_card")])
    stale = StaleFenceError(run_id=RUN, tenant="acme", fence=1, current=2, what="history write")
    assert not indeterminate.retryable
    assert not stale.retryable


def test_the_ones_that_may_be_retried() -> None:
    assert RunLeaseError(run_id=RUN, tenant="t", requested_by="a", holder="b", fence=1).retryable
    assert ResumeConflictError(run_id=RUN, tenant="t", holder="b").retryable
    assert StoreUnavailableError("pg", "read", OSError("down")).retryable


def test_configuration_error_is_not_retryable() -> None:
    assert not ConfigurationError("max_bytes must be positive").retryable


def test_indeterminate_names_every_call_and_carries_the_run() -> None:
    calls = [("call-1", "book_flight"), ("call-2", "charge_card"), ("call-3", "send_email")]
    error = IndeterminateToolCallError(run_id=RUN, calls=calls)
    assert error.run_id == RUN
    assert error.calls == tuple(calls)
    message = str(error)
    for call_id, name in calls:
        assert f"{name} (call {call_id})" in message
    assert RUN in message


def test_run_lease_error_names_holder_requester_and_fence() -> None:
    error = RunLeaseError(
        run_id=RUN, tenant="acme", requested_by="worker-9", holder="worker-2", fence=41
    )
    message = str(error)
    assert "'worker-2'" in message
    assert "'worker-9'" in message
    assert "fence 41" in message
    assert "'acme'" in message
    assert (error.holder, error.requested_by, error.fence) == ("worker-2", "worker-9", 41)


def test_run_lease_error_detail_replaces_the_holder_sentence() -> None:
    error = RunLeaseError(
        run_id=RUN,
        tenant="acme",
        requested_by="w1",
        holder=None,
        fence=3,
        detail="the lease was lost: x",
    )
    assert "the lease was lost: x" in str(error)
    assert "held by" not in str(error)


def test_stale_fence_error_says_both_fences_and_what_was_refused() -> None:
    error = StaleFenceError(run_id=RUN, tenant="acme", fence=3, current=5, what="checkpoint write")
    message = str(error)
    assert message.startswith("checkpoint write")
    assert "fence 3" in message
    assert "fence 5" in message
    assert (error.fence, error.current) == (3, 5)


def test_store_unavailable_names_store_operation_and_cause() -> None:
    error = StoreUnavailableError("postgres", "renew the lease", ConnectionResetError("reset"))
    message = str(error)
    assert "postgres could not renew the lease" in message
    assert "ConnectionResetError: reset" in message


def test_too_large_reports_size_and_cap() -> None:
    error = CheckpointTooLargeError(run_id=RUN, size=2_000_001, limit=1_048_576)
    assert "2000001 bytes" in str(error)
    assert "1048576-byte cap" in str(error)
    assert (error.size, error.limit) == (2_000_001, 1_048_576)


def test_format_error_without_a_run_still_reads() -> None:
    error = CheckpointFormatError(run_id=None, found="unparseable", supported=1)
    assert "a run" in str(error)
    assert error.run_id is None
