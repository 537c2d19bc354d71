"""kopf's diff base kept empty: no event of a run costs building it, and nothing that needs it
can be registered unnoticed.

``_lifecycle.NoDiffBase`` spares a replica the essence kopf builds at every watch event of every
object (a copy of the spec, labels and annotations, compared with the last one): only kopf's
on-create/update/delete handlers and the ``idle`` of daemons and timers read it, and the operator
registers none (``_lifecycle.refuse_diff_users``).
"""

from __future__ import annotations

from typing import Any, cast

import kopf
import pytest

import agentrun.operator._main  # noqa: F401  (registers the operator's handlers)
from agentrun.operator._lifecycle import NoDiffBase, refuse_diff_users

RUN: dict[str, Any] = {
    "apiVersion": "agentrun.dev/v1alpha1",
    "kind": "AgentRun",
    "metadata": {
        "name": "run-00001",
        "namespace": "team-a",
        "uid": "8b4c",
        "labels": {"app": "booking"},
        "annotations": {"team": "a"},
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:input": {}}}}],
    },
    "spec": {"agent": "quick", "input": "go", "approvals": [{"requestId": "r1"}]},
    "status": {"controller": "agentrun.dev/operator", "conditions": [{"type": "Succeeded"}]},
}


def test_an_event_builds_no_essence_and_finds_no_difference() -> None:
    storage = NoDiffBase(prefix="agentrun.dev", key="last-handled-configuration")
    body = kopf.Body(cast(kopf.RawBody, RUN))
    edited = kopf.Body(cast(kopf.RawBody, {**RUN, "spec": {**RUN["spec"], "suspend": True}}))
    assert storage.build(body=body) == {}
    assert storage.fetch(body=edited) == storage.build(body=edited) == {}


def test_the_operators_handlers_need_no_diff_base() -> None:
    refuse_diff_users(kopf.get_default_registry())


def test_a_handler_that_reads_the_diff_is_refused_by_name() -> None:
    registry = kopf.OperatorRegistry()

    @kopf.on.update("agentrun.dev", "v1alpha1", "agentruns", registry=registry)
    def edited(**_: Any) -> None: ...

    with pytest.raises(kopf.PermanentError, match=r"edited.*needs a diff base"):
        refuse_diff_users(registry)


def test_a_timer_with_an_idle_is_refused_by_name() -> None:
    registry = kopf.OperatorRegistry()

    @kopf.timer("agentrun.dev", "v1alpha1", "agents", idle=5, registry=registry)
    def quiet(**_: Any) -> None: ...

    with pytest.raises(kopf.PermanentError, match=r"quiet.*needs a diff base"):
        refuse_diff_users(registry)
