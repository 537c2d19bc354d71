"""A namespace's RunQuota caps its active runs: the others wait as ``Queued``, holding nothing,
and start in order as places free; editing or deleting the quota lets them go.

Two real replicas, a real API server and Redis. While the runs go, the places taken are read
from the store itself (where admission happens) and the runs holding a lease from the API
server, every 50 ms: neither may ever be over the quota's cap.
"""

from __future__ import annotations

import asyncio
import json
import re
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.agentruns import get_run, run_manifest
from tests.support.kube import Kube
from tests.support.operator import Operators, wait_for
from tests.support.redis_server import RedisServer

from agentrun._quotas import Spending
from agentrun.operator._admission import TENANT, window_of
from agentrun.operator._quota_resource import parse_quota
from agentrun.stores import open_backend

RUNS = 6


def _quota(kube: Kube, spec: str, name: str = "team") -> None:
    manifest = textwrap.dedent(f"""\
        apiVersion: agentrun.dev/v1alpha1
        kind: RunQuota
        metadata:
          name: {name}
        spec:
        """) + textwrap.indent(textwrap.dedent(spec), "  ")
    kube.kubectl("apply", "-f", "-", stdin=manifest)


def _runs(kube: Kube, prefix: str) -> list[dict[str, Any]]:
    listed = json.loads(kube.kubectl("get", "agentruns", "-o", "json").stdout)["items"]
    return [run for run in listed if run["metadata"]["name"].startswith(prefix)]


def _reason(run: dict[str, Any]) -> str | None:
    for condition in (run.get("status") or {}).get("conditions") or ():
        if condition["type"] == "Succeeded":
            return str(condition["reason"])
    return None


def _count(kube: Kube, prefix: str, reason: str) -> int:
    return sum(_reason(run) == reason for run in _runs(kube, prefix))


def _quota_metrics(operators: Operators, namespace: str, quota: str) -> list[dict[str, float]]:
    """Each replica's ``agentrun_quota_*`` gauges of the quota, by name without the prefix."""
    sample = re.compile(
        rf'^agentrun_quota_(\w+)\{{namespace="{re.escape(namespace)}",'
        rf'runquota="{re.escape(quota)}"\}} (\S+)$',
        re.MULTILINE,
    )
    return [
        {name: float(value) for name, value in sample.findall(replica.metrics())}
        for replica in operators.replicas
    ]


def _create(kube: Kube, prefix: str, count: int, agent: str = "patient") -> None:
    kube.kubectl(
        "apply",
        "-f",
        "-",
        stdin="".join(f"---\n{run_manifest(f'{prefix}-{i}', agent)}" for i in range(count)),
    )


class _Sampler:
    """The most places taken in the store, and the most runs the API server shows held, seen
    at any sample."""

    def __init__(self, redis: RedisServer, kube: Kube, prefix: str) -> None:
        self.redis, self.kube, self.prefix = redis, kube, prefix
        self.most_places = self.most_held = 0
        self._done = threading.Event()

    def _run(self) -> None:
        asyncio.run(self._sample())

    async def _sample(self) -> None:
        async with await open_backend(self.redis.url) as backend:
            while not self._done.is_set():
                places = await backend.quotas.admitted(TENANT, self.kube.namespace)
                held = sum(
                    bool(((run.get("status") or {}).get("lease") or {}).get("holder"))
                    for run in _runs(self.kube, self.prefix)
                )
                self.most_places = max(self.most_places, len(places))
                self.most_held = max(self.most_held, held)
                await asyncio.sleep(0.05)

    @contextmanager
    def sampling(self) -> Iterator[_Sampler]:
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._done.set()
            thread.join(10)


def test_runs_over_the_quota_wait_queued_and_start_in_order(
    kube: Kube, operators: Operators, redis: RedisServer
) -> None:
    _quota(kube, "maxActiveRuns: 2\n")
    with _Sampler(redis, kube, "capped").sampling() as sampler:
        _create(kube, "capped", RUNS)
        wait_for(
            "runs to queue behind the two at work",
            lambda: _count(kube, "capped", "Queued") >= RUNS - 2 - 1,
            60,
            operators.logs,
        )
        queued = [run for run in _runs(kube, "capped") if _reason(run) == "Queued"]
        message = next(
            c["message"] for c in queued[0]["status"]["conditions"] if c["type"] == "Succeeded"
        )
        assert "RunQuota team" in message, message
        assert "in the queue" in message, message
        # Waiting, a queued run holds no lease and has made no call.
        assert all(not (run["status"].get("lease") or {}).get("holder") for run in queued)
        # Every replica shows the quota as its status does, the one that writes it or not.
        wait_for(
            "every replica's metrics to show runs queued on the quota",
            lambda: all(
                shown.get("queued_runs", 0) >= 1 and shown.get("max_active_runs") == 2
                for shown in _quota_metrics(operators, kube.namespace, "team")
            ),
            15,
            operators.logs,
        )
        wait_for(
            "every run to complete",
            lambda: _count(kube, "capped", "Completed") == RUNS,
            120,
            operators.logs,
        )
    assert sampler.most_places <= 2, sampler.most_places
    assert sampler.most_held <= 2, sampler.most_held
    assert sampler.most_places == 2  # the cap was used, not just kept
    quota = json.loads(kube.kubectl("get", "runquota", "team", "-o", "json").stdout)
    wait_for(
        "the quota's status to show nothing active or queued",
        lambda: (
            (
                s := json.loads(kube.kubectl("get", "runquota", "team", "-o", "json").stdout)[
                    "status"
                ]
            )["active"]
            == 0
            and s["queued"] == 0
        ),
        30,
        operators.logs,
    )
    assert quota["status"]["activeSummary"].endswith("/2")
    idle = {"active_runs": 0.0, "max_active_runs": 2.0, "queued_runs": 0.0}
    wait_for(
        "every replica's metrics to show nothing active or queued",
        lambda: _quota_metrics(operators, kube.namespace, "team") == [idle, idle],
        15,
        operators.logs,
    )
    kube.kubectl("delete", "runquota", "team")
    wait_for(
        "the deleted quota to leave every replica's metrics",
        lambda: _quota_metrics(operators, kube.namespace, "team") == [{}, {}],
        15,
        operators.logs,
    )


def test_raising_then_deleting_the_quota_lets_queued_runs_go(
    kube: Kube, operators: Operators
) -> None:
    _quota(kube, "maxActiveRuns: 0\n", name="freeze")
    _create(kube, "frozen", 4)
    wait_for(
        "all four runs to queue",
        lambda: _count(kube, "frozen", "Queued") == 4,
        60,
        operators.logs,
    )
    time.sleep(3)  # nothing lets them go while the quota stands
    assert _count(kube, "frozen", "Queued") == 4
    assert not any(get_run(kube, f"frozen-{i}")["status"].get("iteration") for i in range(4))
    _quota(kube, "maxActiveRuns: 1\n", name="freeze")
    wait_for(
        "one run to start once the quota allows one",
        lambda: _count(kube, "frozen", "Queued") <= 3,
        30,
        operators.logs,
    )
    kube.kubectl("delete", "runquota", "freeze")
    wait_for(
        "every run to complete once the quota is gone",
        lambda: _count(kube, "frozen", "Completed") == 4,
        90,
        operators.logs,
    )


def _spending(redis: RedisServer, kube: Kube, name: str) -> Spending:
    """What the store counts as spent in the quota's current window."""
    body = json.loads(kube.kubectl("get", "runquota", name, "-o", "json").stdout)
    budget = parse_quota(body).budget
    assert budget is not None

    async def read() -> Spending:
        async with await open_backend(redis.url) as backend:
            return await backend.quotas.spending(TENANT, kube.namespace, window_of(budget))

    return asyncio.run(read())


CALL_TOKENS = 110
"""What each of ``patient``'s model calls uses (``tests.kube.operator_agents``); its answer 55."""


def test_a_spent_budget_pauses_runs_at_their_next_call_and_a_raised_one_carries_them_on(
    kube: Kube, operators: Operators, redis: RedisServer
) -> None:
    _quota(kube, "budget:\n  maxTokens: 500\nwhenSpent: Pause\n", name="pause")
    _create(kube, "paused", 3)
    wait_for(
        "a run to stop on the spent budget",
        lambda: _count(kube, "paused", "QuotaSpent") >= 1,
        60,
        operators.logs,
    )
    wait_for(
        "no run to be at work",
        lambda: (
            not any(
                (run["status"].get("lease") or {}).get("holder") for run in _runs(kube, "paused")
            )
        ),
        30,
        operators.logs,
    )
    spent = _spending(redis, kube, "pause")
    # Past the budget by no more than what each run's call cost beyond its reservation.
    assert spent.spent.tokens <= 500 + 3 * CALL_TOKENS, spent
    assert spent.reserved.tokens == 0, spent  # every reservation settled
    assert _count(kube, "paused", "Completed") < 3
    wait_for(
        "every replica's metrics to show the budget and what is spent of it",
        lambda: all(
            shown.get("budget_tokens") == 500 and shown.get("spent_tokens") == spent.spent.tokens
            for shown in _quota_metrics(operators, kube.namespace, "pause")
        ),
        15,
        operators.logs,
    )
    _quota(kube, "budget:\n  maxTokens: 100000\nwhenSpent: Pause\n", name="pause")
    wait_for(
        "the paused runs to carry on and complete",
        lambda: _count(kube, "paused", "Completed") == 3,
        90,
        operators.logs,
    )
    # Carried on from their checkpoints: no call was made twice.
    assert all(get_run(kube, f"paused-{i}")["status"].get("iteration") == 4 for i in range(3)), [
        get_run(kube, f"paused-{i}")["status"] for i in range(3)
    ]
    kube.kubectl("delete", "runquota", "pause")


def test_a_spent_budget_queues_runs_that_have_not_started(
    kube: Kube, operators: Operators, redis: RedisServer
) -> None:
    # The namespace's spend in this window so far (the other tests' runs) counts: 300 more.
    _quota(kube, "budget:\n  maxTokens: 1000000\nwhenSpent: Queue\n", name="queue")
    already = _spending(redis, kube, "queue").spent.tokens
    _quota(kube, f"budget:\n  maxTokens: {already + 300}\nwhenSpent: Queue\n", name="queue")
    _create(kube, "early", 1)
    wait_for(
        "the first run to complete (its calls counted, not refused)",
        lambda: _count(kube, "early", "Completed") == 1,
        60,
        operators.logs,
    )
    _create(kube, "late", 2)
    wait_for(
        "runs created after the budget was spent to queue",
        lambda: _count(kube, "late", "Queued") == 2,
        60,
        operators.logs,
    )
    message = next(
        c["message"]
        for c in get_run(kube, "late-0")["status"]["conditions"]
        if c["type"] == "Succeeded"
    )
    assert "budget" in message, message
    kube.kubectl("delete", "runquota", "queue")
    wait_for(
        "the queued runs to start once the quota is gone",
        lambda: _count(kube, "late", "Completed") == 2,
        90,
        operators.logs,
    )


def test_lowering_the_quota_stops_no_run_and_starts_none_until_under_it(
    kube: Kube, operators: Operators
) -> None:
    _quota(kube, "maxActiveRuns: 3\n", name="lower")
    _create(kube, "wide", 3)

    def held(prefix: str) -> int:
        return sum(
            bool((run["status"].get("lease") or {}).get("holder")) for run in _runs(kube, prefix)
        )

    wait_for("three runs at work", lambda: held("wide") == 3, 60, operators.logs)
    _quota(kube, "maxActiveRuns: 1\n", name="lower")
    _create(kube, "narrow", 2)
    # The three at work go on; the two new ones wait while more than one is active.
    while held("wide") > 1:
        assert held("narrow") == 0, [run["status"] for run in _runs(kube, "narrow")]
        time.sleep(0.2)
    wait_for(
        "every run to complete",
        lambda: _count(kube, "wide", "Completed") + _count(kube, "narrow", "Completed") == 5,
        120,
        operators.logs,
    )
    kube.kubectl("delete", "runquota", "lower")
