"""What the operator sustains: runs finished per second, takeover after a kill, memory per run.

``python3 -m bench.operator_scale`` (``make bench-operator``) starts a throwaway control plane
(etcd and kube-apiserver on loopback, ``tests/support/kube.py``), a throwaway Redis
(``tests/support/redis_server.py``), installs the AgentRun CRD and starts two operator replicas
(``python -m agentrun.operator --standalone``, the agents of ``bench/agents.py``), then:

1. **memory** — RSS (``VmRSS``) of each replica idle, then with N runs alive (each parked on an
   approval nobody gives; `bench.parked_runs` measures what such runs cost); the difference over N;
2. **takeover** — a run mid-way through a slow read-only step, its holder SIGKILLed: the time
   until the new fence is visible in ``.status.lease``, with the lease TTL the run asked for
   and what the store said was left of the dead holder's lease at the kill;
3. **throughput** — N AgentRuns created by ``--appliers`` concurrent ``POST``s from this
   process (``--create kubectl``: as many ``kubectl apply --server-side``, each creating one
   object at a time, waiting on a loaded API server's answer: they bounded the figure), timed
   from the first create to the last ``Succeeded=True``, for each N of ``--runs``; with
   ``--queued``, created while the replicas are stopped and timed from their start, which
   leaves the creation out altogether. Beside it, the CPU each process spent, in seconds and
   in milliseconds a run, and the API requests per run by verb, which say where the time goes.

It is a command, never a test: timings on a shared 2-core machine are evidence to read, not a
threshold to assert. Every process it starts is stopped by its pid, on success, failure or
Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, cast

import aiohttp
import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.config import new_client_from_config
from tests.support.kube import REPO, ControlPlane, kubectl_binary, start_control_plane
from tests.support.operator import Replica
from tests.support.ports import free_port
from tests.support.redis_server import RedisServer
from urllib3.exceptions import HTTPError

from agentrun import open_backend
from agentrun.operator._resource import GROUP, PLURAL, VERSION

CRD = REPO / "crds" / "agentruns.agentrun.dev.yaml"
AGENT_CRD = REPO / "crds" / "agents.agentrun.dev.yaml"
"""Installed beside the AgentRun CRD, as the chart does: a run's worker looks its agent up there
first (``agent_resolver``), which costs a request a run like any install's."""
REPLICAS = ("replica-a", "replica-b")
TICKS = os.sysconf("SC_CLK_TCK")


# -- processes ----------------------------------------------------------------------------------


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU of a live process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def serves_metrics(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def _runs_listed(api: client.ApiClient, namespace: str) -> tuple[int, int]:
    listed = cast(
        dict[str, Any],
        client.CustomObjectsApi(api).list_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, limit=1
        ),
    )
    rest = (listed.get("metadata") or {}).get("remainingItemCount")
    return len(listed["items"]), int(rest or 0)


def _configmaps_listed(api: client.ApiClient, namespace: str) -> tuple[int, int]:
    listed = client.CoreV1Api(api).list_namespaced_config_map(namespace, limit=1)
    rest = listed.metadata.remaining_item_count if listed.metadata else None
    return len(listed.items), int(rest or 0)


@dataclass(frozen=True)
class Collection:
    """A kind of object the benchmark creates and deletes in bulk: kubectl's name for it, the API
    path of a namespace's objects of that kind, and a list of one of them (the items listed and
    the count of the rest)."""

    resource: str
    path: str
    """With ``{namespace}`` in it."""
    list_one: Callable[[client.ApiClient, str], tuple[int, int]]

    def url(self, server: str, namespace: str) -> str:
        return server + self.path.format(namespace=namespace)


RUNS = Collection(
    PLURAL, f"/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/{PLURAL}", _runs_listed
)
CONFIGMAPS = Collection(
    "configmaps", "/api/v1/namespaces/{namespace}/configmaps", _configmaps_listed
)
"""Objects no controller acts on: what ``kubectl delete --wait`` itself takes for as many."""


@dataclass
class Bench:
    """Everything the benchmark started, and how to reach it."""

    workdir: Path
    poll_interval: float
    log_flag: str
    plane: ControlPlane | None = None
    redis: RedisServer | None = None
    replicas: dict[str, Replica] = field(default_factory=dict)
    namespaces: tuple[str, ...] = ()
    kubectl_bin: str = ""
    api: client.ApiClient | None = None
    env: dict[str, str] = field(default_factory=dict)
    """More environment for the replicas."""
    store_query: str = ""
    """Appended to the replicas' store URL (``?max_connections=256``, say)."""

    @property
    def objects(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        found = self.objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        return cast(dict[str, Any], found)

    def count(self, namespace: str, collection: Collection = RUNS) -> int:
        """How many objects of ``collection`` (AgentRuns) ``namespace`` holds."""
        assert self.api is not None
        return sum(collection.list_one(self.api, namespace))

    def requests(self) -> Counter[str]:
        """The API server's requests so far, by verb and resource (``ControlPlane.requests``)."""
        assert self.plane is not None
        return self.plane.requests()

    def kubectl(self, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
        assert self.plane is not None
        done = subprocess.run(
            [self.kubectl_bin, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.plane.env(),
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} exited {done.returncode}: {done.stderr}")
        return done.stdout

    def start_replica(self, name: str) -> Replica:
        assert self.plane is not None
        assert self.redis is not None
        port = free_port()
        env = {
            **self.plane.env(),
            "AGENTRUN_STORE_URL": self.redis.url + self.store_query,
            "AGENTRUN_WORKER_ID": name,
            "AGENTRUN_METRICS_PORT": str(port),
            # Plain HTTP, which serves_metrics and bench.agent_scale read: the secure endpoint's
            # access control is tests/kube/test_kube_metrics_access.py's, not a cost measured here.
            "AGENTRUN_METRICS_SECURE": "false",
            "AGENTRUN_POLL_INTERVAL": str(self.poll_interval),
            "AGENTRUN_AGENT_MODULES": "bench.agents",
            # bench.agent_scale's fake endpoints listen on loopback, refused unless allowed.
            "AGENTRUN_EGRESS_ALLOW": "127.0.0.0/8,::1",
            **self.env,
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(REPO / "operator"), str(REPO), os.environ.get("PYTHONPATH")])
            ),
        }
        log = self.workdir / f"{name}-{int(time.time() * 1000)}.log"
        argv = [sys.executable, "-m", "agentrun.operator", "--standalone"]
        argv += [f"--namespace={namespace}" for namespace in self.namespaces]
        if self.log_flag:
            argv.append(self.log_flag)
        with log.open("wb") as sink:
            process = subprocess.Popen(
                argv, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT
            )
        replica = Replica(name, process, log, port)
        self.replicas[name] = replica
        deadline = time.monotonic() + 60
        while not serves_metrics(port):  # the start-up handler serves them once it is ready
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start:\n{replica.output()[-3000:]}")
            time.sleep(0.1)
        return replica

    def holder(self, holder: str) -> Replica:
        for replica in self.replicas.values():
            if holder.startswith(f"{replica.name}-{replica.process.pid}-"):
                return replica
        raise RuntimeError(f"no replica of this benchmark is {holder}")

    def pids(self) -> dict[str, int]:
        assert self.plane is not None
        assert self.redis is not None
        found = {
            "kube-apiserver": self.plane.apiserver.pid,
            "etcd": self.plane.etcd.pid,
            "redis": self.redis.pid,
        }
        for name, replica in self.replicas.items():
            if replica.process.poll() is None:
                found[name] = replica.process.pid
        return found

    def stop(self) -> None:
        """Stop every process this benchmark started, by pid: replicas first, then servers."""
        live = [r for r in self.replicas.values() if r.process.poll() is None]
        for replica in live:
            replica.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for replica in live:
            try:
                replica.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                replica.process.kill()
                replica.process.wait(timeout=10)
        if self.api is not None:
            self.api.close()  # type: ignore[no-untyped-call]
        if self.redis is not None:
            self.redis.stop()
        if self.plane is not None:
            self.plane.stop()


@contextlib.contextmanager
def started(
    workdir: Path, poll_interval: float, log_flag: str, crds: Sequence[Path] = (CRD, AGENT_CRD)
) -> Iterator[Bench]:
    """The control plane with ``crds`` installed, and Redis; no replica yet."""
    bench = Bench(workdir, poll_interval, log_flag)
    try:
        bench.kubectl_bin = kubectl_binary()
        print("starting etcd, kube-apiserver and redis on loopback ...", flush=True)
        bench.plane = start_control_plane(workdir / "control-plane")
        bench.redis = RedisServer(workdir / "redis").start()
        for crd in crds:
            bench.kubectl("apply", "--server-side", "-f", str(crd))
        established = [f"crd/{crd.name.removesuffix('.yaml')}" for crd in crds]
        bench.kubectl("wait", "--for=condition=Established", "--timeout=60s", *established)
        bench.api = new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(bench.plane.kubeconfig)
        )
        yield bench
    finally:
        bench.stop()


# -- watching runs ------------------------------------------------------------------------------


def condition(body: dict[str, Any], type_: str) -> dict[str, Any]:
    for found in (body.get("status") or {}).get("conditions") or ():
        if found.get("type") == type_:
            return dict(found)
    return {}


@dataclass
class RunTimes:
    added: float
    leased: float | None = None
    ended: float | None = None
    outcome: str = ""
    resumes: int = 0


class Watcher:
    """Follows every AgentRun of one namespace and notes when each was seen, leased and ended.

    ``ended`` is set the first time ``until`` says the run is where the phase wants it (for
    example ``Succeeded=True``) or ``Succeeded=False`` (a failure, which the report shows).

    ``held`` is the runs whose status names a lease holder in the latest state the watch showed,
    and ``most_held`` the most of them in any state it showed: the watch delivers every change
    of the namespace's runs in the API server's order, so that is the most at any instant.
    """

    def __init__(self, bench: Bench, namespace: str, until: Callable[[dict[str, Any]], bool]):
        self.bench = bench
        self.namespace = namespace
        self.until = until
        self.runs: dict[str, RunTimes] = {}
        self.held: set[str] = set()
        self.most_held = 0
        self.lock = threading.Lock()
        self.closing = threading.Event()
        self.thread = threading.Thread(target=self._follow, daemon=True)

    def __enter__(self) -> Watcher:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.closing.set()

    def _see(self, body: dict[str, Any], now: float) -> None:
        name = body["metadata"]["name"]
        with self.lock:
            run = self.runs.setdefault(name, RunTimes(added=now))
            status = body.get("status") or {}
            if run.leased is None and status.get("lease"):
                run.leased = now
            if (status.get("lease") or {}).get("holder"):
                self.held.add(name)
                self.most_held = max(self.most_held, len(self.held))
            else:
                self.held.discard(name)
            run.resumes = int(status.get("resumeCount") or 0)
            if run.ended is None:
                succeeded = condition(body, "Succeeded")
                if self.until(body):
                    run.ended, run.outcome = now, "ok"
                elif succeeded.get("status") == "False":
                    run.ended, run.outcome = now, str(succeeded.get("reason"))

    def _follow(self) -> None:
        objects = self.bench.objects
        while not self.closing.is_set():
            try:
                listed = cast(
                    dict[str, Any],
                    objects.list_namespaced_custom_object(GROUP, VERSION, self.namespace, PLURAL),
                )
                now = time.monotonic()
                with self.lock:
                    self.held.clear()  # the listing is the whole state: a run gone is not held
                for item in listed["items"]:
                    self._see(item, now)
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    objects.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    self.namespace,
                    PLURAL,
                    resource_version=listed["metadata"]["resourceVersion"],
                    timeout_seconds=20,
                )
                for event in stream:
                    if self.closing.is_set():
                        return
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._see(event["object"], time.monotonic())
            except (ApiException, OSError, ValueError, HTTPError) as error:
                if not self.closing.is_set():
                    print(f"  (watch restarted: {type(error).__name__})", flush=True)
                    time.sleep(0.5)

    def counts(self) -> tuple[int, int, int]:
        """Seen, ended as wanted, ended otherwise."""
        with self.lock:
            ended = [r for r in self.runs.values() if r.ended is not None]
            return len(self.runs), sum(r.outcome == "ok" for r in ended), len(ended)

    def wait(
        self, total: int, deadline: float, label: str, tick: Callable[[], None] = lambda: None
    ) -> None:
        """Until ``total`` runs ended or the deadline; progress every 15 s, ``tick`` every 0.2 s."""
        last = time.monotonic()
        while time.monotonic() < deadline:
            tick()
            seen, ok, ended = self.counts()
            if ended >= total:
                return
            if time.monotonic() - last >= 15:
                print(f"  {label}: {seen} seen, {ok} done, {ended - ok} failed", flush=True)
                last = time.monotonic()
            time.sleep(0.2)


def succeeded(body: dict[str, Any]) -> bool:
    return condition(body, "Succeeded").get("status") == "True"


def awaiting_approval(body: dict[str, Any]) -> bool:
    return condition(body, "AwaitingApproval").get("status") == "True"


def manifest(
    prefix: str,
    count: int,
    agent: str,
    lease: tuple[int, int] | None = None,
    indexes: Sequence[int] | None = None,
) -> str:
    """``count`` AgentRuns named ``prefix-00000`` on (or those of ``indexes``)."""
    policy = (
        f"  leasePolicy:\n    ttlSeconds: {lease[0]}\n    renewWithinSeconds: {lease[1]}\n"
        if lease
        else ""
    )
    return "".join(
        f"---\napiVersion: {GROUP}/{VERSION}\nkind: AgentRun\nmetadata:\n"
        f"  name: {prefix}-{index:05d}\nspec:\n  agent: {agent}\n  input: go\n{policy}"
        for index in (range(count) if indexes is None else indexes)
    )


def run_object(name: str, agent: str) -> dict[str, Any]:
    """The AgentRun ``manifest`` writes for ``name``, as the API server takes it in a POST."""
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AgentRun",
        "metadata": {"name": name},
        "spec": {"agent": agent, "input": "go"},
    }


async def _post_all(
    plane: ControlPlane,
    url: str,
    bodies: Sequence[bytes],
    concurrency: int,
    every: int,
    noun: str = "runs",
) -> None:
    context = ssl.create_default_context(cafile=str(plane.workdir / "certs" / "ca.crt"))
    headers = {"Authorization": f"Bearer {plane.token}", "Content-Type": "application/json"}
    queue = iter(bodies)
    created = 0
    connector = aiohttp.TCPConnector(ssl=context, limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:

        async def poster() -> None:
            nonlocal created
            for body in queue:  # one shared iterator: each body is taken by one poster
                async with session.post(url, data=body) as response:
                    if response.status != 201:
                        raise RuntimeError(f"POST {url}: {response.status} {await response.text()}")
                created += 1
                if every and created % every == 0:
                    print(f"  created {created}/{len(bodies)} {noun}", flush=True)

        await asyncio.gather(*(poster() for _ in range(concurrency)))


def post_runs(
    bench: Bench,
    namespace: str,
    count: int,
    agent: str,
    concurrency: int,
    prefix: str = "run",
    every: int = 0,
) -> None:
    """``count`` runs named as ``manifest`` names them (``prefix-00000`` on), created by
    ``concurrency`` concurrent POSTs of ready-made JSON from this process: a client that costs
    the machine a fraction of what the operator does per run, so the phase measures the
    operator, not the creator. With ``every``, a line of progress each ``every`` runs."""
    assert bench.plane is not None
    bodies = [
        json.dumps(run_object(f"{prefix}-{index:05d}", agent)).encode() for index in range(count)
    ]
    url = RUNS.url(bench.plane.server, namespace)
    asyncio.run(_post_all(bench.plane, url, bodies, concurrency, every))


def post_configmaps(bench: Bench, namespace: str, count: int, concurrency: int) -> None:
    """``count`` ConfigMaps (``baseline-00000`` on) created as ``post_runs`` creates runs."""
    assert bench.plane is not None
    bodies = [
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"baseline-{index:05d}"},
                "data": {"note": "a delete benchmark's baseline"},
            }
        ).encode()
        for index in range(count)
    ]
    url = CONFIGMAPS.url(bench.plane.server, namespace)
    asyncio.run(_post_all(bench.plane, url, bodies, concurrency, 0, "configmaps"))


@contextlib.contextmanager
def _killed_on_error(process: subprocess.Popen[str]) -> Iterator[None]:
    """Stop ``process`` when the block fails: ``Popen``'s own exit would wait for it."""
    try:
        yield
    except BaseException:
        process.kill()
        raise


def delete_runs(
    bench: Bench,
    table: Table,
    label: str,
    namespace: str,
    timeout: float,
    collection: Collection = RUNS,
) -> float | None:
    """``kubectl delete <collection> --all --wait`` in ``namespace`` (the real kubectl), timed to
    its exit; the objects left are counted every second (printed every 30 s), which gives when the
    last one was gone, apart from when kubectl saw it. After ``timeout`` seconds kubectl is stopped
    by its pid and the row says it did not finish, rather than the benchmark hanging on it. The
    seconds kubectl took, or None when it was stopped."""
    assert bench.plane is not None
    noun = collection.resource
    argv = [bench.kubectl_bin, "delete", noun, "--all", "-n", namespace, "--wait=true"]
    began = time.monotonic()
    emptied: float | None = None
    printed = began
    with (
        subprocess.Popen(
            argv,
            env=bench.plane.env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        ) as deleting,
        _killed_on_error(deleting),
    ):
        while True:
            try:
                wait = max(0.1, min(1.0, timeout - (time.monotonic() - began)))
                _, errors = deleting.communicate(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                left, now = bench.count(namespace, collection), time.monotonic()
                if left == 0 and emptied is None:
                    emptied = now - began
                if now - printed >= 30:
                    print(f"  deleting: {left} {noun} left after {now - began:.0f} s", flush=True)
                    printed = now
                if now - began < timeout:
                    continue
                deleting.kill()
                deleting.communicate()
                gone = "" if emptied is None else f"; the last was gone after {emptied:.0f} s"
                table.add(
                    label,
                    f"did not finish in {timeout:.0f} s",
                    f"{left} {noun} were left when kubectl was stopped{gone}",
                )
                return None
    if deleting.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {deleting.returncode}: {errors}")
    took = time.monotonic() - began
    gone = "" if emptied is None else f"; the last was gone after {emptied:.0f} s"
    table.add(
        label,
        f"{took:.1f} s",
        f"kubectl delete {noun} --all --wait, to its exit{gone} (counted every second)",
    )
    return took


def kubectl_apply_runs(
    bench: Bench, namespace: str, count: int, agent: str, appliers: int, timeout: float
) -> None:
    """The same runs by ``appliers`` concurrent ``kubectl apply --server-side``s (one kubectl
    creates one object at a time)."""
    with ThreadPoolExecutor(appliers) as pool:
        parts = [
            manifest("run", count, agent, indexes=range(part, count, appliers))
            for part in range(appliers)
        ]
        command = ("apply", "--server-side", "-n", namespace, "-f", "-")
        applies = [pool.submit(bench.kubectl, *command, stdin=p, timeout=timeout) for p in parts]
        for apply in applies:
            apply.result()


@dataclass
class Usage:
    """The CPU seconds of every process and the API requests by verb, from ``start`` to
    ``report``: where the time of a phase went."""

    bench: Bench
    pids: dict[str, int]
    cpu: dict[str, float]
    own: float
    requests: Counter[str]
    began: float

    @staticmethod
    def _own() -> float:
        times = os.times()
        return times.user + times.system + times.children_user + times.children_system

    @classmethod
    def start(
        cls, bench: Bench, extra: dict[str, int] | None = None, fresh: Iterable[str] = ()
    ) -> Usage:
        """From now, for the benchmark's processes and the ``extra`` ones (name: pid); the
        ``fresh`` ones (just started for this phase) counted from their start."""
        pids = {**bench.pids(), **(extra or {})}
        cpu = {name: 0.0 if name in fresh else cpu_seconds(pid) for name, pid in pids.items()}
        return cls(bench, pids, cpu, cls._own(), bench.requests(), time.monotonic())

    def joined(self, fresh: Iterable[str]) -> Usage:
        """The same usage, with the ``fresh`` processes (started since ``start``: replicas
        started again) counted from their start."""
        started = {name: pid for name, pid in self.bench.pids().items() if name in fresh}
        return dataclasses.replace(
            self,
            pids={**self.pids, **started},
            cpu={**self.cpu, **dict.fromkeys(started, 0.0)},
        )

    def stop(self) -> tuple[float, dict[str, float], Counter[str]]:
        """Wall seconds, CPU seconds by process and API requests since ``start``, taken now
        (while the ``extra`` processes live: a process gone reads as no CPU)."""
        cpu = {name: cpu_seconds(pid) - self.cpu[name] for name, pid in self.pids.items()}
        cpu["this benchmark + kubectl"] = self._own() - self.own
        return time.monotonic() - self.began, cpu, self.bench.requests() - self.requests

    def report(
        self,
        table: Table,
        label: str,
        count: int,
        spent: tuple[float, dict[str, float], Counter[str]] | None = None,
    ) -> None:
        """Two rows: CPU seconds by process, and API requests per run (of ``count``), from
        ``spent`` (what ``stop`` took) or from now."""
        wall, cpu, requests = spent or self.stop()
        by_cost = sorted(cpu.items(), key=lambda i: -i[1])
        table.add(
            f"{label}: CPU seconds in {wall:.0f} s wall",
            f"{sum(cpu.values()):.0f} s",
            ", ".join(f"{name} {seconds:.0f}" for name, seconds in by_cost),
        )
        table.add(
            f"{label}: CPU-ms per run",
            f"{sum(cpu.values()) * 1000 / count:.0f} ms",
            ", ".join(f"{name} {seconds * 1000 / count:.1f}" for name, seconds in by_cost)
            + f"; {os.cpu_count()} idle cores would do "
            f"{(os.cpu_count() or 1) * count / max(sum(cpu.values()), 1e-9):.1f} runs/s",
        )
        interesting = [(k, v) for k, v in requests.most_common() if v >= count // 2]
        table.add(
            f"{label}: API requests per run",
            f"{sum(requests.values()) / count:.1f}",
            ", ".join(f"{key} {value / count:.1f}" for key, value in interesting),
        )


# -- phases -------------------------------------------------------------------------------------


@dataclass
class Table:
    rows: list[tuple[str, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, measure: str, value: str, detail: str = "") -> None:
        self.rows.append((measure, value, detail))
        print(f"  {measure}: {value}  {detail}", flush=True)

    def print(self) -> None:
        width = max(len(r[0]) for r in self.rows)
        value_width = max(len(r[1]) for r in self.rows)
        print()
        print(f"{'measure'.ljust(width)} | {'value'.rjust(value_width)} | detail")
        print(f"{'-' * width}-+-{'-' * value_width}-+-------")
        for measure, value, detail in self.rows:
            print(f"{measure.ljust(width)} | {value.rjust(value_width)} | {detail}")
        for note in self.notes:
            print(note)


def phase_memory(bench: Bench, table: Table, count: int, namespace: str) -> None:
    print(f"memory: idle, then {count} runs parked on an approval", flush=True)
    time.sleep(3)
    idle = {name: rss_kib(r.process.pid) for name, r in bench.replicas.items()}
    with Watcher(bench, namespace, awaiting_approval) as watcher:
        bench.kubectl(
            "apply", "--server-side", "-n", namespace, "-f", "-",
            stdin=manifest("parked", count, "parked"), timeout=600,
        )  # fmt: skip
        watcher.wait(count, time.monotonic() + 300, "parked")
        _, parked, _ = watcher.counts()
    time.sleep(3)
    alive = {name: rss_kib(r.process.pid) for name, r in bench.replicas.items()}
    for name in bench.replicas:
        grown = alive[name] - idle[name]
        table.add(
            f"RSS {name}, idle -> {parked} parked runs",
            f"{grown / max(parked, 1):.1f} KiB/run",
            f"{idle[name] / 1024:.1f} MiB -> {alive[name] / 1024:.1f} MiB",
        )
    delete_runs(bench, table, f"delete {count} parked runs", namespace, 600)


async def lease_remaining(url: str, tenant: str, run_id: str) -> float | None:
    async with await open_backend(url) as backend:
        held = await backend.leases.held(tenant, run_id)
        return None if held is None else held.remaining


def phase_takeover(bench: Bench, table: Table, repetitions: int, ttl: int, namespace: str) -> None:
    assert bench.redis is not None
    print(f"takeover: {repetitions} SIGKILLs of the holder, lease TTL {ttl} s", flush=True)
    takeovers: list[float] = []
    lapses: list[float] = []

    def status(name: str) -> dict[str, Any]:
        return dict(bench.get(namespace, name).get("status") or {})

    names = [f"takeover-{index:02d}" for index in range(repetitions)]
    for name in names:
        bench.kubectl(
            "apply", "--server-side", "-n", namespace, "-f", "-",
            stdin=manifest(name, 1, "slow", (ttl, max(1, ttl * 2 // 5))),
        )  # fmt: skip
        run = f"{name}-00000"
        deadline = time.monotonic() + 60
        while not (status(run).get("lease") and status(run).get("iteration", 0) >= 2):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{run} never reached its slow step")
            time.sleep(0.05)
        time.sleep(1.0)  # well inside the slow step
        first = status(run)["lease"]
        victim = bench.holder(first["holder"])
        run_id = bench.get(namespace, run)["metadata"]["uid"]
        asked = time.monotonic()
        remaining = asyncio.run(lease_remaining(bench.redis.url, namespace, run_id))
        killed = time.monotonic()
        victim.signal(signal.SIGKILL)
        victim.wait()
        while (status(run).get("lease") or {}).get("fence", 0) <= first["fence"]:
            if time.monotonic() - killed > ttl + 60:
                raise RuntimeError(f"no replica took {run} over within {ttl + 60} s")
            time.sleep(0.05)
        took = time.monotonic() - killed
        left = (remaining or 0.0) - (killed - asked)
        takeovers.append(took)
        lapses.append(took - left)
        print(
            f"  {run}: fence {first['fence']} -> {status(run)['lease']['fence']} "
            f"in {took:.2f} s ({left:.2f} s of the lease was left)",
            flush=True,
        )
        bench.start_replica(victim.name)  # the Deployment brings a new pod: a new holder
    table.add(
        f"kill -> takeover, TTL {ttl} s (median of {repetitions})",
        f"{statistics.median(takeovers):.2f} s",
        f"min {min(takeovers):.2f} max {max(takeovers):.2f}; after the lease lapsed: median "
        f"{statistics.median(lapses):.2f} s (poll interval {bench.poll_interval} s)",
    )
    with Watcher(bench, namespace, succeeded) as watcher:
        watcher.wait(repetitions, time.monotonic() + 120, "taken over")
        _, ok, ended = watcher.counts()
    resumes = [int(status(f"{name}-00000").get("resumeCount") or 0) for name in names]
    table.add(
        "taken-over runs that finished",
        f"{ok}/{repetitions}",
        f"resumeCount {resumes} (a kill also hits the earlier runs the victim held); "
        f"{ended - ok} failed",
    )


def percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


APISERVER_PROFILE = 30
"""Seconds of kube-apiserver's CPU profile ``--profile`` takes, from the phase's start."""


def profile_apiserver(plane: ControlPlane, path: Path) -> None:
    """kube-apiserver's CPU profile (Go pprof, ``go tool pprof -top`` reads it) of the next
    ``APISERVER_PROFILE`` seconds, into ``path``."""
    context = ssl.create_default_context(cafile=str(plane.workdir / "certs" / "ca.crt"))
    url = f"{plane.server}/debug/pprof/profile?seconds={APISERVER_PROFILE}"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {plane.token}"})
    with urllib.request.urlopen(request, timeout=APISERVER_PROFILE + 30, context=context) as got:
        path.write_bytes(got.read())


@contextlib.contextmanager
def profiled(bench: Bench, folder: str | None) -> Iterator[None]:
    """With ``folder``, ``py-spy record --gil`` of every replica meanwhile, as collapsed stacks
    (``folder/<replica>.txt``: one line a stack and its samples, what flame graphs are drawn
    from; the samples are those holding the GIL, where a replica spends its CPU), and the first
    ``APISERVER_PROFILE`` seconds of kube-apiserver's (``folder/kube-apiserver.pprof``)."""
    if folder is None:
        yield
        return
    assert bench.plane is not None
    spy = str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        raise RuntimeError(f"--profile needs py-spy beside {sys.executable}: run `make deps`")
    Path(folder).mkdir(parents=True, exist_ok=True)
    apiserver = threading.Thread(
        target=profile_apiserver,
        args=(bench.plane, Path(folder) / "kube-apiserver.pprof"),
        daemon=True,
    )
    apiserver.start()
    options = ("record", "--gil", "--nonblocking", "--rate", "50", "--format", "raw")
    recorders = [
        subprocess.Popen(
            [spy, *options, "--pid", str(replica.process.pid), "--output", f"{folder}/{name}.txt"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name, replica in bench.replicas.items()
    ]
    try:
        yield
    finally:
        for recorder in recorders:
            recorder.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        for recorder in recorders:
            recorder.wait(timeout=60)
        apiserver.join(timeout=APISERVER_PROFILE + 30)


def phase_throughput(bench: Bench, table: Table, count: int, namespace: str, args: Any) -> None:
    """``count`` runs of ``quick``, created as ``args`` says (``--create``, ``--appliers``,
    ``--queued``), timed to the last ``Succeeded=True``."""
    creator = f"{args.appliers} concurrent " + (
        "POSTs" if args.create == "post" else "kubectl applies"
    )
    print(
        f"throughput: {count} runs of agent quick, {creator}"
        + (", replicas stopped meanwhile" if args.queued else ""),
        flush=True,
    )
    if args.queued:  # the runs wait in the API server while no replica runs
        for replica in bench.replicas.values():
            replica.stop()
    else:
        usage = Usage.start(bench)
    peak = {name: 0 for name in bench.replicas}
    with Watcher(bench, namespace, succeeded) as watcher, contextlib.ExitStack() as profiling:
        if not args.queued:
            profiling.enter_context(profiled(bench, args.profile))
        began = time.monotonic()
        if args.create == "post":
            post_runs(bench, namespace, count, "quick", args.appliers)
        else:
            kubectl_apply_runs(bench, namespace, count, "quick", args.appliers, args.budget)
        applied = time.monotonic() - began
        if args.queued:  # from here: the servers now, the replicas from their start
            usage = Usage.start(bench)
            began = usage.began
            for name in REPLICAS:
                bench.start_replica(name)
            usage = usage.joined(REPLICAS)
            profiling.enter_context(profiled(bench, args.profile))

        def sample() -> None:
            for name, replica in bench.replicas.items():
                peak[name] = max(peak[name], rss_kib(replica.process.pid))

        watcher.wait(count, began + args.budget, f"{count} runs", sample)
        profiling.close()
        wall = time.monotonic() - began
        with watcher.lock:
            runs = list(watcher.runs.values())
    done = [r for r in runs if r.outcome == "ok" and r.ended is not None]
    failed = Counter(r.outcome for r in runs if r.ended is not None and r.outcome != "ok")
    finished_at = sorted(r.ended - began for r in done if r.ended is not None)
    end = finished_at[-1] if len(done) == count else wall
    reached = "" if len(done) == count else f" (stopped at {args.budget:.0f} s)"
    table.add(
        f"{count} runs: {'replicas started' if args.queued else 'created'} -> all Succeeded",
        f"{len(done) / end:.1f} runs/s",
        f"{len(done)}/{count} done in {end:.1f} s{reached}; {creator} took {applied:.1f} s"
        + (f"; failed {dict(failed)}" if failed else ""),
    )
    if finished_at:
        latencies = [r.ended - r.added for r in done if r.ended is not None]
        queued = [r.leased - r.added for r in done if r.leased is not None]
        table.add(
            f"{count} runs: per run, seen -> done",
            f"{statistics.median(latencies):.1f} s",
            f"p90 {percentile(latencies, 0.9):.1f} s; seen -> leased median "
            f"{statistics.median(queued):.1f} s; first done at {finished_at[0]:.1f} s, half at "
            f"{finished_at[len(finished_at) // 2]:.1f} s",
        )
    resumed = [r.resumes for r in runs if r.resumes]
    table.add(
        f"{count} runs: resumed by the other replica",
        f"{len(resumed)}/{len(runs)}",
        f"{sum(resumed)} resumes in all (status.resumeCount); no replica was killed",
    )
    usage.report(table, f"{count} runs", count)
    table.add(
        f"{count} runs: peak RSS per replica",
        f"{max(peak.values()) / 1024:.0f} MiB",
        ", ".join(f"{name} {kib / 1024:.0f} MiB" for name, kib in sorted(peak.items())),
    )


# -- the command --------------------------------------------------------------------------------


def interrupt(signum: int, _: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def working_folder(stack: contextlib.ExitStack, kept: str | None) -> Path:
    """``kept`` (made if need be), or a temporary folder that goes when ``stack`` closes."""
    if kept is None:
        return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="agentrun-bench-")))
    Path(kept).mkdir(parents=True, exist_ok=True)
    return Path(kept)


def replicas_up(
    stack: contextlib.ExitStack,
    args: argparse.Namespace,
    workdir: Path,
    namespaces: Iterable[str],
    crds: Sequence[Path] = (CRD, AGENT_CRD),
    env: dict[str, str] | None = None,
    store_query: str = "",
) -> Bench:
    """The servers (stopped when ``stack`` closes), ``namespaces`` made, the two replicas
    watching them (with ``env`` added to theirs, ``store_query`` to their store URL)."""
    bench = stack.enter_context(started(workdir, args.poll_interval, args.log_flag, crds))
    bench.env = dict(env or {})
    bench.store_query = store_query
    bench.namespaces = tuple(namespaces)
    for namespace in bench.namespaces:
        bench.kubectl("create", "namespace", namespace)
    for name in REPLICAS:
        bench.start_replica(name)
    print(f"two replicas up; logs in {workdir}", flush=True)
    return bench


def run(args: argparse.Namespace) -> None:
    counts = [int(n) for n in args.runs.split(",") if n.strip()]
    namespaces = {
        "memory": "bench-memory",
        "takeover": "bench-takeover",
        **{str(n): f"bench-runs-{n}" for n in counts},
    }
    table = Table()
    with contextlib.ExitStack() as stack:
        workdir = working_folder(stack, args.workdir)
        bench = replicas_up(stack, args, workdir, namespaces.values())
        try:
            if args.memory_runs:
                phase_memory(bench, table, args.memory_runs, namespaces["memory"])
            if args.takeovers:
                phase_takeover(bench, table, args.takeovers, args.ttl, namespaces["takeover"])
            for count in counts:
                phase_throughput(bench, table, count, namespaces[str(count)], args)
        finally:
            if table.rows:
                table.notes.append(
                    f"2 replicas, poll interval {args.poll_interval} s, kopf flag "
                    f"{args.log_flag or '(none: INFO)'}; {os.cpu_count()} cores; logs in {workdir}"
                )
                table.print()
            if args.workdir is None:
                print("(the logs go with the temporary folder; pass --workdir to keep them)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m bench.operator_scale",
        description=__doc__.split("\n\n")[0],
        epilog="Takes about 10 minutes with the defaults on a 2-core machine.",
    )
    parser.add_argument(
        "--runs", default="100,1000", help="comma-separated run counts to apply (default 100,1000)"
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=480.0,
        help="seconds each throughput phase may take before it reports what it reached (480)",
    )
    parser.add_argument(
        "--takeovers", type=int, default=5, help="holder kills to time, 0 to skip (5)"
    )
    parser.add_argument("--ttl", type=int, default=5, help="lease TTL of the killed runs (5 s)")
    parser.add_argument(
        "--memory-runs", type=int, default=100, help="runs parked for the memory phase, 0 to skip"
    )
    parser.add_argument(
        "--create",
        choices=["post", "kubectl"],
        default="post",
        help="how the runs are created: POSTs of JSON from this process (post, the default), "
        "or kubectl apply --server-side (kubectl: one object at a time each, which bounds "
        "the figure)",
    )
    parser.add_argument(
        "--appliers",
        type=int,
        default=8,
        help="concurrent creators (8): POSTs in flight, or kubectl processes",
    )
    parser.add_argument(
        "--profile",
        metavar="FOLDER",
        help="py-spy record (GIL samples, collapsed stacks) of each replica during the "
        "throughput phases, into FOLDER/<replica>.txt",
    )
    parser.add_argument(
        "--queued",
        action="store_true",
        help="create the runs while the replicas are stopped and time from their start "
        "(replicas started -> all Succeeded), which leaves the creation out of the figure",
    )
    return command(run, parser, argv)


def command(
    run: Callable[[argparse.Namespace], None],
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None,
) -> int:
    """Parse ``argv`` with the replicas' options added, and ``run``; an exit status. Whatever
    ends it (a server that cannot start, Ctrl-C, SIGTERM), what it started is stopped."""
    parser.add_argument(
        "--poll-interval", type=float, default=1.0, help="AGENTRUN_POLL_INTERVAL (1.0 s)"
    )
    parser.add_argument(
        "--kopf-log",
        dest="log_flag",
        choices=["--quiet", "--verbose", ""],
        default="--quiet",
        help="kopf logging flag for the replicas (default --quiet: warnings only)",
    )
    parser.add_argument("--workdir", help="keep the servers' and replicas' files and logs here")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        run(args)
    except pytest.fail.Exception as missing:
        print(f"bench: a server could not start: {missing}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench: interrupted; everything it started is stopped", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
