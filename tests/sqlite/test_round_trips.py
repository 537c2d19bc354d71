"""A resume costs SQLite two calls on the database's thread however long the transcript: the
frontier with every segment (one read transaction), then the run's records."""

from __future__ import annotations

from typing import Any

import pytest

from agentrun import Backend
from agentrun.backend import StoreSet
from agentrun.checkpointing import Checkpointer
from agentrun.messages import Message
from agentrun.resume import read_and_plan
from agentrun.stores.sqlite._database import Database
from tests.support.frontiers import frontier


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    made: list[str] = []
    for name in ("read", "write"):
        original = getattr(Database, name)

        async def counted(self: Any, operation: str, work: Any, _o: Any = original) -> Any:
            made.append(operation)
            return await _o(self, operation, work)

        monkeypatch.setattr(Database, name, counted)
    return made


async def test_a_resume_is_two_calls_whatever_the_transcript(
    backend: Backend, calls: list[str]
) -> None:
    assert isinstance(backend, StoreSet)
    checkpointer = Checkpointer(
        backend.checkpoints, history=backend.history, boundaries=backend.boundaries
    )
    messages: list[Message] = []
    for turn in range(40):  # past a compaction, so the chain holds both kinds of segment
        messages.append(Message.of("user", f"turn {turn}"))
        checkpoint = frontier(run_id="long", messages=tuple(messages), tenant="t", fence=1)
        assert await checkpointer.write(checkpoint) is not None, checkpointer.last_error
    calls.clear()
    fresh = Checkpointer(
        backend.checkpoints, history=backend.history, boundaries=backend.boundaries
    )
    _, loaded, _ = await read_and_plan(fresh, backend.idempotency, "t", "long")
    assert loaded == tuple(messages)
    assert len(calls) == 2, calls  # frontier and segments; the run's records
