"""What a run costs the API server, counted by the API server itself.

Two replicas run a batch of short runs; ``apiserver_request_total`` before and after says how
many requests they cost. Lists and watches are left out (the replicas' watches are long-lived,
and the test's own polling lists), so what is counted is what grows with the number of runs:
the runs' creation, the claims, reads, patches and events. docs/kubernetes.md lists them; the
bound is the issue's target, an upper bound with room for the races between two replicas, never a
timing.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter

from tests.support.agentruns import apply_run, get_run, has_condition
from tests.support.kube import ControlPlane, Kube
from tests.support.operator import Operators, wait_for

RUNS = 20
PER_RUN = 12
"""Requests per run at most, the run's creation included."""

PER_RUN_VERBS = ("GET", "POST", "PATCH", "APPLY", "PUT", "DELETE")
COUNTED = ("agentruns", "agentruns/status", "namespaces", "agents", "events")


def _per_run(counts: Counter[str]) -> Counter[str]:
    return Counter(
        {
            key: value
            for key, value in counts.items()
            if key.split(" ")[0] in PER_RUN_VERBS and key.split(" ")[1] in COUNTED
        }
    )


def _succeeded(kube: Kube) -> int:
    listed = json.loads(kube.kubectl("get", "agentruns", "-o", "json").stdout)["items"]
    return sum(
        any(
            c["type"] == "Succeeded" and c["status"] == "True"
            for c in (run.get("status") or {}).get("conditions") or ()
        )
        for run in listed
    )


def _run_batch(kube: Kube, operators: Operators, prefix: str, count: int) -> None:
    """``count`` runs created at once; returns when every run of the namespace succeeded."""
    manifest = "".join(
        f"---\napiVersion: agentrun.dev/v1alpha1\nkind: AgentRun\nmetadata:\n"
        f"  name: {prefix}-{index:02d}\nspec:\n  agent: texter\n  input: go\n"
        for index in range(count)
    )
    total = _succeeded(kube) + count
    kube.kubectl("apply", "--server-side", "-f", "-", stdin=manifest)
    wait_for(f"{count} runs to succeed", lambda: _succeeded(kube) == total, 120, operators.logs)


def _status_patches(operators: Operators, namespace: str, prefix: str) -> Counter[str]:
    """The status patches of runs named ``prefix``… the replicas sent, by the API server's answer
    (``"409"``), as the replicas' client logs each request it makes: its path and the code."""
    sent = re.compile(
        rf'"PATCH /apis/agentrun\.dev/v1alpha1/namespaces/{re.escape(namespace)}/agentruns/'
        rf'{re.escape(prefix)}[^/" ]*/status HTTP/1\.1" (\d{{3}}) '
    )
    return Counter(
        code for replica in operators.replicas for code in sent.findall(replica.output())
    )


def test_a_run_costs_at_most_twelve_requests(
    control_plane: ControlPlane, kube: Kube, operators: Operators
) -> None:
    before = _per_run(control_plane.requests())
    _run_batch(kube, operators, "counted", RUNS)
    time.sleep(2)  # what the replicas still do once the last run shows succeeded counts too
    cost = _per_run(control_plane.requests()) - before
    spent = sum(cost.values()) / RUNS
    assert spent <= PER_RUN, (spent, {key: value / RUNS for key, value in cost.most_common()})
    # One event a run (``Completed``): a run's first lease posts none (``RunReporter.took_lease``).
    assert cost["POST events"] <= RUNS, cost


def test_replicas_that_know_each_other_send_one_claim_a_run(
    control_plane: ControlPlane, kube: Kube, operators: Operators
) -> None:
    """Both replicas start a daemon for a new run at once; once each has seen the other hold a
    run (a first batch), only the replica the run prefers claims it (``peers``), and the other
    sends no claim for the API server to refuse. Before, of the two claims one was refused for
    nearly every run."""
    # Each replica must see the other hold a run: one still starting when the first batch is
    # over (2.5 s on a loaded machine) would know no peer.
    wait_for(
        "both replicas to watch",
        lambda: all(r.watching() for r in operators.replicas),
        60,
        operators.logs,
    )
    _run_batch(kube, operators, "warm", RUNS // 2)
    before = control_plane.requests(codes=("409", "422"))["PATCH agentruns/status"]
    _run_batch(kube, operators, "claimed", RUNS)
    after = control_plane.requests(codes=("409", "422"))["PATCH agentruns/status"]
    # The API server counts every namespace's refusals, an operator's another test module left
    # running included; the replicas' client logs say which were theirs, and for which runs.
    sent = _status_patches(operators, kube.namespace, "claimed-")
    assert sent["200"] >= RUNS, sent  # a claim a run at least: the logs show the patches
    refused = sent["409"] + sent["422"]
    assert refused <= after - before, (sent, after - before)
    # The others wait for the preferred replica's claim while it shows signs of life, a poll
    # interval (0.3 s here) past the last: on a loaded machine its watch brings some claims later
    # than that, and the other replica claims too (up to 8 of 20 seen on two busy cores). Half
    # the runs still tells the preference working from none, which refused one claim nearly
    # every run.
    assert refused <= RUNS // 2, f"{refused} status patches refused for {RUNS} runs: {sent}"


def test_a_run_deleted_before_it_touched_a_store_goes_at_once_and_its_workers_stop(
    control_plane: ControlPlane, kube: Kube, operators: Operators
) -> None:
    """No finalizer holds a run that never touched a store (kopf keeps none on runs), so its
    deletion is immediate; the ``DELETED`` event stops both replicas' workers, which would
    otherwise look its agent up at every poll interval for ever."""
    apply_run(kube, "ghost", "no-such-agent")
    wait_for(
        "AgentNotRegistered",
        lambda: has_condition(kube, "ghost", "Succeeded", "Unknown", "AgentNotRegistered"),
        60,
        operators.logs,
    )
    assert not get_run(kube, "ghost")["metadata"].get("finalizers")
    kube.kubectl("delete", "agentrun", "ghost", "--wait=true", "--timeout=10s")
    time.sleep(1)
    before = control_plane.requests()["GET agents"]
    time.sleep(3)  # ten poll intervals of the replicas
    assert control_plane.requests()["GET agents"] == before


def test_a_deleted_run_costs_the_operator_one_request(
    control_plane: ControlPlane, kube: Kube, operators: Operators
) -> None:
    """Deleting finished runs: kubectl's ``DELETE``, then the finalizer's removal by the replica
    the run prefers, from the watch event that showed the deletion: one ``PATCH``, no read
    before it (before: a ``GET`` to check the run, another to find the finalizer, the ``PATCH``).
    The other replica looks two poll intervals later, by when the run is usually gone; on a busy
    machine it may read one first, which the bound leaves room for."""
    _run_batch(kube, operators, "deleted", RUNS)
    time.sleep(2)
    before = _per_run(control_plane.requests())
    names = [f"deleted-{index:02d}" for index in range(RUNS)]
    kube.kubectl("delete", "agentruns", *names, "--wait=true", "--timeout=60s")
    time.sleep(2)
    cost = _per_run(control_plane.requests()) - before
    assert cost["DELETE agentruns"] == RUNS, cost
    # kubectl reads each run it is given by name before it deletes it: a GET and a DELETE a run.
    operator = sum(cost.values()) - 2 * RUNS
    assert cost["PATCH agentruns"] >= RUNS, cost  # the finalizer's removals (a 409 counts too)
    assert operator <= RUNS * 3 // 2, (operator / RUNS, cost)
