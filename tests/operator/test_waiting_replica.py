"""The replica taking up a run whose holder stopped beating waits for its lease without asking the
store at every watch event of the run.

The worker waits for the holder's lease to go (``RunWorker._wait_for_lease``); the holder may
still be at work (its heartbeat lapsed while the store was away, say). The holder's progress
writes reach it as watch events that say nothing of the lease; asking the store at each of them
cost the waiting replica a twentieth of its CPU at 1,000 runs. It asks when the watch shows the
lease change, when the lease would lapse and every poll interval; and it still comes out at
once when the run is over. The store is a real one (SQLite); the watch's events are delivered
as kopf delivers them: the live body updated in place, then the news.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from agentrun import open_backend
from agentrun._backend import Backend
from agentrun._leases import RunLease
from agentrun.operator._kubeapi import KubeApi
from agentrun.operator._news import News
from agentrun.operator._worker import RunWorker
from tests.support.workers import lone_worker

TENANT, RUN_ID = "team-a", "8b4c"
POLL = 5.0
"""Long enough that no question of the test's few seconds is the poll's."""


class Counted:
    """The store's ``leases.held``, with its questions counted."""

    def __init__(self, held: Callable[[str, str], Awaitable[RunLease | None]]) -> None:
        self.held = held
        self.asked = 0

    async def __call__(self, tenant: str, run_id: str) -> RunLease | None:
        self.asked += 1
        return await self.held(tenant, run_id)


def _worker(backend: Backend, body: dict[str, Any], news: News, poll: float = POLL) -> RunWorker:
    api = KubeApi(client.ApiClient(), threads=1)  # asked nothing: the test would fail on it
    worker = lone_worker(backend, api, body, news, poll=poll)
    worker.tenant = TENANT
    return worker


def _event(body: dict[str, Any], news: News, status: dict[str, Any]) -> None:
    body["status"] = status
    news.arrived("MODIFIED")


def _run_body(status: dict[str, Any]) -> dict[str, Any]:
    """The run as the waiting replica's watch shows it, with ``status``."""
    return {
        "metadata": {"namespace": TENANT, "name": "run", "uid": RUN_ID},
        "spec": {"agent": "quick", "input": "go"},
        "status": dict(status),
    }


async def test_progress_events_do_not_send_the_waiting_replica_to_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await open_backend(f"sqlite:///{tmp_path / 'state.db'}") as backend:
        lease = await backend.leases.acquire(TENANT, RUN_ID, "replica-a", ttl=60)
        running = {"lease": {"holder": "replica-a", "fence": lease.fence}, "iteration": 0}
        body = _run_body(running)
        news = News()
        worker = _worker(backend, body, news)
        counting = Counted(backend.leases.held)
        monkeypatch.setattr(backend.leases, "held", counting)
        waiting = asyncio.create_task(worker._wait_for_lease())
        await asyncio.sleep(0.05)
        for iteration in range(1, 11):  # the holder's progress: ten status writes
            _event(body, news, {**running, "iteration": iteration})
            await asyncio.sleep(0.02)
        assert counting.asked == 1
        assert not waiting.done()

        # The holder stops: it clears itself from the status, then lets the lease go.
        await backend.leases.release(lease)
        _event(body, news, {**running, "lease": {"fence": lease.fence}})
        await asyncio.wait_for(waiting, timeout=1)
        assert counting.asked == 2


async def test_a_run_shown_over_ends_the_wait_at_once(tmp_path: Path) -> None:
    async with await open_backend(f"sqlite:///{tmp_path / 'state.db'}") as backend:
        lease = await backend.leases.acquire(TENANT, RUN_ID, "replica-a", ttl=60)
        held = {"lease": {"holder": "replica-a", "fence": lease.fence}}
        body = _run_body(held)
        news = News()
        waiting = asyncio.create_task(_worker(backend, body, news)._wait_for_lease())
        await asyncio.sleep(0.05)
        finished = {"type": "Succeeded", "status": "True", "reason": "Completed"}
        _event(body, news, {**held, "conditions": [finished]})
        await asyncio.wait_for(waiting, timeout=1)


async def test_while_nothing_changes_the_waiting_replica_asks_less_and_less_often(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The poll is the net for a holder that let go while its last status write failed; a long
    run's waiting replica asks after a poll interval, then twice as long each time."""
    async with await open_backend(f"sqlite:///{tmp_path / 'state.db'}") as backend:
        lease = await backend.leases.acquire(TENANT, RUN_ID, "replica-a", ttl=60)
        held = {"lease": {"holder": "replica-a", "fence": lease.fence}}
        body = _run_body(held)
        news = News()
        counting = Counted(backend.leases.held)
        monkeypatch.setattr(backend.leases, "held", counting)
        waiting = asyncio.create_task(_worker(backend, body, news, poll=0.1)._wait_for_lease())
        await asyncio.sleep(1.6)  # asks at 0, 0.1, 0.3, 0.7 and 1.5 s; every 0.1 s was 16
        assert 3 <= counting.asked <= 6
        # The holder let go, and its last status write never showed: the net finds it.
        await backend.leases.release(lease)
        await asyncio.wait_for(waiting, timeout=5)
