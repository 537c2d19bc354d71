"""The SQLite store between real OS processes: races, crashes and a lock held too long.

Each worker is a separate Python process with its own connection to the test's file, so these
tests exercise SQLite's file locking and WAL recovery, not anything the kit does in memory.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agentrun import open_backend
from agentrun._errors import StaleFenceError, StoreUnavailableError
from tests.sqlite.worker_process import WorkerProcess

RACERS = 4
ROUNDS = 5


def _race(racers: list[WorkerProcess], command: dict[str, object]) -> list[dict[str, object]]:
    """Send every racer ``command`` (each with its own holder) to run at the same instant."""
    at = time.time() + 0.3
    for index, racer in enumerate(racers):
        racer.send({**command, "holder": f"process-{index}", "at": at})
    return [racer.answer() for racer in racers]


def test_processes_racing_for_one_lease_yield_one_winner(
    spawn: Callable[[], WorkerProcess],
) -> None:
    racers = [spawn() for _ in range(RACERS)]
    for round_ in range(ROUNDS):
        answers = _race(racers, {"op": "acquire", "tenant": "acme", "run": f"run-{round_}"})
        winners = [answer for answer in answers if answer["won"]]
        assert len(winners) == 1, answers
        assert all(answer["holder"] == winners[0]["holder"] for answer in answers), answers
        assert winners[0]["fence"] == 1


def test_processes_racing_for_one_key_yield_one_winner(
    spawn: Callable[[], WorkerProcess],
) -> None:
    racers = [spawn() for _ in range(RACERS)]
    for round_ in range(ROUNDS):
        answers = _race(
            racers, {"op": "begin", "tenant": "acme", "run": "run", "key": f"k{round_}"}
        )
        winners = [answer for answer in answers if answer["won"]]
        assert len(winners) == 1, answers
        assert all(answer["holder"] == winners[0]["holder"] for answer in answers), answers


async def test_a_lease_taken_in_one_process_fences_writes_in_another(
    spawn: Callable[[], WorkerProcess], url: str
) -> None:
    backend = await open_backend(url)
    try:
        await backend.checkpoints.put("acme", "run", b'{"by": "old"}', fence=3)
        taken = spawn().ask({"op": "acquire", "tenant": "acme", "run": "run", "holder": "new"})
        assert taken["fence"] == 4
        with pytest.raises(StaleFenceError) as caught:
            await backend.checkpoints.put("acme", "run", b'{"by": "old"}', fence=3)
        assert (caught.value.fence, caught.value.current) == (3, 4)
        with pytest.raises(StaleFenceError):
            await backend.idempotency.begin("acme", "run", "k", holder="old", fence=3)
    finally:
        await backend.close()


async def test_a_checkpoint_survives_sigkill_of_its_writer(
    spawn: Callable[[], WorkerProcess], url: str, database_file: Path
) -> None:
    payload = json.dumps({"format_version": 1, "pad": "x" * 65536})
    writer = spawn()
    assert writer.ask(
        {"op": "put", "tenant": "acme", "run": "run", "payload": payload, "fence": 1}
    ) == {"written": True}
    assert writer.sigkill() == -signal.SIGKILL
    wal = Path(f"{database_file}-wal")
    assert await asyncio.to_thread(wal.exists), "the write should be waiting in the WAL"
    backend = await open_backend(url)
    try:
        assert await backend.checkpoints.latest("acme", "run") == payload.encode()
    finally:
        await backend.close()


async def test_a_lock_held_too_long_is_a_retryable_error_not_a_hang(
    spawn: Callable[[], WorkerProcess], url: str
) -> None:
    backend = await open_backend(f"{url}?busy_timeout=300")
    try:
        await backend.checkpoints.put("acme", "run", b'{"n": 1}', fence=1)
        locker = spawn()
        assert locker.ask({"op": "lock"}) == {"locked": True}
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as caught:
            await backend.checkpoints.put("acme", "run", b'{"n": 2}', fence=1)
        waited = time.monotonic() - started
        assert caught.value.retryable
        assert "database is locked" in str(caught.value)
        assert 0.25 <= waited < 5, waited
        assert await backend.checkpoints.latest("acme", "run") == b'{"n": 1}', (
            "readers are not blocked by a writer in WAL mode"
        )
        locker.sigkill()
        await backend.checkpoints.put("acme", "run", b'{"n": 2}', fence=1)
        assert await backend.checkpoints.latest("acme", "run") == b'{"n": 2}'
    finally:
        await backend.close()
