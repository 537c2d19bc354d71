"""The lease holder's status writes against a real API server: one request each while nothing
else moved, and still exactly right when the spec moved or a newer holder took over.

No operator runs here: each test drives a ``StatusWriter`` by hand on an AgentRun of its own,
through a ``KubeApi`` that counts the requests it makes.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from tests.support.agentruns import create_run
from tests.support.counting_api import CountingApi
from tests.support.kube import Kube

from agentrun._outcomes import CHECKPOINTED, SUCCEEDED
from agentrun._redaction import Masker
from agentrun.operator import _conditions as c
from agentrun.operator._resource import AgentRunStatus
from agentrun.operator._status import PROGRESS_EVERY, StatusWriter, Superseded


def _status(kube: Kube, name: str) -> tuple[int, dict[str, Any]]:
    found = json.loads(kube.kubectl("get", "agentrun", name, "-o", "json").stdout)
    return int(found["metadata"]["generation"]), dict(found.get("status") or {})


def test_a_holders_writes_cost_one_request_each(kube: Kube, api: CountingApi) -> None:
    create_run(kube, "steady")
    writer = StatusWriter(api, kube.namespace, "steady", Masker.build())

    async def holding() -> None:
        await writer.take_over("replica-a", 7, resumed=False)
        api.requests.clear()
        for iteration in range(1, 6):
            await writer.write(
                AgentRunStatus(iteration=iteration),
                (c.update(c.WRITTEN, f"iteration {iteration}"),),
            )

    asyncio.run(holding())
    assert api.requests == ["PATCH"] * 5
    generation, status = _status(kube, "steady")
    assert status["iteration"] == 5
    assert status["lease"] == {"holder": "replica-a", "fence": 7}
    assert status["observedGeneration"] == generation
    checkpointed = c.find(status["conditions"], CHECKPOINTED)
    assert checkpointed is not None
    assert checkpointed["message"] == "iteration 5"


def test_a_spec_edit_between_writes_is_read_and_stamped(kube: Kube, api: CountingApi) -> None:
    create_run(kube, "edited")
    writer = StatusWriter(api, kube.namespace, "edited", Masker.build())

    async def take() -> None:
        await writer.take_over("replica-a", 3, resumed=False)

    async def write() -> None:
        api.requests.clear()
        await writer.write(AgentRunStatus(iteration=2), (c.update(c.RUNNING, "step 2"),))

    asyncio.run(take())
    before, _ = _status(kube, "edited")
    kube.kubectl("patch", "agentrun", "edited", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    asyncio.run(write())
    # The generation the patch was computed from had moved: refused, read, written again.
    assert api.requests == ["PATCH", "GET", "PATCH"]
    generation, status = _status(kube, "edited")
    assert generation == before + 1
    assert status["observedGeneration"] == generation
    succeeded = c.find(status["conditions"], SUCCEEDED)
    assert succeeded is not None
    assert (succeeded["reason"], succeeded["observedGeneration"]) == ("Running", generation)
    asyncio.run(write())
    assert api.requests == ["PATCH"]


def test_a_holder_superseded_after_its_last_write_is_refused(kube: Kube, api: CountingApi) -> None:
    create_run(kube, "taken")
    old = StatusWriter(api, kube.namespace, "taken", Masker.build())
    new = StatusWriter(api, kube.namespace, "taken", Masker.build())

    async def race() -> None:
        # What each takeover replaced: nothing for the run's first lease (no ``LeaseTaken``
        # event then), the earlier holder's fence for a handover.
        assert await old.take_over("replica-a", 4, resumed=False) is None
        await old.write(AgentRunStatus(iteration=1))
        assert await new.take_over("replica-b", 5, resumed=True) == 4
        api.requests.clear()
        with pytest.raises(Superseded):
            await old.write(AgentRunStatus(iteration=99))

    asyncio.run(race())
    assert api.requests == ["PATCH", "GET"]
    _, status = _status(kube, "taken")
    assert status["lease"] == {"holder": "replica-b", "fence": 5}
    assert status["iteration"] == 1
    assert status["resumeCount"] == 1


def test_a_run_being_deleted_is_not_taken_over(kube: Kube, api: CountingApi) -> None:
    create_run(kube, "leaving")
    kube.kubectl(
        "patch",
        "agentrun",
        "leaving",
        "--type=merge",
        "-p",
        '{"metadata":{"finalizers":["agentrun.dev/test-hold"]}}',
    )
    kube.kubectl("delete", "agentrun", "leaving", "--wait=false")
    writer = StatusWriter(api, kube.namespace, "leaving", Masker.build())
    try:
        with pytest.raises(Superseded, match="being deleted"):
            asyncio.run(writer.take_over("replica-a", 9, resumed=True))
        assert writer.fence is None
    finally:
        kube.kubectl(
            "patch",
            "agentrun",
            "leaving",
            "--type=json",
            "-p",
            '[{"op":"remove","path":"/metadata/finalizers"}]',
        )
    with pytest.raises(Superseded, match="gone"):
        asyncio.run(writer.take_over("replica-a", 9, resumed=True))


def test_a_holders_progress_goes_out_with_its_next_write(kube: Kube, api: CountingApi) -> None:
    """Boundaries a moment apart cost one write: the first checkpoint (a transition) at once,
    the progress after it with the run's end, and at most ``PROGRESS_EVERY`` late without one."""
    create_run(kube, "quick")
    writer = StatusWriter(api, kube.namespace, "quick", Masker.build())

    async def holding() -> None:
        await writer.take_over("replica-a", 11, resumed=False)
        api.requests.clear()
        for iteration in range(1, 6):
            await writer.write_soon(
                AgentRunStatus(iteration=iteration),
                (c.update(c.WRITTEN, f"iteration {iteration}"),),
            )
        assert api.requests == ["PATCH"]  # the first checkpoint; the rest waits
        await writer.write(AgentRunStatus(iteration=6), (c.update(c.RUNNING, "last"),))
        assert api.requests == ["PATCH", "PATCH"]
        _, status = _status(kube, "quick")
        checkpointed = c.find(status["conditions"], CHECKPOINTED)
        assert checkpointed is not None
        assert (status["iteration"], checkpointed["message"]) == (6, "iteration 5")
        await writer.write_soon(AgentRunStatus(iteration=7))
        assert api.requests == ["PATCH", "PATCH"]
        await asyncio.sleep(PROGRESS_EVERY + 0.5)
        assert api.requests == ["PATCH", "PATCH", "PATCH"]  # the timer wrote it

    asyncio.run(holding())
    assert _status(kube, "quick")[1]["iteration"] == 7


def test_progress_that_waited_is_refused_once_a_newer_holder_took_over(
    kube: Kube, api: CountingApi
) -> None:
    create_run(kube, "overtaken")
    old = StatusWriter(api, kube.namespace, "overtaken", Masker.build())
    new = StatusWriter(api, kube.namespace, "overtaken", Masker.build())

    async def race() -> None:
        await old.take_over("replica-a", 4, resumed=False)
        await old.write_soon(AgentRunStatus(iteration=1), (c.update(c.WRITTEN, "first"),))
        await old.write_soon(AgentRunStatus(iteration=2), (c.update(c.WRITTEN, "second"),))
        await new.take_over("replica-b", 5, resumed=True)
        await asyncio.sleep(PROGRESS_EVERY + 0.5)  # the old holder's timer tries, and is refused
        with pytest.raises(Superseded):
            await old.write_soon(AgentRunStatus(iteration=3))

    asyncio.run(race())
    _, status = _status(kube, "overtaken")
    assert status["lease"] == {"holder": "replica-b", "fence": 5}
    assert status["iteration"] == 1


def test_a_takeover_over_the_object_just_returned_reads_nothing(
    kube: Kube, api: CountingApi
) -> None:
    create_run(kube, "known")
    writer = StatusWriter(api, kube.namespace, "known", Masker.build())
    known = json.loads(kube.kubectl("get", "agentrun", "known", "-o", "json").stdout)

    async def take(run: dict[str, Any]) -> None:
        await writer.take_over("replica-a", 8, resumed=False, known=run)

    asyncio.run(take(known))
    assert api.requests == ["PATCH"]
    writer.release()
    api.requests.clear()
    with pytest.raises(Superseded, match="already carries fence 8"):
        asyncio.run(take(known))  # stale: its test fails, the object is read, fence 8 is there
    assert api.requests == ["PATCH", "GET"]
