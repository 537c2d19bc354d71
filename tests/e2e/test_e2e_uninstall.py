"""``helm uninstall`` as docs/kubernetes.md says to: the CRD stays, nothing is stuck Terminating.

The namespace holds a finished run and a run mid-call. The documented order is to delete the
runs while the operator still runs (it stops the one mid-call at its next step, forgets what the
store keeps of both and removes their finalizers), then uninstall. The chart's CRD policy keeps
the CRD (``crds.keep``; deleting it would delete every run of every namespace), so it must still
be there and not Terminating, and deleting the namespace afterwards must finish within a minute.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from tests.support.cluster import adopt_crd, install_operator, succeeded, wait_for
from tests.support.kube import REPO, Kube, helm_binary

BOOKING = REPO / "examples" / "booking.yaml"
CRD_NAME = "agentruns.agentrun.dev"
GONE_WITHIN_S = 60


def test_uninstall_keeps_the_crd_and_leaves_nothing_stuck_terminating(
    namespace: Kube, tmp_path: Path
) -> None:
    env = {"AGENTRUN_DEMO_LINGER_SECONDS": "10"}
    adopt_crd(namespace, "agentrun")  # this release manages the CRD (crds.enabled, the default)
    release = install_operator(
        namespace, "agentrun", tmp_path / "demo", env, values={"crds": {"enabled": True}}
    )
    namespace.kubectl("apply", "-f", "-", stdin=run_manifest("finished"))
    wait_for("the first run succeeds", 180, lambda: succeeded(release.run("finished")) == "True")
    namespace.kubectl("apply", "-f", "-", stdin=run_manifest("running"))
    wait_for("the second run books", 120, lambda: release.count("bookings") == 2)

    namespace.kubectl("delete", "agentruns", "--all", "--timeout=120s")  # the documented step
    namespace.helm(helm_binary(), "uninstall", release.name, "--wait", "--timeout=120s")
    crd = json.loads(namespace.kubectl("get", "crd", CRD_NAME, "-o", "json").stdout)
    assert "deletionTimestamp" not in crd["metadata"], "helm uninstall left the CRD Terminating"

    namespace.kubectl("delete", "namespace", namespace.namespace, "--wait=false")
    deadline = time.monotonic() + GONE_WITHIN_S
    while namespace_exists(namespace) and time.monotonic() < deadline:
        time.sleep(1)
    stuck = stuck_runs(namespace)
    try:
        assert not namespace_exists(namespace), (
            f"namespace {namespace.namespace} stuck Terminating {GONE_WITHIN_S}s after "
            f"helm uninstall and delete; AgentRuns holding it: {stuck}"
        )
    finally:
        for name in stuck:  # leave the shared cluster clean: nothing else will remove them
            namespace.kubectl(
                "patch", "agentrun", name, "--type=merge", "-p", '{"metadata":{"finalizers":null}}',
                check=False,
            )  # fmt: skip
        namespace.kubectl("delete", "pv", release.redis_volume, "--ignore-not-found", check=False)


def run_manifest(name: str) -> str:
    manifest = yaml.safe_load(BOOKING.read_text())
    manifest["metadata"]["name"] = name
    return json.dumps(manifest)


def namespace_exists(kube: Kube) -> bool:
    found = kube.kubectl("get", "namespace", kube.namespace, "--ignore-not-found", "-o", "name")
    return bool(found.stdout.strip())


def stuck_runs(kube: Kube) -> dict[str, list[str]]:
    """The AgentRuns still in the namespace, with their finalizers."""
    listing = kube.kubectl("get", "agentruns", "-o", "json", check=False)
    if listing.returncode != 0:
        return {}
    return {
        run["metadata"]["name"]: list(run["metadata"].get("finalizers") or [])
        for run in json.loads(listing.stdout)["items"]
    }
