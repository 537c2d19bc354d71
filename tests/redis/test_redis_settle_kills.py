"""Payments runs on a Redis server and a Redis Cluster, workers SIGKILLed at random, every
undecidable call settled by replaying it with its key, each order charged once
(``tests.support.settle_kills``)."""

from __future__ import annotations

import pytest

from agentrun import Backend
from tests.support.settle_kills import kill_settle_and_resume


@pytest.mark.parametrize(
    ("runs", "seed"),
    [
        pytest.param(8, 2, id="8-runs"),
        pytest.param(40, 8, id="40-runs", marks=pytest.mark.slow),
    ],
)
async def test_killed_runs_are_settled_without_a_person(
    redis_url: str, backend: Backend, runs: int, seed: int
) -> None:
    await kill_settle_and_resume(redis_url, backend, runs=runs, seed=seed)
