"""Fixtures for the end-to-end tests: the real cluster ``AGENTRUN_E2E_CLUSTER`` names (by default
hack/cluster.sh's single-node cluster; hack/kind-cluster.sh's kind cluster for ``make e2e-kind``).

The cluster comes up once per pytest session (building its tools and images first on a fresh
machine) and goes down at the end, unless it was already up before the session: then it is left
as it was found. Each test gets its own namespace. The times the tests measure (cluster start,
pod kill to takeover) are printed at the end of the run.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import cluster as node_cluster
from tests.support.kube import Kube

MEASURED: list[str] = []


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[node_cluster.NodeCluster]:
    was_up = node_cluster.is_up()
    seconds = node_cluster.bring_up()
    script = node_cluster.CLUSTER_SCRIPT.name
    MEASURED.append(f"{script} up: {seconds:.1f}s{' (was already up)' if was_up else ''}")
    settings = node_cluster.settings()
    shared, basetemp = Path(settings["SHARED_DIR"]), tmp_path_factory.getbasetemp()
    if not basetemp.is_relative_to(shared):
        pytest.fail(
            f"the tests' folders ({basetemp}) are not under {shared}, the folder of this machine "
            f"the node sees: run pytest with --basetemp={shared}/pytest",
            pytrace=False,
        )
    kubeconfig = Path(settings["KUBECONFIG_FILE"])
    try:
        yield node_cluster.NodeCluster(kubeconfig, tmp_path_factory.mktemp("helm"), seconds)
    finally:
        if not was_up:
            node_cluster.take_down()


@pytest.fixture(scope="session", autouse=True)
def crd(cluster: node_cluster.NodeCluster) -> None:
    """The AgentRun CRD, applied once for the session (see ``CLUSTER_WIDE_OFF``)."""
    node_cluster.apply_crd(cluster.namespace(f"crd-{secrets.token_hex(3)}"))


@pytest.fixture
def namespace(cluster: node_cluster.NodeCluster, request: pytest.FixtureRequest) -> Kube:
    """A fresh namespace named after the test (left for the cluster's teardown to discard)."""
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())
    return cluster.namespace(f"{stem.strip('-')[:40]}-{secrets.token_hex(3)}")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if MEASURED:
        terminalreporter.section("end-to-end measurements")
        for line in MEASURED:
            terminalreporter.write_line(line)
