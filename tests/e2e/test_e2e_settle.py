"""Charges cut short by killed pods are settled by the operator asking the payment service.

The chart is installed as deployed (two replicas of the project's image, the chart's Redis as the
store, the decisions policy on). Several runs of the demo's ``booking-paid`` agent book a seat
and charge the passenger's card with ``charge_card``: keyed, side-effecting, and declaring a
probe (``agentrun.demo.booking``) that asks the payment service what it charged under the call's
key, whose "nothing under this key" is authoritative. Every charge lingers once the service has
acted (AGENTRUN_DEMO_LINGER=charge); then the pods holding the runs are SIGKILLed from the node
and force-deleted, as the OOM killer or a lost node would end them. Nobody can say from the store
whether the cards were charged, so each run turns ``Indeterminate``; nobody answers. The
replica that takes each run over asks the service 5 s later (the demo's delay), appends the
answer to ``spec.resolutions`` as the operator's ServiceAccount with the service's evidence, and
carries the run on: every run completes, and every card was charged exactly once.
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path
from typing import Any

from tests.e2e.conftest import MEASURED
from tests.support.cluster import condition, install_operator, lease, succeeded, wait_for
from tests.support.kube import Kube

RUNS = ("paid-1", "paid-2", "paid-3", "paid-4")
TTL = 15


def _manifest(name: str) -> str:
    return textwrap.dedent(f"""\
        apiVersion: agentrun.dev/v1alpha1
        kind: AgentRun
        metadata:
          name: {name}
        spec:
          agent: booking-paid
          input: Book Ada to Lisbon and charge her card.
        """)


def _indeterminate(run: dict[str, Any]) -> bool:
    found = condition(run, "Indeterminate")
    return found is not None and found["status"] == "True"


def test_charges_cut_short_by_killed_pods_are_settled_by_asking_the_service(
    namespace: Kube, tmp_path: Path
) -> None:
    env = {
        "AGENTRUN_DEMO_LINGER": "charge",
        "AGENTRUN_DEMO_LINGER_SECONDS": "600",
        "AGENTRUN_LEASE_TTL": str(TTL),
        "AGENTRUN_LEASE_RENEW_WITHIN": str(TTL / 3),
    }
    release = install_operator(namespace, "agentrun", tmp_path / "demo", env)
    kube = release.kube
    try:
        for name in RUNS:
            kube.kubectl("apply", "-f", "-", stdin=_manifest(name))
        wait_for("every card charged once", 240, lambda: release.count("charges") == len(RUNS))
        holders = {lease(release.run(name)).get("holder") for name in RUNS}
        pods = {release.pod_of(holder) for holder in holders if holder}
        assert None not in pods, f"holders {holders}, pods {release.operator_pods()}"
        assert pods, f"nobody holds the runs: {holders}"
        for pod in sorted(p for p in pods if p):
            release.sigkill(pod)
            kube.kubectl("delete", "pod", pod, "--grace-period=0", "--force", "--wait=false")
        killed = time.monotonic()
        # Every run went undecidable (its charge was in flight when its worker died) and
        # nobody answered; the operator's settler does.
        wait_for(
            "every run to complete",
            300,
            lambda: all(succeeded(release.run(n)) == "True" for n in RUNS),
        )
        settled = time.monotonic() - killed
        MEASURED.append(
            f"{len(RUNS)} charges cut short by {len(pods)} SIGKILLed pods -> settled by the "
            f"operator and completed: {settled:.1f}s (lease ttl {TTL}s, settle delay 5s)"
        )
        assert release.count("charges") == len(RUNS)  # no card charged twice
        operator_users = set()
        for name in RUNS:
            run = release.run(name)
            assert not _indeterminate(run), run["status"]
            [resolution] = run["spec"]["resolutions"]
            assert resolution["outcome"] == "ran", resolution
            assert json.loads(resolution["result"])["charge"].startswith("ch_"), resolution
            assert "the payment service holds ch_" in resolution["evidence"], resolution
            operator_users.add(resolution["by"])
            events = json.loads(
                kube.kubectl(
                    "get", "events", "--field-selector",
                    f"involvedObject.name={name},reason=Settled", "-o", "json",
                ).stdout
            )["items"]  # fmt: skip
            assert events, f"no Settled event for {name}"
        [by] = operator_users
        assert by.startswith(f"system:serviceaccount:{kube.namespace}:"), by
    finally:
        print(kube.kubectl("get", "agentruns", "-o", "wide", check=False).stdout)
        print(kube.kubectl("describe", "agentrun", RUNS[0], check=False).stdout)
        release.uninstall()
