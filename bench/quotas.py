"""What a namespace's RunQuota holds to, measured: fair share, the active-run cap, the budget.

``python3 -m bench.quotas`` (``make bench-quotas``) starts the throwaway control plane, Redis and
two operator replicas of ``bench.operator_scale``, each with room for ``--capacity`` workers
(``AGENTRUN_MAX_ACTIVE_RUNS``), with the RunQuota CRD installed beside the others. Every run is
of agent ``metered`` (``bench/agents.py``: two model calls of a known usage, each followed by a
tool that waits ``METERED_SECONDS``, then an answer). Then:

1. **budget** — a namespace whose RunQuota has a budget of ``--budget-tokens`` a window,
   ``whenSpent: Pause``, and ``--budget-runs`` N runs created at once; once every run has
   stopped (``Completed``, or waiting as ``QuotaSpent`` or ``Queued``) and none holds a lease,
   the window's spending read from the store (``QuotaStore.spending``): spent against the
   budget, the overrun, and its bound, N times the costliest call (what a run can spend beyond
   the one reservation ``_namespace_budget`` lets it make);
2. **B alone** — ``--runs-b`` runs in a namespace whose RunQuota caps its active runs at
   ``--cap-b``, nothing else running, timed from the first POST to the last ``Succeeded=True``;
3. **B beside A** — ``--runs-a`` runs in namespace A, whose RunQuota caps them at ``--cap-a``,
   created and waited for until each is queued or at work; then the same runs as B's in another
   namespace with B's quota, timed the same way; the ratio to B alone. All the while, every
   ~50 ms, the places A's quota holds in the store (``QuotaStore.admitted``, where admission is
   decided) and the A runs whose status shows a lease holder (a watch of the API server, which
   also gives the most in any state it showed); the most of each, against the cap.

A command, never a test: timings on a shared 2-core machine are evidence to read. Every process
it starts is stopped by its pid, on success, failure or Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from tests.support.kube import REPO

from agentrun import Usage
from agentrun._quotas import Spending
from agentrun.operator._admission import TENANT, window_of
from agentrun.operator._quota_queue import WAITING
from agentrun.operator._quota_resource import QUOTA_KIND, QUOTA_PLURAL, Budget
from agentrun.operator._resource import GROUP, PLURAL, VERSION
from agentrun.runner import DEFAULT_PRICES
from agentrun.stores import open_backend
from bench.agents import CALL_USAGE
from bench.operator_scale import (
    AGENT_CRD,
    CRD,
    Bench,
    Table,
    Watcher,
    command,
    condition,
    post_runs,
    replicas_up,
    succeeded,
    working_folder,
)
from bench.parked_runs import commit, quiet

QUOTA_CRD = REPO / "crds" / f"{QUOTA_PLURAL}.{GROUP}.yaml"
NAMESPACES = {
    "budget": "bench-quota-budget",
    "alone": "bench-quota-b-alone",
    "a": "bench-quota-a",
    "beside": "bench-quota-b-beside",
}
AGENT = "metered"
MODEL = "scripted"
CALLS_A_RUN = (CALL_USAGE, CALL_USAGE, Usage(input_tokens=50, output_tokens=5))
"""``metered``'s model calls (``bench/agents.py``): two tool turns, then the answer."""
CREATORS = 8
SAMPLE_EVERY = 0.05
QUICK = {"runs_a": 200, "runs_b": 20, "budget_runs": 20}
DEFAULTS = {"runs_a": 2000, "runs_b": 20, "budget_runs": 50}


def tokens(usage: Usage) -> int:
    return usage.input_tokens + usage.output_tokens


def reason(body: dict[str, Any]) -> str:
    return str(condition(body, "Succeeded").get("reason") or "")


def apply_quota(bench: Bench, namespace: str, spec: dict[str, Any]) -> None:
    """A RunQuota named ``bench`` in ``namespace``; then a moment for the replicas' watches to
    see it, so that no run of the namespace is looked at before its quota is known."""
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": QUOTA_KIND,
        "metadata": {"name": "bench", "namespace": namespace},
        "spec": spec,
    }
    bench.kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(body))
    time.sleep(2)


def listed(bench: Bench, namespace: str) -> list[dict[str, Any]]:
    found = bench.objects.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    return list(cast(dict[str, Any], found)["items"])


def held(body: dict[str, Any]) -> bool:
    return bool(((body.get("status") or {}).get("lease") or {}).get("holder"))


def stopped(body: dict[str, Any]) -> bool:
    """Completed, or waiting on its namespace's quota."""
    return succeeded(body) or reason(body) in WAITING


def looked_at(body: dict[str, Any]) -> bool:
    """At work, or stopped: a worker has had the run."""
    return held(body) or stopped(body)


# -- 1. the budget ------------------------------------------------------------------------------


def stopped_for_good(bench: Bench, namespace: str, budget: float) -> Counter[str]:
    """The runs' reasons once every run is completed or waits on the quota, and none is held,
    in two listings a second apart (a run let go again by the quota's sweep is not stopped)."""
    deadline = time.monotonic() + budget
    last: Counter[str] = Counter()
    while time.monotonic() < deadline:
        runs = listed(bench, namespace)
        reasons = Counter(reason(run) for run in runs)
        still = all(not held(run) and stopped(run) for run in runs)
        if still and reasons == last:
            return reasons
        last = reasons if still else Counter()
        time.sleep(1)
    return Counter({"(still going)": 1, **last})


async def window_spending(url: str, namespace: str, budget: Budget) -> Spending:
    """What the store counts against ``namespace``'s budget in the window now."""
    async with await open_backend(url) as backend:
        return await backend.quotas.spending(TENANT, namespace, window_of(budget))


def phase_budget(bench: Bench, table: Table, runs: int, limit: int, budget: float) -> None:
    namespace = NAMESPACES["budget"]
    print(
        f"budget: {runs} runs of agent {AGENT} against a budget of {limit} tokens, "
        "whenSpent: Pause",
        flush=True,
    )
    spec = Budget.model_validate({"maxTokens": limit})
    apply_quota(
        bench, namespace, {"budget": {"maxTokens": limit, "window": "24h"}, "whenSpent": "Pause"}
    )
    began = time.monotonic()
    with Watcher(bench, namespace, stopped) as w:
        post_runs(bench, namespace, runs, AGENT, CREATORS, prefix="budget")
        w.wait(runs, began + budget, "budget")
    quiet(w)
    reasons = stopped_for_good(bench, namespace, budget)
    took = time.monotonic() - began
    assert bench.redis is not None

    spending = asyncio.run(window_spending(bench.redis.url, namespace, spec))
    largest = max(CALLS_A_RUN, key=tokens)
    bound = runs * tokens(largest)
    overrun = spending.spent.tokens - limit
    table.add(
        f"budget, {runs} runs: stopped",
        f"{took:.0f} s",
        ", ".join(f"{name or '(none)'} {count}" for name, count in sorted(reasons.items())),
    )
    table.add(
        f"budget, {runs} runs: spent against the budget",
        f"{spending.spent.tokens} / {limit} tokens",
        f"{spending.spent.micros} micros; still reserved {spending.reserved.tokens} tokens, "
        f"{spending.reserved.micros} micros (read from the store, window {window_of(spec)})",
    )
    table.add(
        f"budget, {runs} runs: overrun",
        f"{overrun} tokens" if overrun > 0 else f"none ({-overrun} tokens left)",
        f"bound {runs} runs x the costliest call ({tokens(largest)} tokens, "
        f"{DEFAULT_PRICES.cost(MODEL, largest)} micros) = {bound} tokens: "
        + ("within it" if overrun <= bound else "OVER IT"),
    )


# -- 2, 3. fair share and the cap ---------------------------------------------------------------


def phase_b(
    bench: Bench, table: Table, runs: int, namespace: str, label: str, budget: float
) -> float:
    """B's ``runs`` timed from the first POST to the last ``Succeeded=True``; the seconds."""
    print(f"B {label}: {runs} runs of agent {AGENT}", flush=True)
    with Watcher(bench, namespace, succeeded) as watcher:
        began = time.monotonic()
        post_runs(bench, namespace, runs, AGENT, CREATORS, prefix="b")
        watcher.wait(runs, began + budget, f"B {label}")
        with watcher.lock:
            done = [r.ended for r in watcher.runs.values() if r.outcome == "ok" and r.ended]
            failed = Counter(
                r.outcome for r in watcher.runs.values() if r.outcome not in ("", "ok")
            )
    quiet(watcher)
    took = (max(done) if len(done) == runs else time.monotonic()) - began
    table.add(
        f"B {label}: {runs} runs created -> all Succeeded",
        f"{took:.1f} s",
        f"{len(done)}/{runs} done"
        + ("" if len(done) == runs else f" (stopped at {budget:.0f} s)")
        + (f"; failed {dict(failed)}" if failed else ""),
    )
    return took


@dataclass
class Sampler:
    """Every ``SAMPLE_EVERY`` s, the places ``namespace``'s quota holds in the store and the runs
    ``watcher`` shows held; the most of each."""

    bench: Bench
    namespace: str
    watcher: Watcher
    samples: int = 0
    seconds: float = 0.0
    most_places: int = 0
    most_held: int = 0
    done: threading.Event = field(default_factory=threading.Event)

    async def _sample(self) -> None:
        assert self.bench.redis is not None
        async with await open_backend(self.bench.redis.url) as backend:
            while not self.done.is_set():
                places = await backend.quotas.admitted(TENANT, self.namespace)
                with self.watcher.lock:
                    held_now = len(self.watcher.held)
                self.samples += 1
                self.most_places = max(self.most_places, len(places))
                self.most_held = max(self.most_held, held_now)
                await asyncio.sleep(SAMPLE_EVERY)

    @contextlib.contextmanager
    def sampling(self) -> Iterator[Sampler]:
        thread = threading.Thread(target=asyncio.run, args=(self._sample(),), daemon=True)
        began = time.monotonic()
        thread.start()
        try:
            yield self
        finally:
            self.done.set()
            thread.join(10)
            self.seconds = time.monotonic() - began


def standing(bench: Bench, namespace: str) -> tuple[str, str]:
    """How many of the namespace's runs wait on its quota, are held, completed, or neither."""
    runs = listed(bench, namespace)
    queued = sum(reason(run) in WAITING and not held(run) for run in runs)
    at_work = sum(held(run) for run in runs)
    done = sum(succeeded(run) for run in runs)
    return (
        f"{queued} queued",
        f"{at_work} at work, {done} completed, {len(runs) - queued - at_work - done} otherwise "
        "(one listing from the API server)",
    )


def phase_beside(bench: Bench, table: Table, args: argparse.Namespace, alone: float) -> None:
    namespace = NAMESPACES["a"]
    print(
        f"A: {args.runs_a} runs of agent {AGENT}, at most {args.cap_a} active; a line every 500 "
        "created",
        flush=True,
    )
    with (
        Watcher(bench, namespace, looked_at) as watcher,
        Sampler(bench, namespace, watcher).sampling() as sampler,
    ):
        began = time.monotonic()
        post_runs(bench, namespace, args.runs_a, AGENT, CREATORS, prefix="a", every=500)
        created = time.monotonic() - began
        watcher.wait(args.runs_a, began + args.budget, "A queued or at work")
        took = time.monotonic() - began
        _, looked, _ = watcher.counts()
        table.add(
            f"A, {args.runs_a} runs: created -> each queued or at work",
            f"{took:.0f} s",
            f"{looked}/{args.runs_a} queued, at work or done; {CREATORS} concurrent POSTs "
            f"took {created:.0f} s",
        )
        table.add(f"A as B's runs are created, {args.runs_a} runs", *standing(bench, namespace))
        beside = phase_b(
            bench, table, args.runs_b, NAMESPACES["beside"], f"beside A's {args.runs_a}",
            args.budget,
        )  # fmt: skip
        finished = sum(succeeded(run) for run in listed(bench, namespace))
    quiet(watcher)
    table.add(
        f"B beside A / B alone ({args.runs_b} runs)",
        f"{beside / alone:.2f}x",
        f"{alone:.1f} s alone, {beside:.1f} s beside; target at most 1.5x",
    )
    cap = args.cap_a
    table.add(
        f"A's places in the store, most at once (cap {cap})",
        f"{sampler.most_places}",
        f"{sampler.samples} samples of QuotaStore.admitted over {sampler.seconds:.0f} s: "
        + ("never over the cap" if sampler.most_places <= cap else "OVER THE CAP")
        + f"; {finished} of A's runs had completed by the end",
    )
    table.add(
        f"A's runs showing a lease holder, most at once (cap {cap})",
        f"{max(sampler.most_held, watcher.most_held)}",
        f"{sampler.most_held} at the store's sample instants, {watcher.most_held} in any "
        "state the API server's watch showed: "
        + (
            "never over the cap"
            if max(sampler.most_held, watcher.most_held) <= cap
            else "OVER THE CAP"
        ),
    )


# -- the command --------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> None:
    for name, default in (QUICK if args.quick else DEFAULTS).items():
        if getattr(args, name) is None:
            setattr(args, name, default)
    if args.budget_tokens is None:
        args.budget_tokens = args.budget_runs * sum(map(tokens, CALLS_A_RUN)) // 2
    table = Table()
    load, measured = os.getloadavg(), commit()
    with contextlib.ExitStack() as stack:
        workdir = working_folder(stack, args.workdir)
        bench = replicas_up(
            stack, args, workdir, NAMESPACES.values(), crds=(CRD, AGENT_CRD, QUOTA_CRD),
            env={"AGENTRUN_MAX_ACTIVE_RUNS": str(args.capacity)},
        )  # fmt: skip
        try:
            if args.budget_runs:
                phase_budget(bench, table, args.budget_runs, args.budget_tokens, args.budget)
            for key, cap in (("alone", args.cap_b), ("beside", args.cap_b), ("a", args.cap_a)):
                apply_quota(bench, NAMESPACES[key], {"maxActiveRuns": cap})
            alone = phase_b(bench, table, args.runs_b, NAMESPACES["alone"], "alone", args.budget)
            phase_beside(bench, table, args, alone)
        finally:
            if table.rows:
                end = os.getloadavg()
                table.notes.append(
                    f"commit {measured}, {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} "
                    f"UTC; 2 replicas of {args.capacity} workers each, poll interval "
                    f"{args.poll_interval} s, kopf flag {args.log_flag or '(none: INFO)'}; "
                    f"{os.cpu_count()} cores, load average {load[0]:.2f} at the start, "
                    f"{end[0]:.2f} at the end; logs in {workdir}"
                )
                table.print()
            if args.workdir is None:
                print("(the logs go with the temporary folder; pass --workdir to keep them)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m bench.quotas",
        description=__doc__.split("\n\n")[0],
        epilog="--quick: 200 runs in A, 20 in B, 20 against the budget.",
    )
    parser.add_argument("--runs-a", type=int, help="runs queued in namespace A (2000)")
    parser.add_argument("--cap-a", type=int, default=10, help="A's maxActiveRuns (10)")
    parser.add_argument("--runs-b", type=int, help="runs in namespace B, alone and beside A (20)")
    parser.add_argument("--cap-b", type=int, default=10, help="B's maxActiveRuns (10)")
    parser.add_argument(
        "--capacity", type=int, default=10, help="AGENTRUN_MAX_ACTIVE_RUNS of each replica (10)"
    )
    parser.add_argument("--budget-runs", type=int, help="runs against the budget, 0 to skip (50)")
    parser.add_argument(
        "--budget-tokens",
        type=int,
        help="the budget's maxTokens (half of what the budget's runs would use)",
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=900.0,
        help="seconds a phase may take before it reports what it reached (900)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a small form for a try: see below; flags win"
    )
    return command(run, parser, argv)


if __name__ == "__main__":
    sys.exit(main())
