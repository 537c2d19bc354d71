"""``AGENTRUN_MAX_ACTIVE_RUNS``: a replica drives at most that many runs at once, and leaves the
rest to a replica with room, so a batch of queued runs is spread instead of taken whole by the
replica that saw it first.

Two replicas limited to one run each; four runs of ``patient`` (7 s of waiting each) applied at
once. Sampled from one list of the runs at a time (one resourceVersion, so a consistent view): no
replica ever holds two runs, both replicas hold one at some point, and every run succeeds. A
holder writes its last status (no holder in it) before it gives its slot back, so the view never
shows a finished run still held.
"""

from __future__ import annotations

import json
import time
from collections import Counter

from tests.support.kube import Kube
from tests.support.operator import Operators

RUNS = 4


OPERATOR_ENV = {"AGENTRUN_MAX_ACTIVE_RUNS": "1"}
"""Two replicas (``conftest.operators``), each limited to one run at a time."""


def _holders(kube: Kube) -> tuple[Counter[str], int]:
    """Runs held per replica (by pod name, the holder's first part) and how many succeeded."""
    listed = json.loads(kube.kubectl("get", "agentruns", "-o", "json").stdout)["items"]
    held: Counter[str] = Counter()
    succeeded = 0
    for run in listed:
        status = run.get("status") or {}
        holder = (status.get("lease") or {}).get("holder")
        if holder:
            held[str(holder).rsplit("-", 2)[0]] += 1  # pod-pid-token
        succeeded += any(
            c["type"] == "Succeeded" and c["status"] == "True"
            for c in status.get("conditions") or ()
        )
    return held, succeeded


def test_each_replica_drives_at_most_its_limit_and_the_other_takes_the_rest(
    kube: Kube, operators: Operators
) -> None:
    manifest = "".join(
        f"---\napiVersion: agentrun.dev/v1alpha1\nkind: AgentRun\nmetadata:\n"
        f"  name: limited-{index}\nspec:\n  agent: patient\n  input: go\n"
        for index in range(RUNS)
    )
    kube.kubectl("apply", "--server-side", "-f", "-", stdin=manifest)
    most: Counter[str] = Counter()
    ever: set[str] = set()
    deadline = time.monotonic() + 150
    succeeded = 0
    while succeeded < RUNS:
        assert time.monotonic() < deadline, (dict(most), succeeded, operators.logs())
        held, succeeded = _holders(kube)
        for replica, count in held.items():
            most[replica] = max(most[replica], count)
            ever.add(replica)
        time.sleep(0.2)
    assert max(most.values()) == 1, (dict(most), operators.logs())
    assert ever == {"replica-a", "replica-b"}, (ever, operators.logs())
