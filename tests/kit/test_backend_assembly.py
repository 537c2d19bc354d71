"""``closed_on_failure``: the one way an adapter's ``open_backend`` gives its connection back
when a check made before the stores are handed out fails (SQLite's schema, PostgreSQL's
``verify``, Redis's eviction policy)."""

from __future__ import annotations

import asyncio

import pytest

from agentrun._backend import closed_on_failure


class Connection:
    def __init__(self) -> None:
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1


async def test_a_check_that_passes_leaves_the_connection_open() -> None:
    connection = Connection()
    async with closed_on_failure(connection.close):
        pass
    assert connection.closed == 0


async def test_a_check_that_fails_closes_the_connection_and_the_error_goes_on() -> None:
    connection = Connection()
    with pytest.raises(RuntimeError, match="schema"):
        async with closed_on_failure(connection.close):
            raise RuntimeError("schema refused")
    assert connection.closed == 1


async def test_a_check_cancelled_closes_the_connection_and_stays_cancelled() -> None:
    connection = Connection()
    started = asyncio.Event()

    async def opening() -> None:
        async with closed_on_failure(connection.close):
            started.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(opening())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert connection.closed == 1
