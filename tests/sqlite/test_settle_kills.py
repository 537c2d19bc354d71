"""Payments runs on an SQLite file, workers SIGKILLed at random, every undecidable call settled
by replaying it with its key, each order charged once (``tests.support.settle_kills``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrun import open_backend
from tests.support.settle_kills import kill_settle_and_resume


@pytest.mark.parametrize(
    ("runs", "seed"),
    [
        pytest.param(8, 1, id="8-runs"),
        pytest.param(40, 7, id="40-runs", marks=pytest.mark.slow),
    ],
)
async def test_killed_runs_are_settled_without_a_person(
    tmp_path: Path, runs: int, seed: int
) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    async with await open_backend(url, create=True) as backend:
        await kill_settle_and_resume(url, backend, runs=runs, seed=seed)
