"""Two releases of the chart whose watched namespaces overlap: each run is executed by one only.

Release ``first`` is cluster-wide (the chart's default); release ``second`` is namespaced and
watches the namespace the runs are in, with its own store and its own demo services (so which
install executed a run shows in whose airline booked it). Two installs' fences are per store, so
nothing but the controller name a run is claimed under keeps them apart:

* with the same controller name, the second install must be refused (naming the release it
  collides with) or, if installed, be harmless: each run booked and texted once in all;
* with distinct controller names (``controllerName``), each run is executed by exactly one
  install: three runs, three bookings and three texts across both.

The second release is the chart's "second release in a cluster": the CRD and the cluster-wide
access-control objects belong to the first (``crds.enabled``, ``accessControl.*`` false).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.cluster import (
    NodeCluster,
    OperatorRelease,
    install_operator,
    succeeded,
    try_install_operator,
    wait_for,
)
from tests.support.kube import REPO, Kube

BOOKING = REPO / "examples" / "booking.yaml"
RUNS = 3
# Each run lingers in its booking call, so that an install that would also execute it has the
# time to: a run over in a second would show nothing.
LINGER = {"AGENTRUN_DEMO_LINGER": "book", "AGENTRUN_DEMO_LINGER_SECONDS": "10"}


@dataclass(frozen=True)
class Setting:
    cluster: NodeCluster
    first: OperatorRelease
    runs: Kube  # the namespace both releases watch
    folder: Path

    def second_namespace(self, stem: str) -> Kube:
        return self.cluster.namespace(f"second-{stem}-{secrets.token_hex(3)}")


@pytest.fixture(scope="module")
def setting(cluster: NodeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setting]:
    suffix = secrets.token_hex(3)
    folder = tmp_path_factory.mktemp("two-releases")
    first = install_operator(
        cluster.namespace(f"first-{suffix}"), "first", folder / "first" / "demo", LINGER
    )
    runs = cluster.namespace(f"runs-{suffix}")
    try:
        yield Setting(cluster, first, runs, folder)
    finally:
        first.uninstall()
        runs.kubectl("delete", "namespace", runs.namespace, "--wait=false", check=False)


def second_values(setting: Setting, controller_name: str | None) -> dict[str, Any]:
    values: dict[str, Any] = {
        "rbac": {"clusterWide": False},
        "watchNamespaces": [setting.runs.namespace],
        "crds": {"enabled": False},
        "accessControl": {
            "decisionPolicy": False,
            "agentSecretsPolicy": False,
            "userRoles": False,
        },
    }
    if controller_name is not None:
        values["controllerName"] = controller_name
    return values


def start_runs(kube: Kube, stem: str) -> list[str]:
    names = [f"{stem}-{i}" for i in range(RUNS)]
    for name in names:
        manifest = yaml.safe_load(BOOKING.read_text())
        manifest["metadata"]["name"] = name
        kube.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    return names


def run_succeeded(kube: Kube, name: str) -> bool:
    run: dict[str, Any] = json.loads(kube.kubectl("get", "agentrun", name, "-o", "json").stdout)
    return succeeded(run) == "True"


def run_everything(setting: Setting, second: OperatorRelease, stem: str) -> None:
    """Three runs in the shared namespace: each succeeds, and each was executed once in all."""
    before = (setting.first.count("bookings"), setting.first.count("messages"))
    try:
        for name in start_runs(setting.runs, stem):
            wait_for(f"{name} succeeds", 240, partial(run_succeeded, setting.runs, name))
        by_first = (
            setting.first.count("bookings") - before[0],
            setting.first.count("messages") - before[1],
        )
        by_second = (second.count("bookings"), second.count("messages"))
    finally:  # while both operators run, so that they forget the runs
        setting.runs.kubectl("delete", "agentruns", "--all", "--timeout=120s", check=False)
    executions = (by_first[0] + by_second[0], by_first[1] + by_second[1])
    assert executions == (RUNS, RUNS), (
        f"{RUNS} runs executed {executions[0]} times: release first booked "
        f"{by_first[0]} and texted {by_first[1]}, release second booked {by_second[0]} and "
        f"texted {by_second[1]}; a run executed by both installs books and texts twice"
    )


def test_the_same_controller_name_on_overlapping_namespaces_is_refused_or_harmless(
    setting: Setting,
) -> None:
    namespace = setting.second_namespace("same")
    second = try_install_operator(
        namespace, "second", setting.folder / "same" / "demo", LINGER,
        second_values(setting, None),
    )  # fmt: skip
    if isinstance(second, str):
        namespace.kubectl("delete", "namespace", namespace.namespace, "--wait=false")
        assert setting.first.kube.namespace in second, (
            f"the second install was refused without naming the release it collides with:\n{second}"
        )
        return
    try:
        run_everything(setting, second, "same")
    finally:
        second.uninstall()


def test_distinct_controller_names_execute_each_run_once(setting: Setting) -> None:
    second = install_operator(
        setting.second_namespace("distinct"), "second", setting.folder / "distinct" / "demo",
        LINGER, second_values(setting, "e2e.agentrun.dev/second"),
    )  # fmt: skip
    try:
        run_everything(setting, second, "distinct")
    finally:
        second.uninstall()
