"""A resume costs Redis two round trips however long the transcript: one script reading the
frontier with every segment, then the run's records. Round trips are counted on the driver's
connections, below the stores."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio.connection as redis_connection

from agentrun import Backend
from agentrun.backend import StoreSet
from agentrun.checkpointing import Checkpointer
from agentrun.messages import Message
from agentrun.resume import read_and_plan
from tests.support.frontiers import frontier


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    writes: list[int] = []
    original = redis_connection.AbstractConnection.send_packed_command

    async def counted(self: Any, command: Any, *args: Any, **kw: Any) -> Any:
        writes.append(1)
        return await original(self, command, *args, **kw)

    monkeypatch.setattr(redis_connection.AbstractConnection, "send_packed_command", counted)
    return writes


async def test_a_resume_is_two_round_trips_whatever_the_transcript(
    backend: Backend, sent: list[int]
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

    async def resume() -> tuple[Message, ...]:
        fresh = Checkpointer(
            backend.checkpoints, history=backend.history, boundaries=backend.boundaries
        )
        _, loaded, _ = await read_and_plan(fresh, backend.idempotency, "t", "long")
        return loaded

    assert await resume() == tuple(messages)  # the first may load the scripts (NOSCRIPT)
    sent.clear()
    assert await resume() == tuple(messages)
    assert len(sent) == 2  # frontier and segments; the run's records
