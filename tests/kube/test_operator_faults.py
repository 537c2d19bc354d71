"""An error that trying again cannot mend is shown on the run, once, and not retried for ever.

A replica runs as a ServiceAccount that the API server refuses two things the operator needs: it
may not read namespaces (a run's tenant is its namespace's label) and may not patch an AgentRun
itself (our finalizer). Every refusal is a real 403 from the real API server: what a chart's
RBAC missing a rule does. The worker of a new run and the forgetting of a deleted one both meet
one; each must say so on the run (the ``OperatorFault`` condition and event) and stop, rather
than log a warning every few seconds for ever while the run shows nothing.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.agentruns import apply_run, condition, count_effects, get_run
from tests.support.chart import service_account_kubeconfig
from tests.support.kube import Kube
from tests.support.operator import Replica, operator_pool, wait_for
from tests.support.redis_server import RedisServer

from agentrun.operator._config import DEFAULT_CONTROLLER
from agentrun.operator._context import FINALIZER

ACCOUNT = "half-blind"
FAULT = "stopped on an error trying again cannot mend"
"""What the replica logs, once, when it stops working on a run."""


def _rules(kube: Kube) -> None:
    """What the chart grants, less namespaces' get and AgentRuns' patch."""
    namespaced = [
        {
            "apiGroups": ["agentrun.dev"],
            "resources": ["agentruns", "agents"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": ["agentrun.dev"],
            "resources": ["agentruns/status", "agents/status"],
            "verbs": ["patch"],
        },
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
    ]
    cluster_wide = [
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "verbs": ["list", "watch"],
        },
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
    ]
    name = f"{ACCOUNT}-{kube.namespace}"
    subject = [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": kube.namespace}]
    objects: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": ACCOUNT}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": ACCOUNT},
            "rules": namespaced,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": ACCOUNT},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ACCOUNT},
            "subjects": subject,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": cluster_wide,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": subject,
        },
    ]
    kube.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(objects))


@pytest.fixture(scope="module")
def refused(
    kube: Kube, redis: RedisServer, effects: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Replica]:
    """One replica acting as ``ACCOUNT``, started when a test first asks for it."""
    _rules(kube)
    kubeconfig = service_account_kubeconfig(kube, ACCOUNT)
    pool = operator_pool(kube, redis, effects, tmp_path_factory)
    replica = pool.start("refused", KUBECONFIG=str(kubeconfig))
    try:
        yield replica
    finally:
        replica.stop()


def _events(kube: Kube, name: str, reason: str) -> list[dict[str, Any]]:
    listed = json.loads(
        kube.kubectl(
            "get",
            "events",
            f"--field-selector=involvedObject.name={name},reason={reason}",
            "-o",
            "json",
        ).stdout
    )
    return list(listed["items"])


def _faulted(kube: Kube, name: str) -> bool:
    succeeded = condition(kube, name, "Succeeded")
    return succeeded.get("status") == "Unknown" and succeeded.get("reason") == "OperatorFault"


def _tries(replica: Replica, text: str) -> int:
    return replica.output().count(text)


def test_forgetting_refused_by_the_api_server_says_so_on_the_run_and_stops(
    kube: Kube, request: pytest.FixtureRequest
) -> None:
    """A finished run (no worker), its tenant pinned (no namespace read), keeps our finalizer
    when deleted: removing it is the patch this replica may not make. The replica starts once
    the run is finished, so that no worker of it reads the namespace first."""
    apply_run(kube, "unforgettable", "texter")
    kube.kubectl(
        "patch", "agentrun", "unforgettable", "--type=merge", "-p",
        json.dumps({"metadata": {"finalizers": [FINALIZER]}}),
    )  # fmt: skip
    finished = {
        "status": {
            "controller": DEFAULT_CONTROLLER,
            "tenant": kube.namespace,
            "conditions": [
                {
                    "type": "Succeeded",
                    "status": "True",
                    "reason": "Completed",
                    "message": "done",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        }
    }
    kube.kubectl(
        "patch", "agentrun", "unforgettable", "--subresource=status", "--type=merge", "-p",
        json.dumps(finished),
    )  # fmt: skip
    refused: Replica = request.getfixturevalue("refused")
    kube.kubectl("delete", "agentrun", "unforgettable", "--wait=false")
    try:
        wait_for(
            "the OperatorFault condition",
            lambda: _faulted(kube, "unforgettable"),
            60,
            refused.output,
        )
        message = condition(kube, "unforgettable", "Succeeded")["message"]
        assert message.startswith("the API server answered 403 Forbidden: "), message
        assert 'cannot patch resource "agentruns"' in message, message
        wait_for(
            "the OperatorFault event",
            lambda: _events(kube, "unforgettable", "OperatorFault"),
            30,
            refused.output,
        )
        # Not tried again: the fault's own status write is a watch event, and used to start
        # another try a poll interval (0.3 s here) later, for ever.
        said = _tries(refused, "could not forget run")
        time.sleep(3)
        assert _tries(refused, "could not forget run") == said == 0, refused.output()
        assert get_run(kube, "unforgettable")["metadata"]["finalizers"] == [FINALIZER]
    finally:
        kube.kubectl(
            "patch", "agentrun", "unforgettable", "--type=json", "-p",
            json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]),
            check=False,
        )  # fmt: skip


def test_a_worker_refused_by_the_api_server_says_so_on_the_run_and_stops(
    kube: Kube, refused: Replica, effects: Path
) -> None:
    before = _tries(refused, FAULT)
    apply_run(kube, "unreadable-namespace", "texter")
    wait_for(
        "the OperatorFault condition",
        lambda: _faulted(kube, "unreadable-namespace"),
        60,
        refused.output,
    )
    message = condition(kube, "unreadable-namespace", "Succeeded")["message"]
    assert message.startswith("the API server answered 403 Forbidden: "), message
    assert 'cannot get resource "namespaces"' in message, message
    wait_for(
        "the OperatorFault event",
        lambda: _events(kube, "unreadable-namespace", "OperatorFault"),
        30,
        refused.output,
    )
    (event,) = _events(kube, "unreadable-namespace", "OperatorFault")
    assert event["type"] == "Warning"
    assert (event.get("count") or 1) == 1, event
    assert count_effects(effects, "sms") == 0
    # It does not try again: kopf used to start the daemon again every 5 s, for ever.
    said = _tries(refused, FAULT)
    assert said == before + 1, refused.output()
    time.sleep(8)
    assert _tries(refused, FAULT) == said
