"""What runs parked on a person cost while nothing changes, and how soon an approval wakes one.

``python3 -m bench.parked_runs`` (``make bench-parked``) starts the throwaway control plane, Redis
and two operator replicas of ``bench.operator_scale``, installs the chart's access control beside
the CRDs (the decision policy and the user roles, as ``tests/support/chart.py`` does for the
tests) so that approvals are authenticated as in a cluster, then:

1. **before any run** — each replica's RSS (``VmRSS``);
2. **working alone** (with ``--working`` W > 0) — W runs of agent ``slow`` (a tool that waits)
   created at once and timed to the last ``Succeeded=True``: runs per second, and the replicas'
   CPU over that time;
3. **parking** — ``--parked`` N runs of agent ``parked`` (a refund held for an approval nobody
   gives) created by POSTs, a line every 1,000, and waited for until each shows
   ``AwaitingApproval=True``;
4. **quiet window** — nothing else running, nothing changing, for ``--quiet-window`` seconds:
   kube-apiserver's ``apiserver_request_total`` by verb and resource and Redis' ``INFO
   commandstats`` by command, each read before and after, and every process's CPU (utime +
   stime from /proc): per parked run per minute, and each replica's CPU as a share of a core;
   then each replica's RSS per parked run, against its RSS before any run;
5. **working beside** (with W > 0) — the same W working runs, in another namespace, beside the N
   parked: runs per second, and the replicas' CPU against the same runs alone, which is what the
   parked runs cost while others work;
6. **resume** — an approval appended to ``--resume`` K parked runs, each by a user granted the
   chart's ``agentrun-approve`` role, impersonated, with ``by`` their own name (what the decision
   policy lets a person append), each timed from its patch until the watch shows its status moved
   on (``AwaitingApproval`` no longer True): p50, p99, max;
7. **delete** — ``kubectl delete agentruns --all --wait`` of the parked namespace (the N runs,
   K of them finished by then), timed to kubectl's exit and to the last run gone, stopped after
   ``--delete-timeout``;
8. **delete's baseline** — as many ConfigMaps, which no controller acts on, in a namespace of
   their own, deleted by the same command: what ``kubectl delete --wait`` takes by itself for N
   objects on this API server (it waits for each object in turn, at its client's default of 5
   requests a second), against which its time for the runs is read.

Only the API server, Redis and /proc are observed: the figures mean the same whatever the
operator does inside. The benchmark's own ``INFO`` before the window is taken out of the
counts, and its watches are closed before the window opens. A command, never a test: timings
on a shared 2-core machine are evidence to read. Every process it starts is stopped by its pid,
on success, failure or Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from kubernetes import client
from kubernetes.config import new_client_from_config
from tests.support.chart import decision_policy_enforced, install_cluster_objects
from tests.support.kube import REPO, Kube
from tests.support.operator import wait_for

import redis
from agentrun.operator._resource import GROUP, PLURAL, VERSION
from bench.operator_scale import (
    CONFIGMAPS,
    Bench,
    Table,
    Usage,
    Watcher,
    awaiting_approval,
    command,
    condition,
    delete_runs,
    percentile,
    post_configmaps,
    post_runs,
    replicas_up,
    rss_kib,
    succeeded,
    working_folder,
)

NAMESPACES = {
    "parked": "bench-parked",
    "alone": "bench-working-alone",
    "beside": "bench-working-beside",
}
BASELINE_NAMESPACE = "bench-delete-baseline"
"""The delete's baseline ConfigMaps: no replica watches it."""
APPROVER = "approver"
"""The person who approves: granted the chart's roles for the parked namespace, impersonated."""
PARKED_AGENT = "parked"
WORKING_AGENT = "slow"
CREATORS = 8
"""Concurrent POSTs creating runs."""
QUICK = {"parked": 200, "working": 20, "quiet_window": 20.0, "resume": 20, "delete_timeout": 120.0}
DEFAULTS = {
    "parked": 10_000,
    "working": 200,
    "quiet_window": 60.0,
    "resume": 100,
    "delete_timeout": 600.0,
}


def store_commands(url: str) -> Counter[str]:
    """Redis' calls so far by command (``INFO commandstats``), this read's own ``INFO`` left out
    of the next one's count."""
    with contextlib.closing(redis.Redis.from_url(url)) as connection:
        stats: dict[str, Any] = connection.info("commandstats")
    return Counter(
        {
            name.removeprefix("cmdstat_").upper(): int(found["calls"])
            for name, found in stats.items()
        }
    )


def rates(counts: Counter[str], parked: int, minutes: float) -> tuple[str, str]:
    """The total a minute, and the per-parked-run rate with the breakdown, for a ``Table`` row."""
    total = sum(counts.values())
    breakdown = ", ".join(
        f"{key} {value / minutes:.0f}/min ({value / max(parked, 1) / minutes:.3f} a run)"
        for key, value in counts.most_common()
    )
    return (
        f"{total / minutes:.0f}/min",
        f"{total / max(parked, 1) / minutes:.3f} per parked run per minute"
        + (f"; {breakdown}" if breakdown else ""),
    )


def replicas_rss(bench: Bench) -> dict[str, int]:
    return {name: rss_kib(r.process.pid) for name, r in bench.replicas.items()}


def quiet(watcher: Watcher) -> None:
    """Close ``watcher`` and wait for its thread, so no request of the benchmark's falls in the
    window (a watch is counted when it ends)."""
    watcher.closing.set()
    watcher.thread.join(timeout=30)


# -- decisions, authenticated as in a cluster ----------------------------------------------------


def authenticate_decisions(bench: Bench, namespace: str) -> None:
    """The chart's cluster-wide objects (the decision policy, the user roles), enforced, and
    ``APPROVER`` granted ``agentrun-edit`` and ``agentrun-approve`` in ``namespace``."""
    assert bench.plane is not None
    admin = Kube(bench.plane, "default", bench.kubectl_bin)
    install_cluster_objects(admin)
    wait_for("the decision policy to be enforced", lambda: decision_policy_enforced(admin), 60)
    Kube(bench.plane, namespace, bench.kubectl_bin).grant(
        APPROVER, "agentrun-edit", "agentrun-approve"
    )


@contextlib.contextmanager
def approver_api(bench: Bench) -> Iterator[client.CustomObjectsApi]:
    """The administrator's credentials acting as ``APPROVER`` (``Impersonate-User``, what
    ``kubectl --as`` sends): the API server authorizes and admits the request as that person."""
    assert bench.plane is not None
    api: client.ApiClient = new_client_from_config(  # type: ignore[no-untyped-call]
        config_file=str(bench.plane.kubeconfig)
    )
    api.set_default_header("Impersonate-User", APPROVER)  # type: ignore[no-untyped-call]
    try:
        yield client.CustomObjectsApi(api)
    finally:
        api.close()  # type: ignore[no-untyped-call]


def moved_on(body: dict[str, Any]) -> bool:
    """The run no longer waits on its approval: the condition went False, or the run ended."""
    return condition(body, "AwaitingApproval").get("status") == "False" or succeeded(body)


# -- phases ---------------------------------------------------------------------------------------


def phase_working(
    bench: Bench, table: Table, count: int, namespace: str, label: str, budget: float
) -> tuple[float, float]:
    """``count`` runs of ``WORKING_AGENT`` created at once and timed to the last
    ``Succeeded=True``; the replicas' CPU-seconds meanwhile and the seconds it took, returned."""
    print(f"working {label}: {count} runs of agent {WORKING_AGENT}", flush=True)
    usage = Usage.start(bench)
    with Watcher(bench, namespace, succeeded) as watcher:
        began = time.monotonic()
        post_runs(bench, namespace, count, WORKING_AGENT, CREATORS, prefix="working")
        watcher.wait(count, began + budget, f"working {label}")
        wall, cpu, _ = usage.stop()
        with watcher.lock:
            done = [r.ended for r in watcher.runs.values() if r.outcome == "ok" and r.ended]
            failed = Counter(
                r.outcome for r in watcher.runs.values() if r.outcome not in ("", "ok")
            )
    quiet(watcher)
    end = max(done) - began if len(done) == count else time.monotonic() - began
    table.add(
        f"{count} working runs {label}: created -> all Succeeded",
        f"{len(done) / end:.2f} runs/s",
        f"{len(done)}/{count} done in {end:.1f} s"
        + ("" if len(done) == count else f" (stopped at {budget:.0f} s)")
        + (f"; failed {dict(failed)}" if failed else ""),
    )
    cores = {name: cpu[name] / wall for name in bench.replicas}
    table.add(
        f"{count} working runs {label}: replicas' CPU",
        f"{sum(cores.values()) * 100:.0f} % of a core",
        ", ".join(f"{name} {share * 100:.1f} %" for name, share in sorted(cores.items()))
        + f" over {wall:.0f} s",
    )
    return sum(cpu[name] for name in bench.replicas), wall


def phase_park(bench: Bench, table: Table, count: int, namespace: str, budget: float) -> list[str]:
    """``count`` runs of ``PARKED_AGENT``, waited for until they await their approval; the names
    of those that do."""
    print(f"parking: {count} runs of agent {PARKED_AGENT}, a line every 1,000 created", flush=True)
    with Watcher(bench, namespace, awaiting_approval) as watcher:
        began = time.monotonic()
        post_runs(bench, namespace, count, PARKED_AGENT, CREATORS, prefix="parked", every=1000)
        created = time.monotonic() - began
        watcher.wait(count, began + budget, "parked")
        took = time.monotonic() - began
        with watcher.lock:
            parked = sorted(name for name, r in watcher.runs.items() if r.outcome == "ok")
            failed = Counter(
                r.outcome for r in watcher.runs.values() if r.outcome not in ("", "ok")
            )
    quiet(watcher)
    table.add(
        f"{count} runs: created -> AwaitingApproval=True",
        f"{took:.0f} s",
        f"{len(parked)}/{count} parked; {CREATORS} concurrent POSTs took {created:.0f} s"
        + ("" if len(parked) == count else f" (stopped at {budget:.0f} s)")
        + (f"; failed {dict(failed)}" if failed else ""),
    )
    return parked


def phase_quiet(
    bench: Bench, table: Table, parked: int, window: float, idle: dict[str, int]
) -> None:
    """The quiet window: requests, store commands and CPU per parked run, then RSS."""
    assert bench.redis is not None
    print(f"quiet window: {window:.0f} s with {parked} runs parked and nothing else", flush=True)
    usage = Usage.start(bench)
    commands = store_commands(bench.redis.url)
    time.sleep(window)
    after = store_commands(bench.redis.url)
    wall, cpu, requests = usage.stop()
    commands = after - commands
    commands["INFO"] -= 1  # the read before the window
    commands = +commands
    minutes = wall / 60
    label = f"quiet {wall:.0f} s, {parked} parked"
    table.add(f"{label}: API requests", *rates(requests, parked, minutes))
    table.add(f"{label}: store commands", *rates(commands, parked, minutes))
    for name in sorted(bench.replicas):
        table.add(
            f"{label}: CPU {name}",
            f"{cpu[name] / wall * 100:.1f} % of a core",
            f"{cpu[name]:.1f} CPU-s; "
            f"{cpu[name] / wall * 100 / max(parked, 1):.4f} % of a core per parked run",
        )
    servers = ("kube-apiserver", "etcd", "redis", "this benchmark + kubectl")
    table.add(
        f"{label}: CPU of the rest",
        f"{sum(cpu[n] for n in servers) / wall * 100:.1f} % of a core",
        ", ".join(f"{n} {cpu[n] / wall * 100:.1f} %" for n in servers),
    )
    alive = replicas_rss(bench)
    for name in sorted(bench.replicas):
        table.add(
            f"RSS {name}, per parked run",
            f"{(alive[name] - idle[name]) / max(parked, 1):.1f} KiB",
            f"{idle[name] / 1024:.1f} MiB before any run -> {alive[name] / 1024:.1f} MiB with "
            f"{parked} parked",
        )


def phase_resume(
    bench: Bench, table: Table, parked: Sequence[str], count: int, namespace: str, budget: float
) -> int:
    """An approval appended to ``count`` of the ``parked`` runs by ``APPROVER``, each timed from
    its patch until the watch shows its run moved on; how many did."""
    chosen = list(parked[:: max(1, len(parked) // count)][:count])
    print(f"resume: approving {len(chosen)} parked runs as {APPROVER}", flush=True)
    patched: dict[str, float] = {}
    with Watcher(bench, namespace, moved_on) as watcher, approver_api(bench) as approver:
        while watcher.counts()[0] < len(parked):  # listed: nothing is seen late
            time.sleep(0.2)
        for name in chosen:
            pending = (bench.get(namespace, name).get("status") or {})["pendingApproval"]
            approval = {"requestId": pending["requestId"], "decision": "approve", "by": APPROVER}
            patched[name] = time.monotonic()
            approver.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name, {"spec": {"approvals": [approval]}}
            )
        watcher.wait(len(chosen), time.monotonic() + budget, "resumed")
        with watcher.lock:
            ended = {name: watcher.runs[name] for name in chosen if watcher.runs[name].ended}
    quiet(watcher)
    latencies = [run.ended - patched[name] for name, run in ended.items() if run.ended]
    outcomes = Counter(run.outcome for run in ended.values())
    if not latencies:
        table.add(f"resume {len(chosen)}: approval -> moved on", "none moved on", "")
        return 0
    table.add(
        f"resume {len(chosen)}: approval -> moved on",
        f"p50 {statistics.median(latencies):.2f} s",
        f"p99 {percentile(latencies, 0.99):.2f} s, max {max(latencies):.2f} s; "
        f"{len(latencies)}/{len(chosen)} moved on (outcomes {dict(outcomes)}); approved by "
        f"{APPROVER} through impersonation, the chart's decision policy enforced",
    )
    return len(latencies)


def phase_delete_baseline(bench: Bench, table: Table, count: int, timeout: float) -> None:
    """``count`` ConfigMaps deleted as the runs were: kubectl's own time for as many objects."""
    print(f"delete's baseline: {count} configmaps in {BASELINE_NAMESPACE}", flush=True)
    bench.kubectl("create", "namespace", BASELINE_NAMESPACE)
    post_configmaps(bench, BASELINE_NAMESPACE, count, CREATORS)
    label = f"delete {count} configmaps (baseline: no controller, no finalizer)"
    delete_runs(bench, table, label, BASELINE_NAMESPACE, timeout, CONFIGMAPS)


# -- the command ----------------------------------------------------------------------------------


def commit() -> str:
    found = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    )
    return found.stdout.strip() or "(not a git checkout)"


def run(args: argparse.Namespace) -> None:
    for name, default in (QUICK if args.quick else DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    table = Table()
    load, measured = os.getloadavg(), commit()
    with contextlib.ExitStack() as stack:
        workdir = working_folder(stack, args.workdir)
        bench = replicas_up(stack, args, workdir, NAMESPACES.values())
        try:
            authenticate_decisions(bench, NAMESPACES["parked"])
            time.sleep(3)
            idle = replicas_rss(bench)
            alone = (0.0, 0.0)
            if args.working:
                alone = phase_working(
                    bench, table, args.working, NAMESPACES["alone"], "alone", args.budget
                )
            parked = phase_park(bench, table, args.parked, NAMESPACES["parked"], args.budget)
            time.sleep(args.settle)
            phase_quiet(bench, table, len(parked), args.quiet_window, idle)
            if args.working:
                beside = phase_working(
                    bench, table, args.working, NAMESPACES["beside"],
                    f"beside {len(parked)} parked", args.budget,
                )  # fmt: skip
                extra, wall = beside[0] - alone[0], beside[1]
                table.add(
                    f"parked runs' share of the replicas' CPU while {args.working} work",
                    f"{extra / wall * 100:+.0f} % of a core",
                    f"the replicas' CPU-seconds for the same {args.working} runs beside the "
                    f"parked ones ({beside[0]:.1f}) less alone ({alone[0]:.1f}): {extra:+.1f} "
                    f"CPU-s over the {wall:.0f} s they took beside them (noise either way)",
                )
            resumed = 0
            if args.resume and parked:
                resumed = phase_resume(
                    bench, table, parked, args.resume, NAMESPACES["parked"], args.budget
                )
            delete_runs(
                bench, table, f"delete {args.parked} runs ({len(parked) - resumed} still parked)",
                NAMESPACES["parked"], args.delete_timeout,
            )  # fmt: skip
            phase_delete_baseline(bench, table, args.parked, args.delete_timeout)
        finally:
            if table.rows:
                end = os.getloadavg()
                table.notes.append(
                    f"commit {measured}, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} "
                    f"UTC; 2 replicas, poll interval {args.poll_interval} s, kopf flag "
                    f"{args.log_flag or '(none: INFO)'}; {os.cpu_count()} cores, load average "
                    f"{load[0]:.2f} at the start, {end[0]:.2f} at the end; logs in {workdir}"
                )
                table.print()
            if args.workdir is None:
                print("(the logs go with the temporary folder; pass --workdir to keep them)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m bench.parked_runs",
        description=__doc__.split("\n\n")[0],
        epilog="--quick: 200 parked, 20 working, a 20 s window, 20 resumed, delete within 120 s.",
    )
    parser.add_argument("--parked", type=int, help="runs parked on an approval (10000)")
    parser.add_argument(
        "--working", type=int, help="runs at work beside them, alone first, 0 to skip (200)"
    )
    parser.add_argument(
        "--quiet-window", type=float, help="seconds nothing changes while counted (60)"
    )
    parser.add_argument(
        "--resume", type=int, help="parked runs approved and timed, 0 to skip (100)"
    )
    parser.add_argument(
        "--delete-timeout",
        type=float,
        help="seconds each kubectl delete --all --wait (the runs', the baseline's) may take "
        "before it is stopped (600)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=1800.0,
        help="seconds parking, the working runs or the resumes may take before the phase "
        "reports what it reached (1800)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=10.0,
        help="seconds between the last run parked and the quiet window (10)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a small form for a try: see below; flags win"
    )
    return command(run, parser, argv)


if __name__ == "__main__":
    sys.exit(main())
