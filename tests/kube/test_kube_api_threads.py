"""The operator's Kubernetes calls do not queue behind whatever fills the default executor.

The event loop's default executor holds ``min(32, cores + 4)`` threads — 6 on a 2-core replica —
and anything may fill it: a tool's blocking work, ``asyncio.to_thread`` in a library. A fenced
status write that waited there would be late by as long as the slowest of them. ``KubeApi`` has a
pool of its own; this fills the default executor with sleeping calls and times a read and a status
patch against the real API server meanwhile.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import urllib3
from kubernetes import client
from kubernetes.config import new_client_from_config
from tests.support.agentruns import apply_run
from tests.support.kube import Kube
from tests.support.ports import free_port

from agentrun.operator._kubeapi import KubeApi, Lane, Rejected
from agentrun.operator._metrics import Metrics

BLOCKED_FOR = 3.0


def test_kube_calls_do_not_wait_for_a_full_default_executor(kube: Kube) -> None:
    apply_run(kube, "unblocked", "nobody")

    async def measure() -> float:
        # The client's loader is untyped; it returns an ApiClient.
        api = KubeApi(new_client_from_config(config_file=str(kube.kubeconfig)))  # type: ignore[no-untyped-call]
        try:
            await api.namespace_labels(kube.namespace)  # connections made, threads started
            blockers = [
                asyncio.create_task(asyncio.to_thread(time.sleep, BLOCKED_FOR)) for _ in range(64)
            ]
            await asyncio.sleep(0.1)
            started = time.monotonic()
            assert await api.get(kube.namespace, "unblocked") is not None
            await api.patch_status(
                kube.namespace,
                "unblocked",
                [{"op": "add", "path": "/status", "value": {"iteration": 0}}],
            )
            took = time.monotonic() - started
            await asyncio.gather(*blockers)
            return took
        finally:
            api.close()

    took = asyncio.run(measure())
    assert took < BLOCKED_FOR / 3, f"a read and a status patch took {took:.2f}s"


def test_status_patches_and_each_wait_for_a_thread_are_timed(kube: Kube) -> None:
    """What ``make bench-agents`` reads to tell a slow API server from a pool too small."""
    apply_run(kube, "timed", "nobody")
    metrics = Metrics()

    async def patch() -> None:
        api = KubeApi(new_client_from_config(config_file=str(kube.kubeconfig)), metrics)  # type: ignore[no-untyped-call]
        try:
            assert await api.get(kube.namespace, "timed") is not None
            await api.patch_status(
                kube.namespace, "timed", [{"op": "add", "path": "/status", "value": {}}]
            )
        finally:
            api.close()

    asyncio.run(patch())
    sample = metrics.registry.get_sample_value
    other = {"lane": "other"}
    assert sample("agentrun_status_write_seconds_count", other) == 1
    assert 0 < (sample("agentrun_status_write_seconds_sum", other) or 0) < 5
    assert sample("agentrun_kube_pool_wait_seconds_count", other) == 2


def test_a_holders_status_write_goes_before_the_starts_queued_ahead_of_it(kube: Kube) -> None:
    """With every thread busy and reads for runs that have not started queued, a lease holder's
    write takes the next free thread: it waits for one call, not for the whole queue."""
    apply_run(kube, "held", "nobody")
    order: list[str] = []

    async def race() -> None:
        api = KubeApi(new_client_from_config(config_file=str(kube.kubeconfig)), threads=1)  # type: ignore[no-untyped-call]
        try:
            busy = asyncio.create_task(api._off_loop(lambda: time.sleep(0.5)))
            await asyncio.sleep(0.1)  # the one thread taken

            async def start(index: int) -> None:
                await api.get(kube.namespace, "held")
                order.append(f"start {index}")

            async def write() -> None:
                await api.patch_status(
                    kube.namespace,
                    "held",
                    [{"op": "add", "path": "/status", "value": {"iteration": 1}}],
                    Lane.HOLDER,
                )
                order.append("write")

            starts = [asyncio.create_task(start(i)) for i in range(5)]
            await asyncio.sleep(0.05)  # queued before the write
            await asyncio.gather(busy, write(), *starts)
        finally:
            api.close()

    asyncio.run(race())
    assert order == ["write", *(f"start {i}" for i in range(5))], order


def test_only_the_api_servers_answers_feed_the_start_limit(kube: Kube) -> None:
    """A refused write is an answer and says how busy the API server is; a connection refused
    at once says nothing of that, and must not make room for more runs."""
    apply_run(kube, "answered", "nobody")
    heard: list[float] = []
    refusing = [{"op": "test", "path": "/metadata/name", "value": "another"}]

    async def write(api: KubeApi) -> None:
        api.holder_wrote = heard.append
        try:
            await api.patch_status(kube.namespace, "answered", refusing, Lane.HOLDER)
        finally:
            api.close()

    served = KubeApi(new_client_from_config(config_file=str(kube.kubeconfig)))  # type: ignore[no-untyped-call]
    with pytest.raises(Rejected):
        asyncio.run(write(served))
    assert len(heard) == 1
    nowhere = client.Configuration()
    nowhere.host = f"http://127.0.0.1:{free_port()}"
    nowhere.retries = False
    with pytest.raises(urllib3.exceptions.HTTPError):
        asyncio.run(write(KubeApi(client.ApiClient(nowhere))))
    assert len(heard) == 1
