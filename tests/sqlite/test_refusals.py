"""What SQLite refuses is not retried, and what keeps it busy is (``classify.SQLITE``).

A refusal is a row the database will never take, however often it is asked: here a trigger an
operator put on the checkpoints table, and a value a STRICT column cannot hold. Reported
retryable, a caller retried it for ever. A write that waited out another process's lock is the
opposite: the same write succeeds once the lock is gone.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentrun import Backend, open_backend
from agentrun._errors import StoreRefusedError, StoreUnavailableError


async def test_a_trigger_that_refuses_the_row_is_a_refusal(
    backend: Backend, database_file: Path
) -> None:
    with sqlite3.connect(database_file) as connection:
        connection.execute(
            "CREATE TRIGGER frozen BEFORE INSERT ON agentrun_checkpoints "
            "WHEN NEW.tenant = 'frozen' BEGIN SELECT RAISE(ABORT, 'the tenant is frozen'); END"
        )
    with pytest.raises(StoreRefusedError, match="the tenant is frozen") as refused:
        await backend.checkpoints.put("frozen", "run-1", b"{}", fence=1)
    assert not refused.value.retryable
    assert await backend.checkpoints.latest("frozen", "run-1") is None
    await backend.checkpoints.put("acme", "run-1", b"{}", fence=1)  # other rows still go in


async def test_a_value_the_column_cannot_hold_is_a_refusal(
    backend: Backend, database_file: Path
) -> None:
    with sqlite3.connect(database_file) as connection:
        connection.execute(
            "INSERT INTO agentrun_spent (tenant, run_id, micros) VALUES ('a', 'r', 1)"
        )
        connection.execute(
            "CREATE TRIGGER widened BEFORE UPDATE ON agentrun_spent "
            "BEGIN UPDATE agentrun_spent SET micros = 'lots' WHERE tenant = 'a'; END"
        )
    with pytest.raises(StoreRefusedError) as refused:
        await backend.ledger.charge("a", "r", "c-1", 5, budget=None, fence=1)
    assert not refused.value.retryable


async def test_a_lock_held_past_the_busy_timeout_is_retryable(database_file: Path) -> None:
    async with await open_backend(f"sqlite:///{database_file}?busy_timeout=50") as backend:
        holder = sqlite3.connect(database_file, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            with pytest.raises(StoreUnavailableError) as busy:
                await backend.checkpoints.put("acme", "run-1", b"{}", fence=1)
            assert busy.value.retryable
        finally:
            holder.close()
        await backend.checkpoints.put("acme", "run-1", b"{}", fence=1)
