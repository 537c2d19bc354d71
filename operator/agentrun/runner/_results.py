"""What a run hands back when it stops: why it stopped, and where it got to."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agentrun._continuation import Continuation
from agentrun._frontier import PendingApproval
from agentrun._messages import Message, Usage
from agentrun._outcomes import Outcome


class RunStatus(StrEnum):
    """Where the loop stopped a run; each value is an ``Outcome``'s (see ``RunResult.outcome``)."""

    COMPLETED = Outcome.COMPLETED.value
    AWAITING_APPROVAL = Outcome.AWAITING_APPROVAL.value
    BUDGET_EXCEEDED = Outcome.BUDGET_EXCEEDED.value
    DEADLINE_EXCEEDED = Outcome.DEADLINE_EXCEEDED.value
    MAX_ITERATIONS = Outcome.MAX_ITERATIONS.value
    CONTINUED = Outcome.CONTINUED.value
    INTERRUPTED = Outcome.INTERRUPTED.value


@dataclass(frozen=True)
class RunResult:
    """How a run stopped and where it got to: status, output, spend, fence and transcript."""

    run_id: str
    tenant: str
    status: RunStatus
    output: str
    iteration: int
    usage: Usage
    cost_micros: int
    fence: int
    messages: tuple[Message, ...]
    approval: PendingApproval | None = None
    denied: tuple[str, ...] = ()
    resumed: bool = False
    checkpoint_error: Exception | None = None
    continuation: Continuation | None = None

    @property
    def outcome(self) -> Outcome:
        """How the run ended, in the vocabulary the CLI and the operator report: a completed
        run in which a person denied a call is ``DENIED``."""
        if self.status is RunStatus.COMPLETED and self.denied:
            return Outcome.DENIED
        return Outcome[self.status.name]
