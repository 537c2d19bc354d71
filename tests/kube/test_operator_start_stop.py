"""A replica told to stop while it starts begins no call, and exits: at any moment of its start.

The operator runs as its container runs it: the chart's command (the image's entry point) as
PID 1 of a PID namespace of its own (``unshare``), and SIGTERM comes from outside that namespace,
as the kubelet sends it. For a PID 1 the kernel drops a signal that the process has no handler
for, so a replica that is deaf for a moment of its start finishes starting, takes a lease and
makes calls until the kubelet's SIGKILL.

Its run's tool is on a server on loopback that the test controls: it counts every call that
begins and holds it until the test lets it go, which the test does only after the signal. So the
run can have begun one call at most before the signal, and any second call began after it, at
whatever moment the signal came and however slow the machine is: the test does not depend on the
timing of the moments it signals at. They sweep the start, from the process's first instant to
its first call, and the last one is while that call is held, in flight.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from tests.support.agentruns import apply_run
from tests.support.kube import REPO, Kube
from tests.support.ports import free_port
from tests.support.redis_server import RedisServer

MOMENTS = 6
"""How many moments of the start, evenly spread from its first instant to its first call, a
SIGTERM is sent at (besides the one while the first call is in flight)."""

EXITS_WITHIN = 60.0
"""Seconds a signalled replica has to exit: what is left of its start (its imports take seconds
on a busy machine) and its in-flight call, well within the chart's 30 s grace period on a quiet
one. The failure this catches never exits: it runs until it is killed."""


class ToolServer:
    """Counts the calls that begin and holds each until ``release``."""

    def __init__(self) -> None:
        self.calls = 0
        self._released = threading.Event()
        self._arrived = threading.Condition()
        tool = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with tool._arrived:
                    tool.calls += 1
                    tool._arrived.notify_all()
                tool._released.wait(timeout=120)
                body = b"done"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/call"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def hold(self) -> None:
        """A new moment: calls counted from zero, each held."""
        self.calls = 0
        self._released.clear()

    def release(self) -> None:
        """Let every call held, and every call after, finish."""
        self._released.set()

    def wait_for_call(self, timeout: float) -> bool:
        with self._arrived:
            return self._arrived.wait_for(lambda: self.calls > 0, timeout=timeout)

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()


def _name(pid: int) -> str | None:
    """The program the process runs (``/proc/PID/comm``); None once it is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except (FileNotFoundError, ProcessLookupError):
        return None


def _children(pid: int) -> list[int]:
    try:
        listed = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return []
    return [int(child) for child in listed.split()]


def chart_command() -> list[str]:
    """The container's command, as the chart gives it."""
    template = (REPO / "charts" / "agentrun-operator" / "templates" / "deployment.yaml").read_text()
    found = re.search(r"command: (\[.*\])", template)
    assert found is not None
    command: list[str] = json.loads(found.group(1))
    return command


class Container:
    """The chart's command as PID 1 of a PID namespace of its own."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        with log.open("wb") as sink:
            self.unshare = subprocess.Popen(
                ["unshare", "--pid", "--fork", "--kill-child", *chart_command(), *args],
                cwd=REPO,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        self.log = log
        self.pid_1 = self._child()
        self._started()

    def _started(self) -> None:
        """Wait until PID 1 runs the command's program (``unshare``'s own code runs between
        its fork and the exec). An init there is waited for until it has started its child,
        which it does once it handles signals: its own first instructions, a millisecond, are a
        moment no program can cover, and not the operator's start. A Python there is not
        waited for: its whole start is the subject."""
        program = chart_command()[0]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if _name(self.pid_1) == program and (program == "python" or _children(self.pid_1)):
                return
            time.sleep(0.001)
        raise AssertionError(f"PID 1 never ran {program}\n{self.log.read_text()}")

    def _child(self) -> int:
        """Its PID 1, as this process's namespace numbers it: ``unshare``'s one child."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if listed := _children(self.unshare.pid):
                return listed[0]
            assert self.unshare.poll() is None, self.log.read_text()
            time.sleep(0.001)
        raise AssertionError("unshare started no child")

    def terminate(self) -> None:
        """SIGTERM to its PID 1 from outside its namespace, as the kubelet sends it."""
        os.kill(self.pid_1, signal.SIGTERM)

    def exited(self, timeout: float) -> int | None:
        try:
            return self.unshare.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.unshare.poll() is None:
            self.unshare.kill()  # --kill-child: its PID 1 goes with it
            self.unshare.wait(timeout=30)


@pytest.fixture
def tool_server() -> Iterator[ToolServer]:
    server = ToolServer()
    try:
        yield server
    finally:
        server.close()


def test_sigterm_at_any_moment_of_the_start_begins_no_call_and_the_replica_exits(
    kube: Kube,
    redis: RedisServer,
    effects: Path,
    tool_server: ToolServer,
    tmp_path: Path,
) -> None:
    args = ["--standalone", "--verbose", f"--namespace={kube.namespace}"]
    venv_bin = str(Path(sys.executable).parent)
    env = {
        **kube.control_plane.env(),
        "PATH": os.pathsep.join([venv_bin, os.environ.get("PATH", "")]),
        "AGENTRUN_STORE_URL": redis.url,
        "AGENTRUN_WORKER_ID": "starting",
        "AGENTRUN_METRICS_PORT": str(free_port()),
        "AGENTRUN_POLL_INTERVAL": "0.3",
        "AGENTRUN_AGENT_MODULES": "tests.kube.operator_agents",
        "AGENTRUN_TEST_EFFECTS": str(effects),
        "AGENTRUN_TEST_TOOL_URL": tool_server.url,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    apply_run(kube, "signalled", "caller", ttl=5)
    seen: list[str] = []

    def moment(name: str, delay: float | None) -> float:
        """Start a replica, SIGTERM it ``delay`` seconds later (None: once its first call is
        in flight), let held calls go, and check; the seconds from start to signal."""
        tool_server.hold()
        container = Container(args, env, tmp_path / f"{name}.log")
        started = time.monotonic()
        try:
            if delay is None:
                assert tool_server.wait_for_call(120), container.log.read_text()
            else:
                time.sleep(delay)
            signalled = time.monotonic() - started
            container.terminate()
            tool_server.release()  # a call in flight began before the signal: let it end
            code = container.exited(EXITS_WITHIN)
            log = container.log.read_text(errors="replace")[-4000:]
            calls = tool_server.calls
            seen.append(f"{name}: signal at {signalled:.2f}s, exit {code}, calls {calls}")
            assert code is not None, f"{name}: still running {EXITS_WITHIN}s after SIGTERM\n{log}"
            assert calls <= 1, f"{name}: a call began after SIGTERM\n{log}"
            if delay is None:
                assert code == 0, f"{name}: exit {code}\n{log}"  # a stop, not a death
            return signalled
        finally:
            container.kill()

    first_call = moment("in-flight", None)
    for index in range(MOMENTS):
        moment(f"moment-{index}", first_call * index / MOMENTS)
    print("\n".join(seen))
