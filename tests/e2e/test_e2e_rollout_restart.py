"""``kubectl rollout restart`` of the operator while a keyless, side-effecting call is in flight.

The demo booking agent texts the passenger with ``notify_passenger``, which has no idempotency
key: if the call is cut short nobody can say whether the text went out, and the run becomes
``Indeterminate`` and waits for a person. Here that call lingers (AGENTRUN_DEMO_LINGER=notify)
and the operator's Deployment is restarted as every upgrade, drain and config change does it:
each old pod gets SIGTERM while its replacement runs. The replica holding the run must let the
call in flight finish, hand the lease over, and another replica must finish the run: Succeeded,
never Indeterminate, exactly one text and one booking, under a higher fence, taken over long
before the lease's TTL would have lapsed. Measured: SIGTERM of the holder to another holder.

The text stays in flight until the test has seen the holder's pod told to stop
(``deletionTimestamp``): only then does it write the demo services' ``release-notify`` file, which
ends the linger. So the rollout reaches the holder while the call is in flight however slowly the
machine rolls it out (it once came after a fixed linger had run out, and tested nothing).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.e2e.conftest import MEASURED
from tests.support.cluster import OperatorRelease, condition, install_operator, lease, succeeded
from tests.support.kube import REPO, Kube

BOOKING = REPO / "examples" / "booking.yaml"
RUN = "booking"
LINGER_S = 300  # at most: the test ends the linger once it has seen the holder told to stop
LEASE_TTL_S = 60  # the default: a takeover well within it is a handover, not a lapse


def test_rollout_restart_lets_the_keyless_call_finish_and_hands_the_run_over(
    namespace: Kube, tmp_path: Path
) -> None:
    env = {"AGENTRUN_DEMO_LINGER": "notify", "AGENTRUN_DEMO_LINGER_SECONDS": str(LINGER_S)}
    release = install_operator(namespace, "agentrun", tmp_path / "demo", env)
    try:
        restart_while_texting(release)
    finally:
        print(namespace.kubectl("get", "agentruns", "-o", "wide", check=False).stdout)
        print(namespace.kubectl("describe", "agentrun", RUN, check=False).stdout)
        release.uninstall()


def pod_stopping(kube: Kube, pod: str) -> bool:
    """The pod is being deleted (its containers got SIGTERM) or already gone."""
    found = kube.kubectl("get", "pod", pod, "--ignore-not-found", "-o", "json").stdout.strip()
    return not found or "deletionTimestamp" in json.loads(found)["metadata"]


def restart_while_texting(release: OperatorRelease) -> None:
    kube = release.kube
    kube.kubectl("apply", "-f", str(BOOKING))
    deadline = time.monotonic() + 120
    while release.count("messages") == 0:
        assert time.monotonic() < deadline, "the run never texted the passenger within 120s"
        time.sleep(0.3)
    texted = time.monotonic()
    before = lease(release.run(RUN))
    holder_pod = release.pod_of(str(before.get("holder", "")))
    assert holder_pod, f"nobody holds the run while it texts: {before}"

    kube.kubectl("rollout", "restart", f"deployment/{release.deployment()}")
    while not pod_stopping(kube, holder_pod):
        assert time.monotonic() < texted + LINGER_S - 30, (
            f"the rollout did not reach the holder's pod {holder_pod} while the text lingered"
        )
        time.sleep(0.5)
    stopped = time.monotonic()
    assert release.count("messages") == 1, "the text was made again before its pod stopped"
    (release.demo_dir / "release-notify").touch()  # the text in flight may end now
    taken_over: float | None = None
    run = release.run(RUN)
    deadline = time.monotonic() + 300
    while succeeded(run) not in ("True", "False") and not is_indeterminate(run):
        assert time.monotonic() < deadline, f"the run did not finish in 300s: {run.get('status')}"
        time.sleep(0.5)
        run = release.run(RUN)
        now = lease(run)
        # The fence moves when another replica takes the lease; the holder's name may already be
        # cleared again by then (a run that stops shows nobody holding it).
        if taken_over is None and now.get("fence") not in (None, before.get("fence")):
            taken_over = time.monotonic()
    after = lease(run)

    rollout = kube.kubectl(
        "rollout", "status", f"deployment/{release.deployment()}", "--timeout=180s", check=False
    )
    assert not is_indeterminate(run), (
        "the run became Indeterminate: the text in flight was cut short by SIGTERM; "
        f"conditions {run['status'].get('conditions')}, "
        f"indeterminateCalls {run['status'].get('indeterminateCalls')}"
    )
    assert succeeded(run) == "True", f"the run did not succeed: {run['status'].get('conditions')}"
    assert release.count("messages") == 1, f"{release.count('messages')} texts, not one"
    assert release.count("bookings") == 1, f"{release.count('bookings')} bookings, not one"
    assert taken_over is not None, "no other replica ever took the run over"
    assert int(after["fence"]) > int(before["fence"]), f"fence {before} -> {after}"
    resumed = kube.kubectl(
        "get", "events", "--field-selector", f"involvedObject.name={RUN},reason=RunResumed",
        "-o", "jsonpath={.items[*].message}",
    ).stdout  # fmt: skip
    assert resumed, "no RunResumed event: nobody carried the run on"
    assert not resumed.startswith(f"{holder_pod}-"), f"the stopped pod resumed it: {resumed}"
    handover = taken_over - stopped
    MEASURED.append(f"rollout restart: holder SIGTERMed -> another holds the run: {handover:.1f}s")
    assert handover < LEASE_TTL_S - 10, (
        f"the run was taken over {handover:.1f}s after its holder got SIGTERM: "
        "the lease lapsed instead of being handed over"
    )
    assert rollout.returncode == 0, f"the rollout did not complete: {rollout.stderr}"


def is_indeterminate(run: dict[str, Any]) -> bool:
    found = condition(run, "Indeterminate")
    status = run.get("status", {})
    reason = (condition(run, "Succeeded") or {}).get("reason")
    return (
        (found is not None and found["status"] == "True")
        or bool(status.get("indeterminateCalls"))
        or reason == "Indeterminate"
    )
