"""A run in flight: what the loop carries from one step to the next, and how it stops early.

``RunState`` is the run as the loop holds it between steps: the conversation, the spend, the
lease it works under. ``Interrupted`` and ``Paused`` are how a step says the run stops here (the
caller asked it to, or it waits on a person); the runner turns them into a ``RunResult``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentrun._errors import BudgetExceededError
from agentrun._frontier import PendingApproval
from agentrun._leases import Leaseholder
from agentrun._messages import Message, Usage
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._results import RunResult, RunStatus


class Interrupted(Exception):
    """The caller asked the run to stop; it stops before its next step."""


class Paused(Exception):
    """The run stops here to wait on a person."""

    def __init__(self, approval: PendingApproval) -> None:
        self.approval = approval


@dataclass
class RunState:
    """One run between two steps of the loop."""

    agent: AgentDefinition
    tenant: str
    run_id: str
    holder: str
    fence: int
    lease: Leaseholder
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
    steps: int = 0
    history_bytes: int = 0
    measure_history: bool = False
    """Whether ``history_bytes`` is kept (only a continuation policy reads it)."""
    resumed: bool = False
    stop: Callable[[], bool] | None = None
    call_ids: set[str] = field(init=False)
    """Every call id the conversation holds, which a new call may not reuse."""

    def __post_init__(self) -> None:
        self.call_ids = {call.id for message in self.messages for call in message.tool_calls}

    def ensure_held(self) -> None:
        """Before every model call and every dispatch: still ours, and still wanted?"""
        if self.stop is not None and self.stop():
            raise Interrupted
        self.lease.ensure_held()

    def append(self, message: Message) -> None:
        self.messages.append(message)
        if self.measure_history:
            self.history_bytes += len(message.model_dump_json())

    def result(
        self, status: RunStatus, checkpoint_error: Exception | None, **extra: Any
    ) -> RunResult:
        # Only a finished run has an answer; a reply kept mid-turn is not one.
        output = self.messages[-1].text if status is RunStatus.COMPLETED else ""
        return RunResult(
            run_id=self.run_id,
            tenant=self.tenant,
            status=status,
            output=output,
            iteration=self.iteration,
            usage=self.usage,
            cost_micros=self.cost_micros,
            fence=self.fence,
            messages=tuple(self.messages),
            denied=tuple(self.denied),
            resumed=self.resumed,
            checkpoint_error=checkpoint_error,
            **extra,
        )


def refuse_over_budget(state: RunState, *, at_most: bool = False) -> None:
    """Stop a run that spent past its budget (or, before a model call, all of it)."""
    budget = state.budget_micros
    if budget is not None and (
        state.cost_micros >= budget if at_most else state.cost_micros > budget
    ):
        raise BudgetExceededError(
            run_id=state.run_id, spent=state.cost_micros, charge=0, budget=budget
        )


def finished(messages: Sequence[Message]) -> bool:
    last = messages[-1] if messages else None
    return last is not None and last.role == "assistant" and not last.tool_calls
