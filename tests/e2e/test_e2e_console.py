"""The run console on the real cluster: a call cut short by a killed pod, resolved in a browser.

The chart is installed with the console on (``console.enabled``: its own Deployment of the
project's image, its Service, a ServiceAccount that may only list and watch AgentRuns). The demo
booking agent texts the passenger with ``notify_passenger``, which has no idempotency key; that
call lingers (AGENTRUN_DEMO_LINGER=notify), and the pod holding the run is SIGKILLed from the
node and force-deleted while it is in flight. Nobody can say whether the text went out, so the
run becomes ``Indeterminate``. An on-call engineer (a ServiceAccount granted ``agentrun-view``
and ``agentrun-approve``, signing in with its token) finds the call in the console's inbox, says
in the browser that it ran, and watches the run complete without reloading the page: one
booking, one text.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from playwright.sync_api import expect, sync_playwright

from tests.e2e.conftest import MEASURED
from tests.support.cluster import condition, install_operator, lease, succeeded, wait_for
from tests.support.console import CHROMIUM_ARGS, chromium_binary, screenshot, signed_in
from tests.support.kube import REPO, Kube

BOOKING = REPO / "examples" / "booking.yaml"
RUN = "booking"
TTL = 15


def _indeterminate(run: dict[str, Any]) -> bool:
    found = condition(run, "Indeterminate")
    return found is not None and found["status"] == "True"


def test_a_call_cut_short_by_a_killed_pod_is_resolved_in_the_console(
    namespace: Kube, tmp_path: Path
) -> None:
    env = {
        "AGENTRUN_DEMO_LINGER": "notify",
        "AGENTRUN_DEMO_LINGER_SECONDS": "600",
        "AGENTRUN_LEASE_TTL": str(TTL),
        "AGENTRUN_LEASE_RENEW_WITHIN": str(TTL / 3),
    }
    release = install_operator(
        namespace, "agentrun", tmp_path / "demo", env, {"console": {"enabled": True}}
    )
    kube = release.kube
    try:
        kube.kubectl("create", "serviceaccount", "oncall")
        for role in ("agentrun-view", "agentrun-approve"):
            kube.kubectl(
                "create", "rolebinding", f"oncall-{role}", f"--clusterrole={role}",
                f"--serviceaccount={kube.namespace}:oncall",
            )  # fmt: skip
        token = kube.kubectl("create", "token", "oncall").stdout.strip()
        service = kube.kubectl(
            "get", "service", "-l", "app.kubernetes.io/component=console",
            "-o", "jsonpath={.items[0].spec.clusterIP}:{.items[0].spec.ports[0].port}",
        ).stdout.strip()  # fmt: skip
        url = f"http://{service}"

        kube.kubectl("apply", "-f", str(BOOKING))
        wait_for("the text is in flight", 180, lambda: release.count("messages") == 1)
        holder = lease(release.run(RUN)).get("holder")
        assert holder, f"nobody holds the run: {release.run(RUN).get('status')}"
        pod = release.pod_of(holder)
        assert pod is not None, f"holder {holder} is none of {release.operator_pods()}"
        release.sigkill(pod)
        kube.kubectl("delete", "pod", pod, "--grace-period=0", "--force", "--wait=false")
        wait_for("the run to be Indeterminate", 240, lambda: _indeterminate(release.run(RUN)))
        [call] = release.run(RUN)["status"]["indeterminateCalls"]
        assert call["tool"] == "notify_passenger"

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium_binary(), args=CHROMIUM_ARGS
            )
            try:
                page = signed_in(browser, url, token)
                page.goto("/inbox")
                row = page.locator("tr.undecidable", has_text=RUN)
                expect(row).to_contain_text("notify_passenger", timeout=20_000)
                screenshot(page, "e2e-inbox")
                row.locator("a").click()
                section = page.locator(f"#undecidable-{call['callId']}")
                section.locator("input[name=result]").fill("texted")
                section.locator("button.ran").click()
                expect(page.locator("#said")).to_contain_text("your answer was recorded")
                page.evaluate("window.__notReloaded = true")
                wait_for("the run succeeds", 240, lambda: succeeded(release.run(RUN)) == "True")
                done = time.monotonic()
                expect(page.locator("#state")).to_have_text("Completed", timeout=20_000)
                MEASURED.append(
                    f"console: Succeeded=True seen by kubectl -> the page shows it: "
                    f"{time.monotonic() - done:.1f}s"
                )
                assert page.evaluate("window.__notReloaded === true"), "the page was reloaded"
                screenshot(page, "e2e-run-completed")
            finally:
                browser.close()
        [resolution] = release.run(RUN)["spec"]["resolutions"]
        assert resolution["by"] == f"system:serviceaccount:{kube.namespace}:oncall"
        assert release.count("bookings") == 1, "the airline booked twice"
        assert release.count("messages") == 1, "the passenger was texted twice"
    finally:
        print(kube.kubectl("get", "agentruns,pods", "-o", "wide", check=False).stdout)
        release.uninstall()
