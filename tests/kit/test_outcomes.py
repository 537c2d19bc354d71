"""The one vocabulary for how a run ends: every error and every result names an ``Outcome``, and
what each outcome says (exit code, condition reason, retry) is consistent and stable.

Condition reasons are pinned: users' alerts match on them, so changing one is a breaking change
to make on purpose, not by editing the enum.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from datetime import UTC, datetime

import pytest

import agentrun
from agentrun._errors import (
    AgentRunError,
    CheckpointTooLargeError,
    StaleFenceError,
    StoreError,
    StoreUnavailableError,
)
from agentrun._messages import Usage
from agentrun._outcomes import CONDITION_TYPES, SUCCEEDED, Exit, Outcome
from agentrun.operator._resource import Condition
from agentrun.runner._providers.base import ProviderError
from agentrun.runner._results import RunResult, RunStatus
from agentrun.runner._tools import StillInFlightError, ToolArgumentsError, ToolError

STABLE_REASONS = {
    Outcome.COMPLETED: ("True", "Completed"),
    Outcome.DENIED: ("False", "Denied"),
    Outcome.AWAITING_APPROVAL: ("Unknown", "AwaitingApproval"),
    Outcome.BUDGET_EXCEEDED: ("False", "BudgetExceeded"),
    Outcome.MAX_ITERATIONS: ("False", "Failed"),
    Outcome.DEADLINE_EXCEEDED: ("False", "Failed"),
    Outcome.SUSPENDED: ("Unknown", "Suspended"),
    Outcome.QUEUED: ("Unknown", "Queued"),
    Outcome.QUOTA_SPENT: ("Unknown", "QuotaSpent"),
    Outcome.AGENT_NOT_REGISTERED: ("Unknown", "AgentNotRegistered"),
    Outcome.AGENT_NOT_READY: ("Unknown", "AgentNotReady"),
    Outcome.TENANT_NOT_ALLOWED: ("False", "TenantNotAllowed"),
    Outcome.INDETERMINATE: ("Unknown", "Indeterminate"),
    Outcome.REVISION_MISMATCH: ("False", "RevisionMismatch"),
    Outcome.FORMAT_UNSUPPORTED: ("False", "FormatUnsupported"),
    Outcome.HISTORY_UNAVAILABLE: ("False", "HistoryUnavailable"),
    Outcome.CHECKPOINT_TOO_LARGE: ("False", "CheckpointTooLarge"),
    Outcome.STORE_DATA_LOST: ("Unknown", "StoreDataLost"),
    Outcome.PROVIDER_UNAVAILABLE: ("Unknown", "ProviderUnavailable"),
    Outcome.SECRET_UNAVAILABLE: ("Unknown", "SecretUnavailable"),
    Outcome.REFUSED: ("False", "Failed"),
    Outcome.OPERATOR_FAULT: ("Unknown", "OperatorFault"),
    Outcome.DECISIONS_UNAUTHENTICATED: ("Unknown", "DecisionsUnauthenticated"),
}
NEVER_END_A_RUN = {ToolError, ToolArgumentsError, StillInFlightError}
"""A tool's own answers, told to the model; they take the base's outcome, which is never used."""
PER_INSTANCE = {ProviderError}
"""Errors whose outcome depends on what happened (a provider busy, or refusing)."""
BASES = {StoreError}
"""Bases of errors that name their own; never raised as they are."""


def _error_classes() -> set[type[AgentRunError]]:
    for module in pkgutil.walk_packages(agentrun.__path__, "agentrun."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found: set[type[AgentRunError]] = set()
    pending: list[type[AgentRunError]] = [AgentRunError]
    while pending:
        for subclass in pending.pop().__subclasses__():
            if subclass.__module__.startswith("agentrun."):
                found.add(subclass)
            pending.append(subclass)
    return found


def test_every_error_of_the_package_names_its_outcome() -> None:
    unnamed = {
        cls.__qualname__
        for cls in _error_classes() - NEVER_END_A_RUN - PER_INSTANCE - BASES
        if not any("outcome" in vars(base) for base in cls.__mro__ if base is not AgentRunError)
    }
    assert unnamed == set()


@pytest.mark.parametrize("outcome", list(Outcome), ids=str)
def test_a_retry_exit_code_means_a_retry_can_help(outcome: Outcome) -> None:
    """Exit 5 says "retry when it is back": only an outcome a retry can help may use it, and
    every refusal a retry cannot help exits with a code that says so."""
    if outcome.exit_code is Exit.UNAVAILABLE:
        assert outcome.retryable
    if outcome.retryable:
        assert outcome.exit_code in (Exit.CARRIED_ON, Exit.HELD_ELSEWHERE, Exit.UNAVAILABLE)


@pytest.mark.parametrize(
    ("error", "exit_code"),
    [
        (
            CheckpointTooLargeError(run_id="r", size=2_000_000, limit=1_048_576),
            Exit.MUST_NOT_CARRY_ON,
        ),
        (
            StaleFenceError(run_id="r", tenant="t", fence=1, current=2, what="checkpoint write"),
            Exit.HELD_ELSEWHERE,
        ),
        (ProviderError("http://model", "answered 401: bad key", status=401), Exit.REFUSED),
        (ProviderError("http://model", "answered 503: overloaded", status=503), Exit.UNAVAILABLE),
        (ProviderError("http://model", "answered 429: slow down", status=429), Exit.UNAVAILABLE),
        (ProviderError("http://model", "could not be asked (reset)"), Exit.UNAVAILABLE),
        (
            ProviderError("http://model", "sent a reply it cannot read", unreadable=True),
            Exit.REFUSED,
        ),
        (StoreUnavailableError("redis", "read", OSError("down")), Exit.UNAVAILABLE),
    ],
    ids=[
        "too-large",
        "stale-fence",
        "provider-refused",
        "provider-busy",
        "provider-rate-limited",
        "provider-unreachable",
        "provider-unreadable",
        "store-down",
    ],
)
def test_only_what_a_retry_can_help_exits_5(error: AgentRunError, exit_code: Exit) -> None:
    assert error.outcome.exit_code is exit_code
    assert error.retryable is (exit_code is Exit.UNAVAILABLE)


@pytest.mark.parametrize("outcome", list(STABLE_REASONS), ids=str)
def test_condition_reasons_are_stable(outcome: Outcome) -> None:
    assert outcome.conditions[0] == (SUCCEEDED, *STABLE_REASONS[outcome])


def test_every_outcome_that_writes_a_reason_is_pinned() -> None:
    assert {o for o in Outcome if o.conditions} == set(STABLE_REASONS)


@pytest.mark.parametrize("outcome", [o for o in Outcome if o.conditions], ids=str)
def test_every_condition_is_one_the_api_server_accepts(outcome: Outcome) -> None:
    """``Condition`` carries the CRD's validation of a metav1.Condition (its reason pattern)."""
    for condition in outcome.conditions:
        assert condition.type in CONDITION_TYPES
        Condition(
            type=condition.type,
            status=condition.status,
            reason=condition.reason,
            message="m",
            last_transition_time=datetime(2026, 1, 1, tzinfo=UTC),
        )


def test_every_run_status_is_an_outcome_and_a_denial_is_its_own() -> None:
    assert {status.value for status in RunStatus} <= {outcome.value for outcome in Outcome}

    def result(status: RunStatus, denied: tuple[str, ...] = ()) -> RunResult:
        return RunResult("r", "t", status, "", 1, Usage(), 0, 1, (), denied=denied)

    for status in RunStatus:
        assert result(status).outcome.value == status.value
    assert result(RunStatus.COMPLETED, ("apr-1",)).outcome is Outcome.DENIED


def test_metric_labels_are_prometheus_label_values() -> None:
    assert all(re.fullmatch(r"[a-z_]+", outcome.value) for outcome in Outcome)
