"""The pod holding a run's lease is force-deleted mid-run; another replica finishes it, once.

The chart is installed with ``helm install`` (two replicas of the project's image, the chart's
Redis as the store); examples/booking.yaml is applied; the demo agent books a seat and then
lingers (AGENTRUN_DEMO_LINGER=book), and at that moment the holder's pod is force-deleted, as a
person clearing a stuck pod would. Either the kubelet stops its container with SIGTERM (the
operator hands its lease back) or its process was SIGKILLed first from the node, as the OOM
killer or a lost node would end it (nothing is handed back; the lease must lapse). The run must
still reach Succeeded, under a higher fence, with exactly one booking at the airline and one
text sent. Measured: the time from the kill to another replica holding the lease, with the
default lease TTL and with 15 s.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import MEASURED
from tests.support.cluster import OperatorRelease, install_operator, lease, succeeded, wait_for
from tests.support.kube import REPO, Kube

BOOKING = REPO / "examples" / "booking.yaml"
RUN = "booking"


@pytest.mark.parametrize("lease_ttl", [None, 15], ids=["default-ttl", "ttl-15s"])
@pytest.mark.parametrize("sigkill", [False, True], ids=["sigterm", "sigkill"])
def test_holder_pod_force_deleted_mid_run_another_replica_books_once(
    namespace: Kube, tmp_path: Path, lease_ttl: int | None, sigkill: bool
) -> None:
    env = {}
    if lease_ttl is not None:
        env = {
            "AGENTRUN_LEASE_TTL": str(lease_ttl),
            "AGENTRUN_LEASE_RENEW_WITHIN": str(lease_ttl / 3),
        }
    release = install_operator(namespace, "agentrun", tmp_path / "demo", env)
    try:
        takeover = kill_holder_and_time_takeover(release, sigkill)
        ttl = f"{lease_ttl}s" if lease_ttl else "default (60s)"
        how = "SIGKILLed and force-deleted" if sigkill else "force-deleted (SIGTERM)"
        MEASURED.append(f"holder pod {how} -> another holds the lease: {takeover:.1f}s, ttl {ttl}")
    finally:
        print(namespace.kubectl("get", "agentruns", "-o", "wide", check=False).stdout)
        print(namespace.kubectl("describe", "agentrun", RUN, check=False).stdout)
        release.uninstall()


def kill_holder_and_time_takeover(release: OperatorRelease, sigkill: bool) -> float:
    kube = release.kube
    assert len(release.operator_pods()) == 2
    kube.kubectl("apply", "-f", str(BOOKING))

    # The booking tool acted and lingers: the moment a confirmation is still outstanding.
    wait_for("the booking tool ran", 120, lambda: release.count("bookings") == 1)
    before = lease(release.run(RUN))
    holder = before.get("holder")
    assert holder, f"nobody holds the run after it booked: {release.run(RUN).get('status')}"
    pod = release.pod_of(holder)
    assert pod is not None, f"holder {holder} is none of {release.operator_pods()}"
    assert succeeded(release.run(RUN)) != "True"

    killed = time.monotonic()
    if sigkill:
        release.sigkill(pod)
    kube.kubectl("delete", "pod", pod, "--grace-period=0", "--force", "--wait=false")

    def taken_over() -> dict[str, Any] | None:
        now = lease(release.run(RUN))
        if now.get("holder") and not str(now["holder"]).startswith(f"{pod}-"):
            return now
        return None

    after = wait_for(f"another replica takes the run over from {pod}", 180, taken_over)
    takeover = time.monotonic() - killed
    assert int(after["fence"]) > int(before["fence"])

    wait_for("the run succeeds", 240, lambda: succeeded(release.run(RUN)) == "True")
    assert int(release.run(RUN)["status"].get("resumeCount", 0)) >= 1
    assert release.count("bookings") == 1, "the airline booked twice"
    assert release.count("messages") == 1, "the passenger was texted twice"
    return takeover
