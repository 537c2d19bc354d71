"""Fixtures for the tests that need a real API server.

The control plane starts once per pytest session (a start costs seconds; a module costs less) and
the AgentRun CRD is installed on it once. Each test module gets a fresh namespace so that the
objects one module creates never change what another one sees.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.kube import REPO, ControlPlane, Kube, kubectl_binary, start_control_plane

CRD = REPO / "crds" / "agentruns.agentrun.dev.yaml"


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(Path(tmp_path_factory.mktemp("control-plane")))
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def cluster(control_plane: ControlPlane) -> Kube:
    """The cluster with the AgentRun CRD installed and Established, in namespace default."""
    kube = Kube(control_plane, "default", kubectl_binary())
    kube.kubectl("apply", "--server-side", "-f", str(CRD))
    kube.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/agentruns.agentrun.dev"
    )
    return kube


@pytest.fixture(scope="module")
def kube(cluster: Kube, request: pytest.FixtureRequest) -> Kube:
    """A fresh namespace for this test module, named after it."""
    stem = re.sub(r"[^a-z0-9]+", "-", request.module.__name__.rsplit(".", 1)[-1].lower())
    name = f"{stem.strip('-')[:40]}-{secrets.token_hex(3)}"
    cluster.kubectl("create", "namespace", name)
    return Kube(cluster.control_plane, name, cluster.kubectl_bin)
