"""Our finalizer's removal once a deleted run is forgotten, against a real API server: one
request when nothing moved, and never another object's finalizer.

No operator runs here: ``drop_finalizer`` is driven by hand, through a ``KubeApi`` that counts
its requests, on AgentRuns given our finalizer with kubectl.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.support.agentruns import create_run
from tests.support.counting_api import CountingApi
from tests.support.kube import Kube

from agentrun.operator._context import FINALIZER
from agentrun.operator._finalizers import drop_finalizer

OTHER = "example.com/keep"
"""Another controller's finalizer."""


def _read(kube: Kube, name: str) -> dict[str, Any]:
    return dict(json.loads(kube.kubectl("get", "agentrun", name, "-o", "json").stdout))


def _finalized(kube: Kube, name: str, *finalizers: str) -> dict[str, Any]:
    kube.kubectl(
        "patch", "agentrun", name, "--type=merge",
        "-p", json.dumps({"metadata": {"finalizers": list(finalizers)}}),
    )  # fmt: skip
    return _read(kube, name)


def _release(kube: Kube, name: str) -> None:
    """Every finalizer off, so the namespace can go."""
    kube.kubectl(
        "patch", "agentrun", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}'
    )


def test_the_finalizer_goes_with_one_request_when_nothing_moved(
    kube: Kube, api: CountingApi
) -> None:
    create_run(kube, "still")
    run = _finalized(kube, "still", OTHER, FINALIZER)
    asyncio.run(drop_finalizer(api, run))
    assert api.requests == ["PATCH"]
    assert _read(kube, "still")["metadata"]["finalizers"] == [OTHER]
    _release(kube, "still")


def test_a_finalizer_moved_meanwhile_is_read_again_and_removed(
    kube: Kube, api: CountingApi
) -> None:
    create_run(kube, "moved")
    run = _finalized(kube, "moved", FINALIZER)
    _finalized(kube, "moved", OTHER, FINALIZER)  # another controller put its own first
    asyncio.run(drop_finalizer(api, run))
    assert api.requests == ["PATCH", "GET", "PATCH"]
    assert _read(kube, "moved")["metadata"]["finalizers"] == [OTHER]
    _release(kube, "moved")


def test_a_run_made_again_under_the_same_name_keeps_its_finalizer(
    kube: Kube, api: CountingApi
) -> None:
    create_run(kube, "again")
    gone = _finalized(kube, "again", FINALIZER)
    _release(kube, "again")
    kube.kubectl("delete", "agentrun", "again", "--wait=true")
    create_run(kube, "again")
    made = _finalized(kube, "again", FINALIZER)
    assert made["metadata"]["uid"] != gone["metadata"]["uid"]
    asyncio.run(drop_finalizer(api, gone))
    assert api.requests == ["PATCH", "GET"]
    assert _read(kube, "again")["metadata"]["finalizers"] == [FINALIZER]
    _release(kube, "again")
