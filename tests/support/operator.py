"""Operator replicas for the tests: real ``python -m agentrun.operator`` processes.

Each replica is a separate OS process running kopf in standalone mode against the test control
plane, as a cluster runs replicas; the tests kill them with real signals.
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.kube import REPO, Cluster, Kube
from tests.support.ports import free_port
from tests.support.redis_server import RedisServer


@dataclass
class Replica:
    name: str
    process: subprocess.Popen[bytes]
    log: Path
    metrics_port: int

    def signal(self, number: int) -> None:
        if self.process.poll() is None:
            self.process.send_signal(number)

    def wait(self, timeout: float = 60) -> int:
        return self.process.wait(timeout=timeout)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def watching(self) -> bool:
        """Whether the replica has started (slow on a loaded machine) and watches AgentRuns."""
        return "Starting the watch-stream for agentruns." in self.output()

    def metrics(self) -> str:
        """This replica's metrics over plain HTTP (test replicas serve them so unless
        ``AGENTRUN_METRICS_SECURE`` says otherwise); empty while it is still starting, its port
        not listening yet."""
        try:
            url = f"http://127.0.0.1:{self.metrics_port}/metrics"
            with urllib.request.urlopen(url, timeout=30) as answer:
                return str(answer.read().decode())
        except urllib.error.URLError as error:
            if not isinstance(error.reason, ConnectionRefusedError):
                raise
            return ""

    def scrape(
        self, token: str = "", path: str = "/metrics", ca: Path | None = None
    ) -> tuple[int, str]:
        """This replica's secure metrics endpoint as a scraper holding ``token`` (none when
        empty) sees it: the HTTP status and body. Over HTTPS, its certificate checked against
        ``ca``, or unchecked without one: the replica signed it itself, as the chart's
        ServiceMonitor expects when ``metrics.certSecret`` is empty."""
        context = ssl.create_default_context(cafile=str(ca) if ca else None)
        if ca is None:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        request = urllib.request.Request(f"https://127.0.0.1:{self.metrics_port}{path}")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=30, context=context) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as refused:
            return refused.code, refused.read().decode()


@dataclass
class Operators:
    control_plane: Cluster
    namespace: str
    store_url: str
    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    replicas: list[Replica] = field(default_factory=list)
    watch: tuple[str, ...] = ()
    """kopf's flags for what to watch (``--all-namespaces``); empty: ``--namespace`` this one."""

    def start(self, name: str, **extra_env: str) -> Replica:
        """A new replica; its metrics are plain HTTP unless ``AGENTRUN_METRICS_SECURE`` says
        otherwise (tests/kube/test_kube_metrics_access.py is about the secure endpoint)."""
        port = free_port()
        env = {
            **self.control_plane.env(),
            # The fake model, MCP and HTTP servers listen on loopback, which the operator's
            # egress policy refuses unless allowed; a test of the policy sets its own.
            "AGENTRUN_EGRESS_ALLOW": "127.0.0.0/8,::1",
            "AGENTRUN_METRICS_SECURE": "false",
            **self.env,
            "AGENTRUN_STORE_URL": self.store_url,
            "AGENTRUN_WORKER_ID": name,
            "AGENTRUN_METRICS_PORT": str(port),
            "AGENTRUN_POLL_INTERVAL": "0.3",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            **extra_env,
        }
        log = self.workdir / f"{name}-{len(self.replicas)}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "agentrun.operator",
                    "--standalone",
                    "--verbose",
                    *(self.watch or (f"--namespace={self.namespace}",)),
                ],
                cwd=REPO,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        replica = Replica(name, process, log, port)
        self.replicas.append(replica)
        return replica

    def by_holder(self, holder: str) -> Replica:
        live = [
            r for r in self.replicas if holder.startswith(f"{r.name}-") and r.process.poll() is None
        ]
        assert live, f"no live replica holds {holder}"
        return live[-1]

    def stop_all(self) -> None:
        for replica in self.replicas:
            replica.stop()

    def logs(self) -> str:
        return "\n".join(f"===== {r.name} =====\n{r.output()[-6000:]}" for r in self.replicas)


def operator_pool(
    kube: Kube,
    redis: RedisServer,
    effects: Path,
    tmp_path_factory: pytest.TempPathFactory,
    **env: str,
) -> Operators:
    """Replicas (none started yet) on the test module's namespace and Redis, with the agents of
    ``tests.kube.operator_agents`` (recording their effects in ``effects``) and ``env``."""
    return Operators(
        kube.control_plane,
        kube.namespace,
        redis.url,
        tmp_path_factory.mktemp("operators"),
        env={
            "AGENTRUN_AGENT_MODULES": "tests.kube.operator_agents",
            "AGENTRUN_TEST_EFFECTS": str(effects),
            **env,
        },
    )


def wait_for(what: str, check: object, timeout: float, logs: object = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.2)
    extra = logs() if callable(logs) else ""
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{extra}")
