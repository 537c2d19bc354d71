"""A boundary costs PostgreSQL one statement, one round trip; a resume two, however long.

Statements are counted on asyncpg's connection, below the stores, so anything the pool sends
besides the stores' own statements (a reset on release) is counted too.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from agentrun import Backend
from agentrun.backend import StoreSet
from agentrun.boundary import BoundaryCommit, Charge
from agentrun.checkpointing import Checkpointer
from agentrun.messages import Message
from agentrun.resume import read_and_plan
from tests.support.frontiers import frontier

SENDING = ("execute", "fetch", "fetchrow", "fetchval")


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    sent: list[str] = []
    for name in SENDING:
        original = getattr(asyncpg.connection.Connection, name)

        async def counted(self: Any, query: str, *args: Any, _o: Any = original, **kw: Any) -> Any:
            sent.append(query.split()[0])
            return await _o(self, query, *args, **kw)

        monkeypatch.setattr(asyncpg.connection.Connection, name, counted)
    return sent


async def test_a_boundary_with_its_segment_and_charge_is_one_statement(
    backend: Backend, statements: list[str]
) -> None:
    assert isinstance(backend, StoreSet)
    assert backend.boundaries is not None
    commit = BoundaryCommit("t", "one-trip", 1, b"{}", b"segment", Charge("model:1", 5))
    await backend.boundaries.commit(commit)
    statements.clear()
    await backend.boundaries.commit(BoundaryCommit("t", "one-trip", 1, b"{}", b"s2", None))
    assert statements == ["WITH"]


async def test_a_resume_is_two_statements_whatever_the_transcript(
    backend: Backend, statements: list[str]
) -> None:
    assert isinstance(backend, StoreSet)
    checkpointer = Checkpointer(
        backend.checkpoints, history=backend.history, boundaries=backend.boundaries
    )
    messages: list[Message] = []
    for turn in range(30):
        messages.append(Message.of("user", f"turn {turn}"))
        checkpoint = frontier(run_id="long", messages=tuple(messages), tenant="t", fence=1)
        assert await checkpointer.write(checkpoint) is not None, checkpointer.last_error
    statements.clear()
    fresh = Checkpointer(
        backend.checkpoints, history=backend.history, boundaries=backend.boundaries
    )  # a worker that remembers nothing of the run, as on_backend builds it
    _, loaded, _ = await read_and_plan(fresh, backend.idempotency, "t", "long")
    assert loaded == tuple(messages)
    assert statements == ["SELECT", "SELECT"]  # frontier and segments; the run's records
