"""Fixtures for the tests that need a real API server.

The control plane starts once per pytest session (a start costs seconds; a module costs less) and
the AgentRun CRD is installed on it once, with what the chart installs cluster-wide beside it:
the admission policy that makes approvals and resolutions name their real author, the one that
makes an Agent's author hold get on every Secret it references, and the ClusterRoles people are
granted. Every test so runs against a cluster configured as the chart
leaves one. Each test module gets a fresh namespace so that the objects one module creates never
change what another one sees.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.agent_manifests import AGENT_SECRETS_CHECKED
from tests.support.chart import decision_policy_enforced, install_cluster_objects
from tests.support.counting_api import CountingApi
from tests.support.kube import ControlPlane, Kube, kubectl_binary, start_control_plane
from tests.support.operator import Operators, operator_pool, wait_for
from tests.support.redis_server import RedisServer, redis_server


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(Path(tmp_path_factory.mktemp("control-plane")))
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def cluster(control_plane: ControlPlane) -> Kube:
    """The cluster with the AgentRun and Agent CRDs installed and Established, in namespace
    default."""
    kube = Kube(control_plane, "default", kubectl_binary())
    install_cluster_objects(kube)
    wait_for("the decision policy to be enforced", lambda: decision_policy_enforced(kube), 60)
    wait_for("the Agent Secrets policy to be enforced", lambda: _secrets_policy_enforced(kube), 60)
    return kube


def _secrets_policy_enforced(kube: Kube) -> bool:
    """An Agent referencing more distinct Secrets than ``agentrun-agent-secrets`` checks is
    refused even to the administrator, who may read them all, once the policy is loaded."""
    referenced = {
        f"H{index}": {"valueFrom": {"secretKeyRef": {"name": f"s{index}", "key": "k"}}}
        for index in range(AGENT_SECRETS_CHECKED + 1)
    }
    agent = {
        "apiVersion": "agentrun.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": "policy-probe"},
        "spec": {
            "model": {
                "provider": "openai",
                "name": "m",
                "price": {"inputMicrosPerMillion": 0, "outputMicrosPerMillion": 0},
            },
            "instructions": "probe",
            "tools": {"http": [{"name": "h", "url": "http://127.0.0.1:9/", "headers": referenced}]},
        },
    }
    probe = kube.kubectl(
        "create", "--dry-run=server", "-f", "-", stdin=json.dumps(agent), check=False
    )
    return f"may reference at most {AGENT_SECRETS_CHECKED} distinct Secrets" in probe.stderr


@pytest.fixture(scope="module")
def kube(cluster: Kube, request: pytest.FixtureRequest) -> Kube:
    """A fresh namespace for this test module, named after it."""
    stem = re.sub(r"[^a-z0-9]+", "-", request.module.__name__.rsplit(".", 1)[-1].lower())
    name = f"{stem.strip('-')[:40]}-{secrets.token_hex(3)}"
    cluster.kubectl("create", "namespace", name)
    return Kube(cluster.control_plane, name, cluster.kubectl_bin)


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """The operator tests' store: one Redis per test module."""
    with redis_server(tmp_path_factory.mktemp("operator-redis")) as server:
        yield server


@pytest.fixture(scope="module")
def effects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The SQLite file ``tests.kube.operator_agents`` records every side effect in."""
    return tmp_path_factory.mktemp("effects") / "effects.db"


@pytest.fixture(scope="module")
def operators(
    request: pytest.FixtureRequest,
    kube: Kube,
    redis: RedisServer,
    effects: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Operators]:
    """Two operator replicas on this module's namespace and Redis, with the environment the
    module's ``OPERATOR_ENV`` adds, if it has one."""
    env: dict[str, str] = getattr(request.module, "OPERATOR_ENV", {})
    pool = operator_pool(kube, redis, effects, tmp_path_factory, **env)
    pool.start("replica-a")
    pool.start("replica-b")
    try:
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture
def api(kube: Kube) -> Iterator[CountingApi]:
    """A ``KubeApi`` on the test's control plane that counts its requests."""
    counting = CountingApi(kube)
    try:
        yield counting
    finally:
        counting.close()
