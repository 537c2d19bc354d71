"""How a run, or one attempt at it, ended: one vocabulary for the CLI, the operator and the docs.

Every way a run stops is an ``Outcome``, and each says, once, what everyone who reports it says:
the CLI's exit code (what a script reads), the ``AgentRun`` conditions and reason the operator
writes (what ``kubectl describe`` shows and what users alert on), the event it posts, the label
it is counted under (``agentrun_outcomes_total{outcome=...}``), and whether trying again,
unchanged, can help. Errors carry theirs (``AgentRunError.outcome``) and a ``RunResult`` names
its own, so no front end keeps a mapping of its own that could drift from another's;
docs/runbook.md's table of outcomes is generated from this module, and a test fails if it is not.

``retryable`` is the property a careless caller acts on, and retrying the wrong outcome books a
second seat: an undecidable call, a superseded worker or a frontier over the cap meets the same
refusal every time; a lease held by a live worker, or a store or model that is briefly away,
does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum
from typing import Literal, NamedTuple

ConditionStatus = Literal["True", "False", "Unknown"]

SUCCEEDED = "Succeeded"
AWAITING_APPROVAL = "AwaitingApproval"
INDETERMINATE = "Indeterminate"
CHECKPOINTED = "Checkpointed"
CONDITION_TYPES = (SUCCEEDED, AWAITING_APPROVAL, INDETERMINATE, CHECKPOINTED)
"""The conditions of an AgentRun; ``Succeeded`` says where the run is (Unknown while it goes on)."""


class Exit(IntEnum):
    """What the ``agentrun`` CLI exits with; ``meaning`` is what its help and docs say."""

    CARRIED_ON = 0
    NOTHING_CHECKPOINTED = 1
    USAGE = 2
    HELD_ELSEWHERE = 3
    MUST_NOT_CARRY_ON = 4
    UNAVAILABLE = 5
    REFUSED = 6

    @property
    def meaning(self) -> str:
        return _EXIT_MEANINGS[self]


_EXIT_MEANINGS = {
    Exit.CARRIED_ON: "carried on: the command did what it was asked; for run, the run reached "
    "its next stop, which the last line names",
    Exit.NOTHING_CHECKPOINTED: "nothing is checkpointed under that run id for that tenant",
    Exit.USAGE: "a command line it could not read, or a value it cannot use; the message names "
    "the fix",
    Exit.HELD_ELSEWHERE: "another worker holds the run's lease (it is named), or took the run "
    "over from this one",
    Exit.MUST_NOT_CARRY_ON: "the run must not be carried on as it is; retrying meets the same "
    "refusal, a person must act first",
    Exit.UNAVAILABLE: "a store or the model provider could not be reached: retry when it is back",
    Exit.REFUSED: "a service refused the request (the model provider, a store, kubectl): "
    "retrying unchanged will not help; the message says what to fix",
}


class ConditionReason(NamedTuple):
    """One condition an outcome sets on its AgentRun: its type, status and reason."""

    type: str
    status: ConditionStatus
    reason: str


class Event(NamedTuple):
    """The event an outcome posts on its AgentRun: a reason, and whether it is a warning."""

    reason: str
    warning: bool


@dataclass(frozen=True)
class _Facts:
    exit_code: Exit
    conditions: tuple[ConditionReason, ...]
    event: Event | None
    retryable: bool
    meaning: str


def _facts(
    exit_code: Exit,
    succeeded: tuple[ConditionStatus, str] | None,
    meaning: str,
    *,
    also: tuple[ConditionReason, ...] = (),
    event: Event | None = None,
    retryable: bool = False,
) -> _Facts:
    conditions = () if succeeded is None else (ConditionReason(SUCCEEDED, *succeeded), *also)
    return _Facts(exit_code, conditions, event, retryable, meaning)


def _warning(reason: str) -> Event:
    return Event(reason, warning=True)


def _refused_as_it_is(reason: str, meaning: str) -> _Facts:
    """A run that must not be carried on as it is: it ends (``Succeeded=False``), with a warning
    of the same name, until a person changes what it refuses."""
    return _facts(Exit.MUST_NOT_CARRY_ON, ("False", reason), meaning, event=_warning(reason))


class Outcome(StrEnum):
    """How a run, or one attempt at it, ended; the value is its metric label."""

    _value_: str
    exit_code: Exit
    conditions: tuple[ConditionReason, ...]
    """What the operator writes: ``Succeeded`` first; none when the run's conditions stay."""
    event: Event | None
    retryable: bool
    meaning: str

    def __new__(cls, label: str, facts: _Facts) -> Outcome:
        member = str.__new__(cls, label)
        member._value_ = label
        member.exit_code = facts.exit_code
        member.conditions = facts.conditions
        member.event = facts.event
        member.retryable = facts.retryable
        member.meaning = facts.meaning
        return member

    # -- the run stopped where the loop put it ------------------------------------------------
    COMPLETED = (
        "completed",
        _facts(
            Exit.CARRIED_ON,
            ("True", "Completed"),
            "the model gave its final answer",
            event=Event("Completed", warning=False),
        ),
    )
    DENIED = (
        "denied",
        _facts(
            Exit.CARRIED_ON,
            ("False", "Denied"),
            "the run finished after a person denied a call it held for approval",
            event=_warning("Denied"),
        ),
    )
    AWAITING_APPROVAL = (
        "awaiting_approval",
        _facts(
            Exit.CARRIED_ON,
            ("Unknown", "AwaitingApproval"),
            "the run checkpointed before_approval and waits on a person's decision",
            also=(ConditionReason(AWAITING_APPROVAL, "True", "ApprovalRequested"),),
            event=Event("ApprovalRequested", warning=False),
        ),
    )
    BUDGET_EXCEEDED = (
        "budget_exceeded",
        _facts(
            Exit.CARRIED_ON,
            ("False", "BudgetExceeded"),
            "the run reached its budget; raise it and resume to carry on",
            event=_warning("BudgetExceeded"),
        ),
    )
    QUOTA_SPENT = (
        "quota_spent",
        _facts(
            Exit.CARRIED_ON,
            ("Unknown", "QuotaSpent"),
            "a budget the run shares with others (its namespace's RunQuota) had no room for its "
            "next model call: nothing was sent, the checkpoint is kept, and the run carries on "
            "when the budget's window turns or the budget is raised",
            event=_warning("QuotaSpent"),
        ),
    )
    MAX_ITERATIONS = (
        "max_iterations",
        _facts(
            Exit.CARRIED_ON,
            ("False", "Failed"),
            "the run reached its agent's iteration limit",
            event=_warning("Failed"),
        ),
    )
    DEADLINE_EXCEEDED = (
        "deadline_exceeded",
        _facts(
            Exit.CARRIED_ON,
            ("False", "Failed"),
            "the run ran out of time",
            event=_warning("Failed"),
        ),
    )
    CONTINUED = (
        "continued",
        _facts(
            Exit.CARRIED_ON,
            None,
            "the execution ended to start afresh from a Continuation; the run goes on there",
        ),
    )
    INTERRUPTED = (
        "interrupted",
        _facts(
            Exit.CARRIED_ON,
            None,
            "the worker was told to stop and stopped at the run's next step; another carries it on",
            retryable=True,
        ),
    )
    SUSPENDED = (
        "suspended",
        _facts(
            Exit.CARRIED_ON,
            ("Unknown", "Suspended"),
            "spec.suspend is true: the run stopped at its next step, holding no lease",
        ),
    )
    QUEUED = (
        "queued",
        _facts(
            Exit.CARRIED_ON,
            ("Unknown", "Queued"),
            "its namespace's RunQuota has no room for it (as many runs active as it allows, or "
            "the window's budget spent before it started): the run holds no lease and calls "
            "nothing, and starts, in the order it was queued, when there is room",
            event=Event("Queued", warning=False),
        ),
    )

    # -- the run was refused --------------------------------------------------------------------
    NOTHING_CHECKPOINTED = (
        "nothing_checkpointed",
        _facts(
            Exit.NOTHING_CHECKPOINTED, None, "nothing is checkpointed under that run id and tenant"
        ),
    )
    MISCONFIGURED = (
        "misconfigured",
        _facts(Exit.USAGE, None, "a value given to the kit cannot work; the message names the fix"),
    )
    AGENT_NOT_REGISTERED = (
        "agent_not_registered",
        _facts(
            Exit.USAGE,
            ("Unknown", "AgentNotRegistered"),
            "no agent of that name is registered in this installation (image)",
            event=_warning("AgentNotRegistered"),
        ),
    )
    AGENT_NOT_READY = (
        "agent_not_ready",
        _facts(
            Exit.UNAVAILABLE,
            ("Unknown", "AgentNotReady"),
            "the Agent resource the run names cannot be made into an agent yet (a spec the kit "
            "refuses, a tool server that cannot be listed); the run waits and starts, or carries "
            "on, once it can",
            event=_warning("AgentNotReady"),
            retryable=True,
        ),
    )
    TENANT_NOT_ALLOWED = (
        "tenant_not_allowed",
        _facts(
            Exit.USAGE,
            ("False", "TenantNotAllowed"),
            "the run names a tenant its namespace does not grant",
            event=_warning("TenantNotAllowed"),
        ),
    )
    HELD_ELSEWHERE = (
        "held_elsewhere",
        _facts(
            Exit.HELD_ELSEWHERE,
            None,
            "another worker holds the run's lease, or took it while this one could not renew",
            retryable=True,
        ),
    )
    SUPERSEDED = (
        "superseded",
        _facts(
            Exit.HELD_ELSEWHERE,
            None,
            "a newer lease holder owns the run: this worker's writes are refused, and it stops",
        ),
    )
    INDETERMINATE = (
        "indeterminate",
        _facts(
            Exit.MUST_NOT_CARRY_ON,
            ("Unknown", "Indeterminate"),
            "nobody can say whether an outstanding call happened; a person must answer for it",
            also=(ConditionReason(INDETERMINATE, "True", "UndecidableCall"),),
            event=_warning("IndeterminateCall"),
        ),
    )
    REVISION_MISMATCH = (
        "revision_mismatch",
        _refused_as_it_is(
            "RevisionMismatch",
            "the agent changed since the run was checkpointed: deploy the pinned revision",
        ),
    )
    FORMAT_UNSUPPORTED = (
        "format_unsupported",
        _refused_as_it_is(
            "FormatUnsupported",
            "the checkpoint was written by a newer kit: resume it with that kit",
        ),
    )
    HISTORY_UNAVAILABLE = (
        "history_unavailable",
        _refused_as_it_is(
            "HistoryUnavailable",
            "the transcript the checkpoint points at is gone or damaged",
        ),
    )
    CHECKPOINT_TOO_LARGE = (
        "checkpoint_too_large",
        _refused_as_it_is(
            "CheckpointTooLarge",
            "the frontier naming a call that is not safe to repeat is over the cap, so the run "
            "stopped before the call",
        ),
    )
    STORE_DATA_LOST = (
        "store_data_lost",
        _facts(
            Exit.MUST_NOT_CARRY_ON,
            ("Unknown", "StoreDataLost"),
            "the AgentRun says the run began (or got further) but the store holds nothing of it: "
            "starting over could repeat every call, so a person decides (delete it to forget the "
            "run, or delete and create it again to start over knowingly)",
            event=_warning("StoreDataLost"),
        ),
    )
    DECISIONS_UNAUTHENTICATED = (
        "decisions_unauthenticated",
        _facts(
            Exit.MUST_NOT_CARRY_ON,
            ("Unknown", "DecisionsUnauthenticated"),
            "the run holds a person's approval or resolution, and the API server does not "
            "authenticate who appended it (nothing enforces the chart's decisions policy): the "
            "operator acts on none, and the run waits until it is enforced",
            event=_warning("DecisionsUnauthenticated"),
        ),
    )
    STORE_UNAVAILABLE = (
        "store_unavailable",
        _facts(
            Exit.UNAVAILABLE,
            None,
            "a store could not be reached or failed; the call changed nothing the kit relies on",
            retryable=True,
        ),
    )
    PROVIDER_UNAVAILABLE = (
        "provider_unavailable",
        _facts(
            Exit.UNAVAILABLE,
            ("Unknown", "ProviderUnavailable"),
            "the model provider could not be reached, or was busy (a timeout, 429, 5xx) once its "
            "own retries were spent; everything before the call is checkpointed, and the run is "
            "carried on after a pause",
            event=_warning("ProviderUnavailable"),
            retryable=True,
        ),
    )
    SECRET_UNAVAILABLE = (
        "secret_unavailable",
        _facts(
            Exit.UNAVAILABLE,
            ("Unknown", "SecretUnavailable"),
            "a secret the model endpoint needs could not be read (not created yet, or a wrong "
            "name or key); nothing that needed it was sent, and the run is carried on once it "
            "can be read",
            event=_warning("SecretUnavailable"),
            retryable=True,
        ),
    )
    TOOL_UNREACHABLE = (
        "tool_unreachable",
        _facts(
            Exit.UNAVAILABLE,
            None,
            "a remote tool was sent a call and no answer came back; carrying the run on decides "
            "the call: made again if it is safe to repeat, else refused as indeterminate",
            retryable=True,
        ),
    )
    REFUSED = (
        "refused",
        _facts(
            Exit.REFUSED,
            ("False", "Failed"),
            "a service refused the request for good: the model provider (its key, its model, "
            "a reply it cannot read), a store (data it will not hold, a record it cannot read), "
            "kubectl, or the kit itself (a frontier it cannot mask or encode)",
        ),
    )
    OPERATOR_FAULT = (
        "operator_fault",
        _facts(
            Exit.MUST_NOT_CARRY_ON,
            ("Unknown", "OperatorFault"),
            "the operator met an error that trying again cannot mend (the API server refusing it, "
            "a 403 say, or a bug) and stopped working on the run; the message and the operator's "
            "log say what. Fix the cause, then restart the operator's replicas to carry it on",
            event=_warning("OperatorFault"),
        ),
    )

    @property
    def reason(self) -> str | None:
        """The reason of the ``Succeeded`` condition it writes (None: it writes none)."""
        return self.conditions[0].reason if self.conditions else None
