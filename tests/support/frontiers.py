"""Building frontiers for tests: one place that knows a valid ``Checkpoint``'s required fields."""

from __future__ import annotations

from typing import Any

from agentrun._backend import StoreSet
from agentrun._checkpointing import Checkpointer
from agentrun._frontier import Boundary, Checkpoint, PendingApproval, PendingCall
from agentrun._messages import Message, ToolCall

RUN = "run-1"
TENANT = "acme"
APPROVAL = PendingApproval(request_id="req-9", call_id="c1", tool="book_flight")
"""The approval a ``before_approval`` frontier of these tests waits on."""


def frontier(**fields: Any) -> Checkpoint:
    """A valid checkpoint of run ``run-1`` of tenant ``acme``; ``fields`` override the defaults."""
    values: dict[str, Any] = {
        "run_id": RUN,
        "tenant": TENANT,
        "agent_name": "booking",
        "agent_revision": "rev-1",
        "boundary": Boundary.AFTER_TOOL_RESULT,
    }
    values.update(fields)
    return Checkpoint(**values)


def conversation(turns: int, *, start: int = 0) -> tuple[Message, ...]:
    """``turns`` user/assistant pairs with distinct, secret-free text."""
    messages: list[Message] = []
    for turn in range(start, start + turns):
        messages.append(Message.of("user", f"turn {turn}: what about flight {turn * 7}?"))
        messages.append(Message.of("assistant", f"turn {turn}: flight {turn * 7} has 3 seats."))
    return tuple(messages)


def pending(
    call_id: str,
    *,
    name: str = "book_flight",
    key: str | None = None,
    safe_to_repeat: bool = False,
    arguments_masked: bool = False,
    arguments: dict[str, Any] | None = None,
) -> PendingCall:
    return PendingCall(
        call=ToolCall(id=call_id, name=name, arguments=arguments or {"flight": call_id}),
        idempotency_key=key,
        safe_to_repeat=safe_to_repeat,
        arguments_masked=arguments_masked,
    )


async def resolved(
    backend: StoreSet, tenant: str = TENANT
) -> tuple[Checkpoint, tuple[Message, ...]]:
    """The run's frontier and whole transcript as a fresh reader (a worker remembering nothing)
    resolves them from ``backend``; it must have a frontier."""
    reader = Checkpointer(backend.checkpoints, history=backend.history, commits=backend.commits)
    found = await reader.resumable(tenant, RUN)
    assert found is not None, f"run {RUN!r} of tenant {tenant!r} has no frontier"
    return found
