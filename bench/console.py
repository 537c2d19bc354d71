"""The run console under load: the first page of thousands of runs, and fifty browsers on one watch.

``python3 -m bench.console`` (``make bench-console``) starts etcd, kube-apiserver and Redis on
loopback (``bench.operator_scale.started``, the CRDs installed), creates ``--runs`` AgentRuns
(5,000) spread over ``--namespaces`` namespaces (10), and gives a tenth of them an approval to
wait on (their status patched as an operator would leave it). It starts the console as the chart
runs it (``python -m agentrun.console``, with a ServiceAccount that may only list and watch
AgentRuns), and a person, a ServiceAccount that may view runs in each namespace (RoleBindings, no
cluster-wide grant: the console reviews their access namespace by namespace), signs in. Then:

1. **first page** — ``GET /runs`` (all namespaces, newest first, 100 rows of 5,000) timed from the
   request to the last byte, once cold (the person's access not yet reviewed) and ``--pages`` times
   warm, one every ``--spacing`` seconds (a review answer is kept 5 s, so the warm figures include
   the reviews made again); beside it, the **baseline measured in the same run**: what listing the
   same runs from the API server as that person takes (``GET agentruns`` across the namespaces, the
   way a console without a watch of its own would serve each page), and the ratio;
2. **fifty browsers** — ``--browsers`` Server-Sent Event streams (``GET /events?view=runs``) held
   open by as many client sessions; the API server's count of AgentRun watches
   (``apiserver_longrunning_requests{resource="agentruns",verb="WATCH"}``) before the console,
   with it, and with the streams open;
3. **fan-out** — ``--changes`` status patches of one run each, timed from the patch's answer to the
   moment every stream has received the change (p50, p99, max over the changes).

A command, never a test: timings on a shared 2-core machine are evidence to read. Every process
it starts is stopped by its pid, on success, failure or Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import ssl
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path

import aiohttp
from tests.support.kube import REPO, ControlPlane
from tests.support.ports import free_port

from agentrun.operator._resource import GROUP, PLURAL, VERSION
from bench.operator_scale import Bench, Table, percentile, post_runs, started, working_folder
from bench.parked_runs import commit

CONSOLE_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "bench-console"},
    "rules": [
        {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["list", "watch"]},
    ],
}
VIEW_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "bench-view"},
    "rules": [
        {"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list", "watch"]},
    ],
}
_WATCHES = re.compile(r"^apiserver_longrunning_requests\{(?P<labels>[^}]*)\} (?P<value>\S+)$")


def _account_token(bench: Bench, namespace: str, name: str) -> str:
    bench.kubectl("-n", namespace, "create", "serviceaccount", name)
    return bench.kubectl("-n", namespace, "create", "token", name, "--duration=2h").strip()


def agentrun_watches(plane: ControlPlane) -> int:
    """The AgentRun watches the API server is serving now."""
    context = ssl.create_default_context(cafile=str(plane.workdir / "certs" / "ca.crt"))
    request = urllib.request.Request(f"{plane.server}/metrics")
    request.add_header("Authorization", f"Bearer {plane.token}")
    with urllib.request.urlopen(request, timeout=30, context=context) as response:
        text = response.read().decode()
    total = 0
    for line in text.splitlines():
        matched = _WATCHES.match(line)
        if (
            matched
            and 'resource="agentruns"' in matched["labels"]
            and 'verb="WATCH"' in matched["labels"]
        ):
            total += int(float(matched["value"]))
    return total


def patch_waiting(bench: Bench, namespace: str, names: Sequence[str]) -> None:
    """Each run of ``names`` waiting on an approval, as an operator would have left it."""
    status = {
        "status": {
            "pendingApproval": {"requestId": "apr-1", "callId": "call-1", "tool": "refund"},
            "conditions": [
                {
                    "type": "Succeeded", "status": "Unknown", "reason": "AwaitingApproval",
                    "message": "waiting on approval apr-1",
                    "lastTransitionTime": "2026-12-01T00:00:00Z",
                }
            ],
        }
    }  # fmt: skip
    assert bench.api is not None
    from kubernetes import client

    objects = client.CustomObjectsApi(bench.api)
    for name in names:
        objects.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, name, status
        )


class Console:
    def __init__(self, bench: Bench, workdir: Path, kubeconfig: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        self.log = workdir / "console.log"
        with self.log.open("wb") as sink:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "agentrun.console", "--port", str(self.port)],
                cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def wait_synced(self, timeout: float = 120) -> float:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.process.poll() is not None:
                raise RuntimeError(f"the console exited:\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=5) as answer:
                    if answer.status == 200:
                        return time.monotonic() - started
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the console did not list the runs in {timeout} s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


async def _sign_in(session: aiohttp.ClientSession, url: str, token: str) -> None:
    async with session.post(
        f"{url}/sign-in", data={"token": token, "next": "/runs"}, allow_redirects=False
    ) as answer:
        if answer.status != 303 or "agentrun_console" not in answer.cookies:
            raise RuntimeError(f"sign-in failed: {answer.status} {await answer.text()}")


def _session() -> aiohttp.ClientSession:
    # The console is on 127.0.0.1, whose cookies aiohttp's default jar refuses to keep.
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


async def _timed_get(session: aiohttp.ClientSession, url: str, rows: int) -> float:
    """The time to the last byte of a page that must show ``rows`` runs (a page that does not,
    a sign-in page say, is an error and no figure)."""
    started = time.perf_counter()
    async with session.get(url, allow_redirects=False) as answer:
        body = await answer.read()
        if answer.status != 200:
            raise RuntimeError(f"GET {url}: {answer.status} {body[:300]!r}")
    elapsed = time.perf_counter() - started
    shown = body.count(b'<tr id="run-')
    if shown != rows:
        raise RuntimeError(f"GET {url} showed {shown} runs, not {rows}")
    return elapsed


async def first_page(
    console: Console, token: str, pages: int, spacing: float, rows: int
) -> tuple[float, list[float]]:
    async with _session() as session:
        await _sign_in(session, console.url, token)
        cold = await _timed_get(session, f"{console.url}/runs", rows)
        warm = []
        for _ in range(pages):
            await asyncio.sleep(spacing)
            warm.append(await _timed_get(session, f"{console.url}/runs", rows))
    return cold, warm


async def baseline(
    plane: ControlPlane, token: str, namespaces: Sequence[str], pages: int
) -> list[float]:
    """Listing the runs from the API server as the person, namespace by namespace (all of it:
    a page sorted newest first needs every run)."""
    context = ssl.create_default_context(cafile=str(plane.workdir / "certs" / "ca.crt"))
    headers = {"Authorization": f"Bearer {token}"}
    times = []
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=context), headers=headers
    ) as session:
        for _ in range(pages):
            started = time.perf_counter()
            for namespace in namespaces:
                path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
                async with session.get(plane.server + path) as answer:
                    await answer.read()
                    if answer.status != 200:
                        raise RuntimeError(f"GET {path}: {answer.status}")
            times.append(time.perf_counter() - started)
    return times


async def browsers_and_fan_out(
    bench: Bench, console: Console, token: str, browsers: int, changes: int, target: tuple[str, str]
) -> tuple[int, list[float]]:
    """Open ``browsers`` streams; the API server's AgentRun watches with them open; then the
    fan-out of ``changes`` patches to every stream."""
    assert bench.plane is not None
    sessions = [_session() for _ in range(browsers)]
    received: list[asyncio.Queue[tuple[str, float]]] = [asyncio.Queue() for _ in sessions]
    try:
        for session in sessions:
            await _sign_in(session, console.url, token)

        async def read(index: int, session: aiohttp.ClientSession, ready: asyncio.Event) -> None:
            async with session.get(f"{console.url}/events?view=runs") as stream:
                async for line in stream.content:
                    text = line.decode().strip()
                    if text.startswith("event: hello"):
                        ready.set()
                    if text.startswith("data:") and target[1] in text:
                        received[index].put_nowait((text, time.perf_counter()))

        readies = [asyncio.Event() for _ in sessions]
        readers = [asyncio.create_task(read(i, s, readies[i])) for i, s in enumerate(sessions)]
        await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 60)
        await asyncio.sleep(2)
        watches = await asyncio.to_thread(agentrun_watches, bench.plane)
        namespace, name = target
        latencies = []
        for change in range(changes):
            for queue in received:
                while not queue.empty():
                    queue.get_nowait()
            body = {"status": {"iteration": change + 1}}
            sent = time.perf_counter()
            await asyncio.to_thread(
                bench.kubectl, "-n", namespace, "patch", PLURAL, name, "--subresource=status",
                "--type=merge", "-p", json.dumps(body),
            )  # fmt: skip
            arrivals = await asyncio.wait_for(asyncio.gather(*(q.get() for q in received)), 30)
            latencies.append(max(at for _, at in arrivals) - sent)
            await asyncio.sleep(0.5)
        for reader in readers:
            reader.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        return watches, latencies
    finally:
        for session in sessions:
            await session.close()


def run(args: argparse.Namespace) -> None:
    table = Table()
    load, measured = os.getloadavg(), commit()
    namespaces = [f"bench-console-{index:02d}" for index in range(args.namespaces)]
    with contextlib.ExitStack() as stack:
        workdir = working_folder(stack, args.workdir)
        bench = stack.enter_context(started(workdir, 1.0, "--quiet"))
        assert bench.plane is not None
        for namespace in namespaces:
            bench.kubectl("create", "namespace", namespace)
        each = args.runs // len(namespaces)
        started_at = time.monotonic()
        for index, namespace in enumerate(namespaces):
            post_runs(bench, namespace, each, "nobody", 8, prefix=f"run{index:02d}")
            waiting = [f"run{index:02d}-{n:05d}" for n in range(0, each, 10)]
            patch_waiting(bench, namespace, waiting)
            print(f"  {(index + 1) * each}/{args.runs} runs created", flush=True)
        table.add(
            f"{args.runs} runs in {len(namespaces)} namespaces",
            f"{time.monotonic() - started_at:.0f} s",
            "created by 8 concurrent POSTs; a tenth of them waiting on an approval",
        )
        for role in (CONSOLE_ROLE, VIEW_ROLE):
            bench.kubectl("apply", "-f", "-", stdin=json.dumps(role))
        console_token = _account_token(bench, "default", "console")
        bench.kubectl(
            "create", "clusterrolebinding", "bench-console", "--clusterrole=bench-console",
            "--serviceaccount=default:console",
        )  # fmt: skip
        person = _account_token(bench, "default", "person")
        for namespace in namespaces:
            bench.kubectl(
                "-n", namespace, "create", "rolebinding", "person-view",
                "--clusterrole=bench-view", "--serviceaccount=default:person",
            )  # fmt: skip
        before = agentrun_watches(bench.plane)
        kubeconfig = bench.plane.kubeconfig_with_token("bench-console", console_token, "default")
        console = Console(bench, workdir, kubeconfig)
        try:
            synced = console.wait_synced()
            table.add(
                "console start -> runs listed", f"{synced:.1f} s", "its one list of every run"
            )
            cold, warm = asyncio.run(
                first_page(console, person, args.pages, args.spacing, min(100, args.runs))
            )
            base = asyncio.run(baseline(bench.plane, person, namespaces, args.pages))
            p50, p99 = percentile(warm, 0.5), percentile(warm, 0.99)
            b50 = percentile(base, 0.5)
            table.add(
                f"first page of {args.runs} runs, warm p50 / p99",
                f"{p50 * 1000:.0f} / {p99 * 1000:.0f} ms",
                f"{len(warm)} pages, one each {args.spacing} s (access reviews kept 5 s); cold "
                f"(every namespace reviewed) {cold * 1000:.0f} ms; max {max(warm) * 1000:.0f} ms",
            )
            table.add(
                "baseline: the same runs listed from the API server",
                f"{b50 * 1000:.0f} ms p50",
                f"as the person, {len(namespaces)} namespaces, {len(base)} times; the console's "
                f"page p50 is {p50 / b50:.2f}x it",
            )
            with_console = agentrun_watches(bench.plane)
            watches, fan_out = asyncio.run(
                browsers_and_fan_out(
                    bench, console, person, args.browsers, args.changes,
                    (namespaces[0], "run00-00001"),
                )
            )  # fmt: skip
            table.add(
                f"AgentRun watches on the API server, {args.browsers} browsers",
                str(watches),
                f"before the console {before}, with it and no browser {with_console}",
            )
            f50, f99 = percentile(fan_out, 0.5), percentile(fan_out, 0.99)
            table.add(
                f"a status change -> all {args.browsers} browsers, p50 / p99",
                f"{f50 * 1000:.0f} / {f99 * 1000:.0f} ms",
                f"{len(fan_out)} changes, from kubectl patch's exit; max "
                f"{max(fan_out) * 1000:.0f} ms (the console gathers changes for 0.25 s first)",
            )
        finally:
            console.stop()
            end = os.getloadavg()
            table.notes.append(
                f"commit {measured}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
                f"{os.cpu_count()} cores, load average {load[0]:.2f} at the start, {end[0]:.2f} "
                f"at the end; logs in {workdir}"
            )
            table.print()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m bench.console", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=int, default=5000, help="AgentRuns to create (5000)")
    parser.add_argument("--namespaces", type=int, default=10, help="spread over (10)")
    parser.add_argument("--pages", type=int, default=30, help="warm first pages to time (30)")
    parser.add_argument("--spacing", type=float, default=1.0, help="seconds between them (1)")
    parser.add_argument("--browsers", type=int, default=50, help="event streams to hold (50)")
    parser.add_argument("--changes", type=int, default=20, help="status changes to fan out (20)")
    parser.add_argument("--quick", action="store_true", help="500 runs, 10 pages, 10 changes")
    parser.add_argument("--workdir", help="keep the servers' and the console's files here")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.pages, args.changes = 500, 10, 10
    try:
        run(args)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
