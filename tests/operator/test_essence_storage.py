"""kopf's diff base, built from what it keeps: the same essence kopf builds from the whole body.

``lifecycle.EssenceStorage`` spares a replica a deep copy of every run's status and
``managedFields`` at every watch event; kopf compares events by the essence, so it must be the one
kopf's own storage builds, for any body.
"""

from __future__ import annotations

from typing import Any, cast

import kopf
import pytest

from agentrun.operator.lifecycle import EssenceStorage

RUN: dict[str, Any] = {
    "apiVersion": "agentrun.dev/v1alpha1",
    "kind": "AgentRun",
    "metadata": {
        "name": "run-00001",
        "namespace": "team-a",
        "uid": "8b4c",
        "resourceVersion": "4242",
        "generation": 2,
        "labels": {"app": "booking"},
        "annotations": {
            "agentrun.dev/last-handled-configuration": '{"spec": {}}',
            "kubectl.kubernetes.io/last-applied-configuration": "{}",
            "team": "a",
        },
        "finalizers": ["agentrun.dev/forget-run"],
        "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {"f:input": {}}}}],
    },
    "spec": {"agent": "quick", "input": "go", "approvals": [{"requestId": "r1"}]},
    "status": {"controller": "agentrun.dev/operator", "conditions": [{"type": "Succeeded"}]},
}


def _storages() -> tuple[kopf.AnnotationsDiffBaseStorage, EssenceStorage]:
    key = "last-handled-configuration"
    return (
        kopf.AnnotationsDiffBaseStorage(prefix="agentrun.dev", key=key),
        EssenceStorage(prefix="agentrun.dev", key=key),
    )


@pytest.mark.parametrize(
    "body",
    [
        RUN,
        {**RUN, "metadata": {"name": "bare", "namespace": "team-a"}},
        {key: value for key, value in RUN.items() if key != "spec"},
        {
            **RUN,
            "kind": "ReplicaSet",
            "metadata": {**RUN["metadata"], "ownerReferences": [{"kind": "Deployment"}]},
        },
    ],
    ids=["run", "no labels or annotations", "no spec", "key named from its owner"],
)
def test_the_essence_is_the_one_kopf_builds(body: dict[str, Any]) -> None:
    kopfs, ours = _storages()
    wrapped = kopf.Body(cast(kopf.RawBody, body))
    assert ours.build(body=wrapped) == kopfs.build(body=wrapped)


def test_extra_fields_are_picked_as_kopf_picks_them() -> None:
    kopfs, ours = _storages()
    wrapped = kopf.Body(cast(kopf.RawBody, RUN))
    fields = [("status", "controller")]
    assert ours.build(body=wrapped, extra_fields=fields) == kopfs.build(
        body=wrapped, extra_fields=fields
    )
    assert ours.build(body=wrapped, extra_fields=fields)["status"] == {
        "controller": "agentrun.dev/operator"
    }
