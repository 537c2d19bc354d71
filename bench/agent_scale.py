"""What the operator sustains for a declared agent whose model is slow: calls in flight, runs/s.

``python3 -m bench.agent_scale`` (``make bench-agents``) starts the throwaway control plane,
Redis and two operator replicas of ``bench.operator_scale``, installs the ``Agent`` CRD, then for
each model latency of ``--delays`` (default 1 s, then 0: the instant model to compare with):

1. starts ``bench.fake_endpoints`` in a process of its own (the fake OpenAI-compatible model
   server answering after that latency, the booking MCP server, an HTTP tool on loopback);
2. in a namespace of its own, ``kubectl apply``s a Secret holding the model's key and an
   ``Agent`` whose tools are two MCP tools and one HTTP tool, and waits for it to be Ready;
3. applies ``--runs`` AgentRuns of it in one ``kubectl apply --server-side`` and times them to
   the last ``Succeeded=True``: each run makes 4 model calls and 3 tool calls.

Per latency it reports runs finished per second; the most model calls the fake server had in
flight at once; the latency of the replicas' status patches (``agentrun_status_write_seconds``)
and how long their Kubernetes calls waited for a thread of the 32-thread pool
(``agentrun_kube_pool_wait_seconds``), both read from the replicas' ``/metrics`` before and after
and interpolated within the histogram's buckets as Prometheus' ``histogram_quantile`` does; the
replicas' RSS (idle, at peak, growth per run); the CPU seconds of every process, which say
where a limit is.

A command, never a test: timings on a shared 2-core machine are evidence to read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.agent_manifests import agent_secret
from tests.support.kube import REPO

from agentrun.operator._metrics import LATENCY_BUCKETS
from bench.fake_endpoints import MODEL_CALLS, TOOL_CALLS
from bench.operator_scale import (
    AGENT_CRD,
    CRD,
    REPLICAS,
    Bench,
    Table,
    Usage,
    Watcher,
    command,
    manifest,
    replicas_up,
    rss_kib,
    succeeded,
    working_folder,
)

AGENT = "bencher"
KEY = "sk-bench-not-a-real-key-0000000000000000"
HISTOGRAMS = ("agentrun_status_write_seconds", "agentrun_kube_pool_wait_seconds")


# -- the fake endpoints, in a process of their own -----------------------------------------------


@dataclass
class Endpoints:
    process: subprocess.Popen[bytes]
    urls: dict[str, str]

    def stats(self) -> dict[str, int]:
        with urllib.request.urlopen(self.urls["stats"], timeout=5) as response:
            found: dict[str, int] = json.load(response)
            return found

    @property
    def pid(self) -> int:
        return self.process.pid


@contextlib.contextmanager
def endpoints(workdir: Path, delay: float) -> Iterator[Endpoints]:
    ready = workdir / f"endpoints-{delay:g}.json"
    log = workdir / f"endpoints-{delay:g}.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.fake_endpoints",
                f"--delay={delay}",
                f"--ready-file={ready}",
            ],
            cwd=REPO,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "operator"), str(REPO)])},
        )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the fake endpoints did not start:\n{log.read_text()}")
            time.sleep(0.1)
        time.sleep(0.1)  # the file is written in one call; give it its last bytes
        yield Endpoints(process, json.loads(ready.read_text()))
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def agent_manifest(urls: dict[str, str]) -> str:
    return textwrap.dedent(f"""\
        apiVersion: agentrun.dev/v1alpha1
        kind: Agent
        metadata:
          name: {AGENT}
        spec:
          model:
            provider: openai
            name: bench-model
            baseURL: {urls["model"]}
            apiKey:
              valueFrom:
                secretKeyRef: {{name: model-keys, key: openai}}
            price: {{inputMicrosPerMillion: 150000, outputMicrosPerMillion: 600000}}
            timeoutSeconds: 120
          instructions: Find a flight, book it, tell the passenger.
          maxIterations: 8
          tools:
            mcp:
              - name: airline
                url: {urls["mcp"]}
                allowedTools: [search_flights, book_flight]
            http:
              - name: notify
                description: Tell the passenger about the booking.
                method: POST
                url: {urls["tool"]}
                parameters:
                  type: object
                  properties:
                    booking: {{type: string}}
                    channel: {{type: string}}
                  required: [booking, channel]
                keyArguments: [booking, channel]
                disposition: idempotent
        """)


# -- the replicas' histograms --------------------------------------------------------------------

BUCKET = re.compile(r"^(?P<name>\w+)_bucket\{(?P<labels>[^}]*)\} (?P<value>\S+)$")
LABEL = re.compile(r'(\w+)="([^"]*)"')


def histograms(bench: Bench) -> dict[tuple[str, str], Counter[float]]:
    """Each histogram of ``HISTOGRAMS`` as cumulative counts by upper bound, by its lane
    (``KubeApi``'s: a lease holder's calls or others), summed over the replicas."""
    found: dict[tuple[str, str], Counter[float]] = {}
    for replica in bench.replicas.values():
        url = f"http://127.0.0.1:{replica.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        for line in text.splitlines():
            matched = BUCKET.match(line)
            if matched and matched["name"] in HISTOGRAMS:
                labels = dict(LABEL.findall(matched["labels"]))
                key = (matched["name"], labels.get("lane", ""))
                found.setdefault(key, Counter())[float(labels["le"])] += int(
                    float(matched["value"])
                )
    return found


def quantile(cumulative: Counter[float], share: float) -> float:
    """``histogram_quantile``: linear within the bucket the rank falls in."""
    bounds = sorted(cumulative)
    total = cumulative[bounds[-1]]
    if total <= 0:
        return float("nan")
    rank = share * total
    lower, below = 0.0, 0
    for bound in bounds:
        if cumulative[bound] >= rank:
            if bound == float("inf"):
                return bound  # beyond the last finite bucket: no more is known
            inside = cumulative[bound] - below
            return lower + (bound - lower) * (rank - below) / max(inside, 1)
        lower, below = bound, cumulative[bound]
    return lower


def milliseconds(seconds: float) -> str:
    return (
        f"{seconds * 1000:.1f}" if seconds != float("inf") else f"> {LATENCY_BUCKETS[-1] * 1000:g}"
    )


def delta(after: Counter[float], before: Counter[float]) -> Counter[float]:
    return Counter({bound: after[bound] - before[bound] for bound in after})


# -- one latency ----------------------------------------------------------------------------------


@dataclass
class Peak:
    """The most model calls in flight, and the replicas' RSS, sampled while the runs go."""

    in_flight: int = 0
    rss: dict[str, int] = field(default_factory=dict)

    def sample(self, bench: Bench, fake: Endpoints) -> None:
        with contextlib.suppress(OSError):
            self.in_flight = max(self.in_flight, fake.stats()["peak_in_flight"])
        for name, replica in bench.replicas.items():
            self.rss[name] = max(self.rss.get(name, 0), rss_kib(replica.process.pid))


def phase(
    bench: Bench,
    table: Table,
    workdir: Path,
    delay: float,
    count: int,
    namespace: str,
    budget: float,
    queued: bool,
) -> None:
    """One latency's runs; ``queued``: all applied while the replicas are stopped, timed from the
    replicas' start (what the operator sustains, not how fast kubectl creates objects)."""
    label = f"model {delay:g} s"
    print(
        f"{label}: {count} runs of a declared agent, {MODEL_CALLS} model calls and "
        f"{TOOL_CALLS} tool calls each",
        flush=True,
    )
    with endpoints(workdir, delay) as fake:
        secret = agent_secret("model-keys", {"openai": KEY}, agents=AGENT)
        bench.kubectl("apply", "-n", namespace, "-f", "-", stdin=secret)
        bench.kubectl("apply", "-n", namespace, "-f", "-", stdin=agent_manifest(fake.urls))
        bench.kubectl(
            "wait", "-n", namespace, "--for=condition=Ready", "--timeout=120s", f"agent/{AGENT}"
        )
        time.sleep(2)
        idle = {name: rss_kib(r.process.pid) for name, r in bench.replicas.items()}
        peak = Peak()
        with Watcher(bench, namespace, succeeded) as watcher:
            if queued:  # the runs wait in the API server while no replica runs
                for replica in bench.replicas.values():
                    replica.stop()
            else:
                usage = Usage.start(bench, extra={"fake endpoints": fake.pid})
                before = histograms(bench)
            applying = time.monotonic()
            bench.kubectl(
                "apply", "--server-side", "-n", namespace, "-f", "-",
                stdin=manifest("run", count, AGENT), timeout=budget,
            )  # fmt: skip
            applied = time.monotonic() - applying
            began = time.monotonic() if queued else applying
            if queued:
                for name in REPLICAS:
                    bench.start_replica(name)
                # Fresh processes: what they hold before their watches bring the runs in.
                idle = {name: rss_kib(r.process.pid) for name, r in bench.replicas.items()}
                usage = Usage.start(bench, extra={"fake endpoints": fake.pid}, fresh=REPLICAS)
                before = {}
            watcher.wait(
                count, began + budget, f"{label}, {count} runs", lambda: peak.sample(bench, fake)
            )
            with watcher.lock:
                runs = list(watcher.runs.values())
        after = histograms(bench)
        answered = fake.stats()["answered"]
        spent = usage.stop()
    ok = [r for r in runs if r.outcome == "ok" and r.ended is not None]
    failed = Counter(r.outcome for r in runs if r.ended is not None and r.outcome != "ok")
    end = max((r.ended - began for r in ok if r.ended is not None), default=budget)
    reached = "" if len(ok) == count else f" (stopped at {budget:.0f} s)"
    table.add(
        f"{label}: {'replicas started' if queued else 'apply'} -> all Succeeded",
        f"{len(ok) / end:.1f} runs/s",
        f"{len(ok)}/{count} done in {end:.1f} s{reached}; apply took {applied:.1f} s; "
        f"{answered} model calls answered" + (f"; failed {dict(failed)}" if failed else ""),
    )
    resumed = [r.resumes for r in runs if r.resumes]
    table.add(
        f"{label}: runs resumed by another attempt",
        f"{len(resumed)}/{len(runs)}",
        f"{sum(resumed)} resumes in all (status.resumeCount): a lease lost, no replica was killed",
    )
    table.add(
        f"{label}: model calls in flight at peak",
        f"{peak.in_flight}",
        "counted by the fake model server",
    )
    titles = dict(zip(HISTOGRAMS, ("status patch", "wait for a kube thread"), strict=True))
    for name, lane in sorted(after, key=lambda key: (HISTOGRAMS.index(key[0]), key[1])):
        observed = delta(after[name, lane], before.get((name, lane), Counter()))
        total = observed[max(observed)] if observed else 0
        table.add(
            f"{label}: {titles[name]}{f' ({lane})' if lane else ''} p50 / p99",
            f"{milliseconds(quantile(observed, 0.5))} / "
            f"{milliseconds(quantile(observed, 0.99))} ms",
            f"{total} observed over both replicas ({name})",
        )
    grown = sum(peak.rss.values()) - sum(idle.values())
    table.add(
        f"{label}: RSS growth per run",
        f"{grown / count:.1f} KiB",
        ", ".join(
            f"{name} {idle[name] / 1024:.0f} -> {peak.rss.get(name, 0) / 1024:.0f} MiB"
            for name in sorted(idle)
        ),
    )
    usage.report(table, label, count, spent)


# -- the command ----------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> None:
    delays = [float(d) for d in args.delays.split(",") if d.strip()]
    namespaces = {delay: f"bench-agents-{index}" for index, delay in enumerate(delays)}
    table = Table()
    with contextlib.ExitStack() as stack:
        workdir = working_folder(stack, args.workdir)
        bench = replicas_up(
            stack, args, workdir, namespaces.values(), (CRD, AGENT_CRD),
            {
                "AGENTRUN_KUBE_THREADS": str(args.kube_threads),
                "AGENTRUN_MAX_ACTIVE_RUNS": str(args.max_active_runs),
            },
            args.store_query,
        )  # fmt: skip
        try:
            for delay, namespace in namespaces.items():
                phase(
                    bench, table, workdir, delay, args.runs, namespace, args.budget,
                    not args.while_running,
                )  # fmt: skip
        finally:
            if table.rows:
                table.notes.append(
                    f"2 replicas, poll interval {args.poll_interval} s, {args.runs} runs a "
                    f"latency, {MODEL_CALLS} model calls and {TOOL_CALLS} tool calls a run; "
                    f"{args.kube_threads} Kubernetes threads and at most "
                    f"{args.max_active_runs or 'unlimited'} active runs a replica; store "
                    f"redis://...{args.store_query}; "
                    f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end; "
                    f"logs in {workdir}"
                )
                table.print()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m bench.agent_scale",
        description=__doc__.split("\n\n")[0],
        epilog="Takes about 10 minutes with the defaults on a 2-core machine.",
    )
    parser.add_argument("--runs", type=int, default=1000, help="runs a latency (1000)")
    parser.add_argument(
        "--while-running",
        action="store_true",
        help="apply the runs while the replicas run (default: apply them all while the replicas "
        "are stopped, then start them, so kubectl's pace does not limit the runs in flight)",
    )
    parser.add_argument(
        "--kube-threads", type=int, default=32, help="AGENTRUN_KUBE_THREADS of the replicas (32)"
    )
    parser.add_argument(
        "--max-active-runs",
        type=int,
        default=0,
        help="AGENTRUN_MAX_ACTIVE_RUNS of the replicas (0: no limit)",
    )
    parser.add_argument(
        "--store-query",
        default="",
        help="appended to the replicas' Redis URL, e.g. '?max_connections=256' (default: none)",
    )
    parser.add_argument(
        "--delays", default="1,0", help="model latencies in seconds, comma-separated (1,0)"
    )
    parser.add_argument(
        "--budget", type=float, default=480.0, help="seconds a latency's runs may take (480)"
    )
    return command(run, parser, argv)


if __name__ == "__main__":
    sys.exit(main())
