"""A release's life with Helm on a control plane of its own: install, upgrade, a second release
beside it, and uninstall.

The chart templates the AgentRun CRD (``crds.enabled``) with Helm's resource policy ``keep``
(``crds.keep``): ``helm upgrade`` must serve what a newer CRD adds, a second release must be
refused with the values to change (not Helm's bare ownership error), and ``helm uninstall`` must
leave nothing ``Terminating``: the runs, deleted first as docs/kubernetes.md says while the
operator still runs, are forgotten and gone, and the CRD stays. A cluster of its own, because
installing and uninstalling the CRD would pull it from under every other test module.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.agent_manifests import openai_agent
from tests.support.agentruns import apply_run, wait_until_completed
from tests.support.chart import CHART, private_cluster, service_account_kubeconfig
from tests.support.kube import Kube, helm_binary
from tests.support.operator import Operators, wait_for
from tests.support.redis_server import RedisServer

from agentrun import open_backend

CRD_NAME = "agentruns.agentrun.dev"
RELEASE = "first"
SECOND_RELEASE = (
    "crds.enabled=false,accessControl.decisionPolicy=false,accessControl.agentSecretsPolicy=false,"
    "accessControl.userRoles=false"
)


pytestmark = pytest.mark.xdist_group("chart-release")
"""The tests share one release and go in order (one uninstalls what the next installs again):
one worker runs them all (``--dist loadgroup``, pyproject's pytest options)."""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, redis: RedisServer) -> Iterator[Kube]:
    """Release ``first`` with every default, installed by helm: the CRD comes with it."""
    with private_cluster(tmp_path_factory.mktemp("release-plane"), "agentrun-system") as kube:
        kube.helm(helm_binary(), "install", RELEASE, str(CHART), "--set", f"store.url={redis.url}")
        kube.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{CRD_NAME}")
        yield kube


def crd(kube: Kube) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(kube.kubectl("get", "crd", CRD_NAME, "-o", "json").stdout)
    return found


def chart_whose_crd_gained_a_field(folder: Path) -> Path:
    """A copy of the chart whose CRD has one more spec field, ``note``."""
    chart = folder / "agentrun-operator"
    shutil.copytree(CHART, chart)
    crd_file = chart / "files" / "agentruns.agentrun.dev.yaml"
    document = yaml.safe_load(crd_file.read_text())
    for version in document["spec"]["versions"]:
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
        spec["properties"]["note"] = {"type": "string"}
    crd_file.write_text(yaml.safe_dump(document))
    return chart


def note_of_a_new_run(kube: Kube, name: str) -> str | None:
    """Create a run carrying ``spec.note`` (unknown fields dropped, as an older CRD prunes them)
    and read back what the API server stored."""
    run = {
        "apiVersion": "agentrun.dev/v1alpha1",
        "kind": "AgentRun",
        "metadata": {"name": name},
        "spec": {"agent": "nobody", "input": "go", "suspend": True, "note": "kept"},
    }
    kube.kubectl("create", "--validate=false", "-f", "-", stdin=json.dumps(run))
    stored = json.loads(kube.kubectl("get", "agentrun", name, "-o", "json").stdout)
    kube.kubectl("delete", "agentrun", name)
    note: str | None = stored["spec"].get("note")
    return note


def test_the_crd_belongs_to_the_release_and_is_kept(installed: Kube) -> None:
    metadata = crd(installed)["metadata"]
    assert metadata["annotations"]["meta.helm.sh/release-name"] == RELEASE
    assert metadata["annotations"]["helm.sh/resource-policy"] == "keep"
    assert metadata["labels"]["app.kubernetes.io/instance"] == RELEASE


def test_helm_upgrade_serves_the_field_a_newer_crd_adds(installed: Kube, tmp_path: Path) -> None:
    assert note_of_a_new_run(installed, "before-upgrade") is None
    newer = chart_whose_crd_gained_a_field(tmp_path)
    installed.helm(helm_binary(), "upgrade", RELEASE, str(newer), "--reuse-values")
    wait_for(
        "the upgraded CRD to be served",
        lambda: note_of_a_new_run(installed, "after-upgrade") == "kept",
        30,
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            [],
            "crds.enabled=true: CustomResourceDefinition agentruns.agentrun.dev already exists "
            f"(release {RELEASE} in namespace agentrun-system)",
        ),
        (
            [
                "--set",
                "crds.enabled=false,accessControl.decisionPolicy=false,"
                "accessControl.agentSecretsPolicy=false",
            ],
            "accessControl.userRoles=true: ClusterRole agentrun-view already exists (release first",
        ),
        (
            ["--set", SECOND_RELEASE],
            'controllerName "agentrun.dev/operator" is already used by release first in '
            "namespace agentrun-system, which watches every namespace; this release would "
            "watch every namespace",
        ),
        (
            ["--set", f"{SECOND_RELEASE},rbac.clusterWide=false"],
            'controllerName "agentrun.dev/operator" is already used by release first',
        ),
    ],
    ids=["crd", "user-roles", "same-controller-name", "namespaced-inside-cluster-wide"],
)
def test_a_second_release_is_told_which_value_to_change(
    installed: Kube, redis: RedisServer, values: list[str], message: str
) -> None:
    result = installed.helm(
        helm_binary(), "install", "second", str(CHART), "--set", f"store.url={redis.url}",
        *values, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    assert "a second release of this chart sets" in result.stderr or "controllerName" in message


def test_a_second_release_with_its_own_controller_name_installs(
    installed: Kube, redis: RedisServer
) -> None:
    installed.helm(
        helm_binary(), "install", "second", str(CHART), "--set", f"store.url={redis.url}",
        "--set", f"{SECOND_RELEASE},controllerName=agentrun.dev/second",
    )  # fmt: skip
    installed.helm(helm_binary(), "upgrade", "second", str(CHART), "--reuse-values")
    installed.helm(helm_binary(), "uninstall", "second")


def test_one_controller_name_may_serve_namespaces_that_do_not_overlap(
    installed: Kube, redis: RedisServer
) -> None:
    def install(release: str, namespace: str, watched: str) -> subprocess.CompletedProcess[str]:
        installed.kubectl("create", "namespace", namespace, check=False)
        return installed.helm(
            helm_binary(), "install", release, str(CHART), "--namespace", namespace,
            "--set", f"store.url={redis.url},{SECOND_RELEASE},rbac.clusterWide=false",
            "--set", f"controllerName=agentrun.dev/teams,watchNamespaces={{{watched}}}",
            check=False,
        )  # fmt: skip

    assert install("team-a", "team-a", "team-a").returncode == 0
    assert install("team-b", "team-b", "team-b").returncode == 0
    overlapping = install("team-c", "team-c", "team-a")
    assert overlapping.returncode != 0
    assert (
        'controllerName "agentrun.dev/teams" is already used by release team-a in namespace '
        "team-a, which watches team-a; this release would watch team-a"
    ) in overlapping.stderr, overlapping.stderr
    for release in ("team-a", "team-b"):
        installed.helm(helm_binary(), "uninstall", release, "--namespace", release)


def latest_checkpoint(redis: RedisServer, tenant: str, run_id: str) -> bytes | None:
    async def read() -> bytes | None:
        async with await open_backend(redis.url) as backend:
            return await backend.checkpoints.latest(tenant, run_id)

    return asyncio.run(read())


def terminating(kube: Kube, kinds: str = "agentruns,namespaces,crds") -> list[str]:
    listed = kube.kubectl("get", kinds, "-A", "-o", "json").stdout
    return [
        f"{o['kind']}/{o['metadata']['name']}"
        for o in json.loads(listed)["items"]
        if o["metadata"].get("deletionTimestamp")
    ]


def test_runs_deleted_before_uninstall_are_forgotten_and_nothing_is_left_terminating(
    installed: Kube, redis: RedisServer, effects: Path, tmp_path: Path
) -> None:
    """The documented order: delete the runs while the operator runs (it forgets their store
    data and releases its finalizers), then uninstall; the CRD stays (crds.keep). An Agent the
    operator probed can still be deleted after the uninstall: nothing of the operator's holds
    it (kopf's finalizer on it would, for good, and so would its namespace)."""
    workload = Kube(installed.control_plane, "workload", installed.kubectl_bin)
    installed.kubectl("create", "namespace", workload.namespace)
    pool = Operators(
        installed.control_plane,
        workload.namespace,
        redis.url,
        tmp_path,
        env={
            "AGENTRUN_AGENT_MODULES": "tests.kube.operator_agents",
            "AGENTRUN_TEST_EFFECTS": str(effects),
            "KUBECONFIG": str(
                service_account_kubeconfig(installed, f"{RELEASE}-agentrun-operator")
            ),
        },
        watch=("--all-namespaces",),
    )
    pool.start("replica")
    try:
        workload.kubectl(
            "apply", "-f", "-",
            stdin=openai_agent("desk", "http://127.0.0.1:9/v1", secret="nowhere", instructions="x"),
        )  # fmt: skip
        wait_for("the Agent to be probed", lambda: probed(workload, "desk"), 30, pool.logs)
        apply_run(workload, "booked", "slowbook")
        wait_until_completed(workload, "booked", pool.logs)
        run = json.loads(workload.kubectl("get", "agentrun", "booked", "-o", "json").stdout)
        assert "agentrun.dev/forget-run" in run["metadata"]["finalizers"]
        assert latest_checkpoint(redis, workload.namespace, run["metadata"]["uid"]) is not None
        subprocess.run(
            [installed.kubectl_bin, "delete", "agentruns", "--all", "--all-namespaces"],
            env=installed.control_plane.env(), check=True, timeout=60, capture_output=True,
        )  # fmt: skip
    finally:
        pool.stop_all()

    assert latest_checkpoint(redis, workload.namespace, run["metadata"]["uid"]) is None
    installed.helm(helm_binary(), "uninstall", RELEASE, "--wait", "--timeout=60s")
    assert terminating(installed) == []
    assert crd(installed)["metadata"].get("deletionTimestamp") is None
    assert installed.helm(helm_binary(), "list", "-q").stdout.strip() == ""
    workload.kubectl("delete", "agent", "desk", "--timeout=20s")


def probed(kube: Kube, agent: str) -> bool:
    found = json.loads(kube.kubectl("get", "agent", agent, "-o", "json").stdout)
    return "probedAt" in (found.get("status") or {})


def test_without_crds_keep_uninstall_removes_the_crd_once_the_runs_are_gone(
    installed: Kube, redis: RedisServer
) -> None:
    """Reinstalled under the same name, the release takes the kept CRD back; upgraded to
    crds.keep=false, its uninstall deletes the CRD, and with the runs deleted first nothing
    waits on a finalizer. (The test before uninstalls the module's release; run on its own, or
    after that test stopped short, this one uninstalls it first, which keeps the CRD.)"""
    installed.helm(
        helm_binary(), "uninstall", RELEASE, "--ignore-not-found", "--wait", "--timeout=60s"
    )
    installed.helm(helm_binary(), "install", RELEASE, str(CHART), "--set", f"store.url={redis.url}")
    installed.helm(
        helm_binary(), "upgrade", RELEASE, str(CHART), "--reuse-values", "--set", "crds.keep=false"
    )
    assert "helm.sh/resource-policy" not in crd(installed)["metadata"].get("annotations", {})
    installed.helm(helm_binary(), "uninstall", RELEASE, "--wait", "--timeout=60s")

    def crd_gone() -> bool:
        found = installed.kubectl("get", "crd", CRD_NAME, check=False)
        return found.returncode != 0 and "NotFound" in found.stderr

    wait_for("the CRD to be deleted", crd_gone, 30)
    assert terminating(installed, "namespaces,crds") == []
