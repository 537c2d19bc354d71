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
from typing import Any

from tests.support.agentruns import create_run
from tests.support.counting_api import CountingApi
from tests.support.kube import Kube
from tests.support.workers import lone_worker

from agentrun.operator._claims import claim, claim_patch
from agentrun.operator._config import DEFAULT_CONTROLLER
from agentrun.operator._news import News
from agentrun.stores import open_backend

POLL = 0.5
LATE = 3 * POLL
"""When the watch brings the winner's claim: later than a poll interval."""


def _run(kube: Kube, name: str) -> dict[str, Any]:
    create_run(kube, name)
    return dict(json.loads(kube.kubectl("get", "agentrun", name, "-o", "json").stdout))


async def test_a_refused_claim_waits_for_the_watch_not_a_read(kube: Kube, api: CountingApi) -> None:
    body = _run(kube, "raced")
    winner = await api.patch_status(kube.namespace, "raced", claim_patch(body, DEFAULT_CONTROLLER))
    api.requests.clear()
    async with await open_backend("memory://") as backend:
        news = News()
        worker = lone_worker(backend, api, body, news, poll=POLL)

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
