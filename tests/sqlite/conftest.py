"""Fixtures for the SQLite store tests: a fresh database file per test, and worker processes.

SQLite needs no server: a file in ``tmp_path`` is a whole database, cheap enough to make one per
test. Cross-process behaviour is exercised with real OS processes (``worker.py``) that open the
same file.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from agentrun import Backend, open_backend
from tests.sqlite.worker_process import WorkerProcess


@pytest.fixture
def database_file(tmp_path: Path) -> Path:
    return tmp_path / "state" / "agentrun.db"


@pytest.fixture
def url(database_file: Path) -> str:
    return f"sqlite:///{database_file}"


@pytest.fixture
async def backend(url: str) -> AsyncIterator[Backend]:
    async with await open_backend(url) as opened:
        yield opened


@pytest.fixture
def spawn(url: str) -> Iterator[Callable[[], WorkerProcess]]:
    """Start a worker process on the test's database; every one started is killed at the end."""
    started: list[WorkerProcess] = []

    def start() -> WorkerProcess:
        started.append(WorkerProcess(url))
        return started[-1]

    try:
        yield start
    finally:
        for worker in started:
            worker.kill()
