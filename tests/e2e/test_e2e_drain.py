"""``kubectl drain`` of the node, with the chart's PodDisruptionBudget in place, mid-run.

The chart is installed with its defaults for disruptions (the PDB is the chart's to put in
place); the demo booking agent books and lingers (hack/cluster-values.yaml), and the node is
drained as a cluster upgrade would (``--ignore-daemonsets --delete-emptydir-data --force``). The
cluster has one node, so an evicted pod has nowhere to go: the drain must evict the operator's
pods one at a time and leave one running, refused by the PDB, until it gives up (its timeout);
it also evicts the chart's Redis and CoreDNS, so the run waits for the store until the node is
uncordoned. Then the run must complete, once: one booking, one text.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from tests.support import cluster as node_cluster
from tests.support.cluster import OperatorRelease, install_operator, succeeded, wait_for
from tests.support.kube import REPO, Kube, kubectl_binary

BOOKING = REPO / "examples" / "booking.yaml"
RUN = "booking"
DRAIN_TIMEOUT_S = 45


def test_drain_evicts_one_operator_pod_at_a_time_and_the_run_completes_once(
    namespace: Kube, tmp_path: Path
) -> None:
    release = install_operator(namespace, "agentrun", tmp_path / "demo")
    node = node_cluster.settings()["NODE_NAME"]
    try:
        namespace.kubectl("apply", "-f", str(BOOKING))
        wait_for("the booking tool ran", 120, lambda: release.count("bookings") == 1)
        fewest, refusals = drain(release, node, tmp_path / "drain.log")
        namespace.kubectl("uncordon", node)
        budgets = namespace.kubectl("get", "pdb", "-o", "wide", check=False).stdout
        assert fewest >= 1, (
            "the drain evicted every operator pod at once: no replica was left to carry the "
            f"runs on. PodDisruptionBudgets in {namespace.namespace}:\n{budgets or '(none)'}"
        )
        assert fewest < 2, f"the drain evicted no operator pod: {refusals}"
        assert "disruption budget" in refusals, f"no eviction was refused by the PDB:\n{refusals}"

        wait_for("the run succeeds after the uncordon", 300, lambda: done(release))
        assert release.count("bookings") == 1, "the airline booked twice"
        assert release.count("messages") == 1, "the passenger was texted twice"
    finally:
        namespace.kubectl("uncordon", node, check=False)
        print(namespace.kubectl("get", "pods,pdb", "-o", "wide", check=False).stdout)
        print(namespace.kubectl("describe", "agentrun", RUN, check=False).stdout)
        release.uninstall()


def done(release: OperatorRelease) -> bool:
    return succeeded(release.run(RUN)) == "True"


def drain(release: OperatorRelease, node: str, log: Path) -> tuple[int, str]:
    """Drains the node until the drain gives up; the fewest operator pods running (and not
    being deleted) seen meanwhile, and the drain's output."""
    kube = release.kube
    argv = [
        kubectl_binary(), "drain", node, "--ignore-daemonsets", "--delete-emptydir-data",
        "--force", f"--timeout={DRAIN_TIMEOUT_S}s",
    ]  # fmt: skip
    fewest = len(release.operator_pods())
    with log.open("w") as out:
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=kube.control_plane.env(), cwd=REPO
        )
        try:
            deadline = time.monotonic() + DRAIN_TIMEOUT_S + 60
            while process.poll() is None and time.monotonic() < deadline:
                fewest = min(fewest, len(release.operator_pods()))
                time.sleep(0.5)
        finally:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)
    pods = json.loads(kube.kubectl("get", "pods", "-o", "json").stdout)["items"]
    fewest = min(fewest, len(release.operator_pods()))
    states = ", ".join(f"{p['metadata']['name']}={p['status'].get('phase')}" for p in pods)
    return fewest, f"{log.read_text()}\npods after the drain: {states}"
