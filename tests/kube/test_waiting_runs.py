"""A run that waits on a person costs nothing while nothing about it changes, and wakes on the
watch event that changes it.

Two real replicas, a real API server and Redis. Runs parked on an approval nobody gives are
watched for a window: the API server counts every request it served (``apiserver_request_total``)
and Redis every command (``INFO commandstats``). Before the scheduler, each replica kept a
daemon per unfinished run that re-read its Agent and asked the store at every poll (two requests
and six commands a run a second, here over a thousand commands in the window). What the replicas
may still spend in it is their own heartbeats, a number that does not grow with the runs.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter

from tests.support.agentruns import get_run, has_condition
from tests.support.kube import ControlPlane, Kube
from tests.support.operator import Operators, wait_for
from tests.support.redis_server import RedisServer

from agentrun.operator._heartbeat import TTL

RUNS = 20
WINDOW = 10.0
"""Seconds the parked runs are watched for."""

REPLICAS = 2
HEARTBEATS = REPLICAS * (math.ceil(WINDOW / (TTL / 3)) + 1)
"""Renewals the replicas' heartbeats may send in the window: one each a third of the heartbeat's
TTL at most (``_heartbeat``), whatever the number of runs."""

WRITES = ("GET", "POST", "PATCH", "APPLY", "PUT", "DELETE")
OPERATORS = ("agentruns", "agentruns/status", "agents", "agents/status", "namespaces", "events")
"""What the operator reads and writes (the API server's own leases and endpoints are not)."""


def _commands(redis: RedisServer) -> Counter[str]:
    """Every command Redis has served, by command, but ``INFO`` (this test's own)."""
    counts: Counter[str] = Counter()
    for line in redis.cli("INFO", "commandstats").splitlines():
        if line.startswith("cmdstat_") and not line.startswith("cmdstat_info:"):
            name, stats = line.removeprefix("cmdstat_").split(":", 1)
            counts[name] = int(dict(kv.split("=") for kv in stats.split(","))["calls"])
    return counts


def _requests(control_plane: ControlPlane) -> Counter[str]:
    """What the API server served of the operator's resources, but watches and lists
    (long-lived, and the test's own)."""
    return Counter(
        {
            key: value
            for key, value in control_plane.requests().items()
            if key.split(" ")[0] in WRITES and key.split(" ")[1] in OPERATORS
        }
    )


def _parked(kube: Kube, prefix: str) -> int:
    listed = json.loads(kube.kubectl("get", "agentruns", "-o", "json").stdout)["items"]
    return sum(
        run["metadata"]["name"].startswith(prefix)
        and any(
            c["type"] == "AwaitingApproval" and c["status"] == "True"
            for c in (run.get("status") or {}).get("conditions") or ()
        )
        for run in listed
    )


def test_runs_waiting_on_a_person_cost_no_request_and_no_store_command(
    control_plane: ControlPlane, kube: Kube, operators: Operators, redis: RedisServer
) -> None:
    manifest = "".join(
        f"---\napiVersion: agentrun.dev/v1alpha1\nkind: AgentRun\nmetadata:\n"
        f"  name: parked-{index:02d}\nspec:\n  agent: approver\n  input: refund\n"
        for index in range(RUNS)
    )
    kube.kubectl("apply", "--server-side", "-f", "-", stdin=manifest)
    wait_for(
        f"{RUNS} runs to wait on approval",
        lambda: _parked(kube, "parked-") == RUNS,
        120,
        operators.logs,
    )
    time.sleep(2)  # the last status writes' events reach both replicas
    requests, commands = _requests(control_plane), _commands(redis)
    time.sleep(WINDOW)
    spent_requests = _requests(control_plane) - requests
    spent_commands = _commands(redis) - commands
    assert not spent_requests, spent_requests
    # A renewal is one script (``EVALSHA``); Redis counts the commands it runs too, once each.
    renewals = spent_commands.pop("evalsha", 0)
    assert renewals <= HEARTBEATS, (renewals, spent_commands)
    assert all(count <= renewals for count in spent_commands.values()), spent_commands

    # And a decision wakes the run it is for, from the watch event of the edit.
    name = "parked-07"
    pending = get_run(kube, name)["status"]["pendingApproval"]
    patch = {
        "spec": {
            "approvals": [{"requestId": pending["requestId"], "decision": "approve", "by": "alice"}]
        }
    }
    alice = kube.grant("alice", "agentrun-approve")
    alice.kubectl("patch", "agentrun", name, "--type=merge", "-p", json.dumps(patch))
    wait_for(
        f"{name} to complete",
        lambda: has_condition(kube, name, "Succeeded", "True", "Completed"),
        30,
        operators.logs,
    )
    assert _parked(kube, "parked-") == RUNS - 1
