"""The lease holder's status writes against a real API server: one request each while nothing
else moved, and still exactly right when the spec moved or a newer holder took over.

No operator runs here: each test drives a ``StatusWriter`` by hand on an AgentRun of its own,
through a ``KubeApi`` that counts the requests it makes.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.config import new_client_from_config
from tests.support.kube import Kube

from agentrun.operator import conditions as c
from agentrun.operator.kubeapi import KubeApi
from agentrun.operator.resource import AgentRunStatus
from agentrun.operator.status import StatusWriter, Superseded
from agentrun.outcomes import CHECKPOINTED, SUCCEEDED
from agentrun.redaction import Masker


class CountingApi(KubeApi):
    def __init__(self, kube: Kube) -> None:
        # The client's loader is untyped; it returns an ApiClient.
        super().__init__(new_client_from_config(config_file=str(kube.kubeconfig)))  # type: ignore[no-untyped-call]
        self.requests: list[str] = []

    async def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.requests.append("GET")
        return await super().get(namespace, name)

    async def patch_status(
        self, namespace: str, name: str, operations: list[dict[str, Any]]
    ) -> dict[str, Any]:
        self.requests.append("PATCH")
        return await super().patch_status(namespace, name, operations)


@pytest.fixture
def api(kube: Kube) -> Iterator[CountingApi]:
    counting = CountingApi(kube)
    try:
        yield counting
    finally:
        counting.close()


def _create(kube: Kube, name: str) -> None:
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


def _status(kube: Kube, name: str) -> tuple[int, dict[str, Any]]:
    found = json.loads(kube.kubectl("get", "agentrun", name, "-o", "json").stdout)
    return int(found["metadata"]["generation"]), dict(found.get("status") or {})


def test_a_holders_writes_cost_one_request_each(kube: Kube, api: CountingApi) -> None:
    _create(kube, "steady")
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
    _create(kube, "edited")
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
    _create(kube, "taken")
    old = StatusWriter(api, kube.namespace, "taken", Masker.build())
    new = StatusWriter(api, kube.namespace, "taken", Masker.build())

    async def race() -> None:
        await old.take_over("replica-a", 4, resumed=False)
        await old.write(AgentRunStatus(iteration=1))
        await new.take_over("replica-b", 5, resumed=True)
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
    _create(kube, "leaving")
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
