"""The replica whose claim of a run is refused waits for the winner's claim on its watch.

Both replicas start a run's worker at its ``ADDED`` event and both send the claim; one lands,
the other's ``test`` fails. The loser then needs the run as it stands (whose claim it is), and
the watch brings it: on a busy replica more than a poll interval later, after which it used to
read the object, a ``GET`` for nearly every run at 1,000 runs. It waits for the watch up to a
lease TTL instead; a real API server refuses the claim here, the watch's view is delivered as
kopf delivers it (the live body replaced, then the news).
"""

from __future__ import annotations

import asyncio
import json
import logging
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from tests.kube.test_status_writer import CountingApi
from tests.support.kube import Kube

from agentrun.operator.agent_resolver import AgentResolver
from agentrun.operator.claims import claim, claim_patch
from agentrun.operator.config import DEFAULT_CONTROLLER, OperatorConfig
from agentrun.operator.context import OperatorContext
from agentrun.operator.metrics import Metrics
from agentrun.operator.news import News
from agentrun.operator.slots import RunSlots
from agentrun.operator.worker import RunWorker
from agentrun.stores import open_backend

POLL = 0.5
LATE = 3 * POLL
"""When the watch brings the winner's claim: later than a poll interval."""


@pytest.fixture
def api(kube: Kube) -> Iterator[CountingApi]:
    counting = CountingApi(kube)
    try:
        yield counting
    finally:
        counting.close()


def _run(kube: Kube, name: str) -> dict[str, Any]:
    kube.kubectl(
        "apply",
        "-f",
        "-",
        stdin=textwrap.dedent(f"""\
            apiVersion: agentrun.dev/v1alpha1
            kind: AgentRun
            metadata:
              name: {name}
            spec:
              agent: booking
              input: go
            """),
    )
    return dict(json.loads(kube.kubectl("get", "agentrun", name, "-o", "json").stdout))


async def test_a_refused_claim_waits_for_the_watch_not_a_read(kube: Kube, api: CountingApi) -> None:
    body = _run(kube, "raced")
    winner = await api.patch_status(kube.namespace, "raced", claim_patch(body, DEFAULT_CONTROLLER))
    api.requests.clear()
    async with await open_backend("memory://") as backend:
        config = OperatorConfig(
            store_url="memory://", worker_id="replica-b", metrics_port=0, poll_interval=POLL
        )
        context = OperatorContext(
            config=config,
            backend=backend,
            api=api,
            metrics=Metrics(),
            agents={},
            resolver=AgentResolver(api, {}),
            slots=RunSlots(0),
        )
        news = News()
        worker = RunWorker(context, body, lambda: False, logging.getLogger("test"), news)

        async def watch_brings_the_claim() -> None:
            await asyncio.sleep(LATE)
            body.update(winner)
            news.arrived("MODIFIED")

        delivering = asyncio.create_task(watch_brings_the_claim())
        claimed = await claim(api, body, DEFAULT_CONTROLLER, worker._claim_seen_again)
        await delivering
    assert api.requests == ["PATCH"]  # the refused claim, and no read after it
    assert claimed.owner == DEFAULT_CONTROLLER
    assert not claimed.written  # the winner's: this replica lets it start the run
