"""What a run hands back when it stops: why it stopped, and where it got to."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agentrun.continuation import Continuation
from agentrun.frontier import PendingApproval
from agentrun.messages import Message, Usage


class RunStatus(StrEnum):
    """Where the loop stopped a run."""

    COMPLETED = "completed"
    AWAITING_APPROVAL = "awaiting_approval"
    BUDGET_EXCEEDED = "budget_exceeded"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    MAX_ITERATIONS = "max_iterations"
    CONTINUED = "continued"
    INTERRUPTED = "interrupted"


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
