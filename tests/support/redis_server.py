"""Throwaway Redis servers for the tests: one server, or a three-master Cluster, on loopback.

Every server runs from Debian's ``redis-server`` binary on free loopback ports with its files in
a temporary folder, and without persistence (``--save "" --appendonly no``): that is how Redis
often runs in production, and it is the case the fence design has to survive, since a restart
then forgets every key. ``RedisServer.restart`` brings a server back on the same port with
nothing in it; ``stop`` and ``pause`` let the fault tests take it away mid-run.

Processes are stopped by their own pid, never by name. A missing binary fails the test with the
command that installs it: nothing in this repository is ever skipped.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.ports import LOOPBACK, free_port

START_TIMEOUT_S = 20.0
INSTALL_HINT = "install Debian's redis-server (`make deps` or `bash hack/install-deps.sh` does)"


def redis_binary(name: str) -> str:
    """The path of ``redis-server`` or ``redis-cli``, or a test failure saying how to get it."""
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} not found on PATH; {INSTALL_HINT}", pytrace=False)
    return found


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=0.5) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(64).startswith(b"+PONG")
    except OSError:
        return False


@dataclass
class RedisServer:
    """One ``redis-server`` process on ``127.0.0.1:port``; ``extra`` are more config options."""

    folder: Path
    port: int = field(default_factory=free_port)
    extra: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://{LOOPBACK}:{self.port}/0"

    @property
    def pid(self) -> int:
        assert self.process is not None, "the server is not running"
        return self.process.pid

    def start(self) -> RedisServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        log = self.folder / "redis.log"
        argv = [
            redis_binary("redis-server"),
            "--port", str(self.port),
            "--bind", LOOPBACK,
            "--save", "",
            "--appendonly", "no",
            "--dir", str(self.folder),
            "--logfile", str(log),
            *self.extra,
        ]  # fmt: skip
        self.process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers_ping(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                self.stop()
                pytest.fail(
                    f"redis-server on port {self.port} did not start:\n{tail}", pytrace=False
                )
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        """Stop the process (by its pid) and wait for the port to be free again."""
        if self.process is None:
            return
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self) -> None:
        """The same port, a new process that remembers nothing (there is no persistence)."""
        self.stop()
        self.start()

    def pause(self) -> None:
        """Freeze the server: connections open, nothing answered (SIGSTOP)."""
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def cli(self, *args: str) -> str:
        """What ``redis-cli`` prints; bytes that are not UTF-8 (a compressed transcript segment)
        are replaced, not raised on."""
        done = subprocess.run(
            [redis_binary("redis-cli"), "-h", LOOPBACK, "-p", str(self.port), *args],
            capture_output=True, text=True, errors="replace", timeout=30, check=True,
        )  # fmt: skip
        return done.stdout


@contextlib.contextmanager
def redis_server(folder: Path) -> Iterator[RedisServer]:
    server = RedisServer(folder).start()
    try:
        yield server
    finally:
        server.stop()


@dataclass
class RedisClusterServers:
    """Three masters (no replicas) forming one Redis Cluster that covers every slot."""

    nodes: list[RedisServer]

    @property
    def url(self) -> str:
        """The form ``agentrun.stores._redis.open_backend`` reads as a Cluster."""
        return f"redis://{LOOPBACK}:{self.nodes[0].port}/0?cluster=true"

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def _cluster_ok(node: RedisServer) -> bool:
    return "cluster_state:ok" in node.cli("cluster", "info")


@contextlib.contextmanager
def redis_cluster(folder: Path, masters: int = 3) -> Iterator[RedisClusterServers]:
    cluster = RedisClusterServers([])
    try:
        for index in range(masters):
            bus = free_port()
            node = RedisServer(folder / f"node-{index}", extra=(
                "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf",
                "--cluster-port", str(bus),
                "--cluster-node-timeout", "5000",
            ))  # fmt: skip
            cluster.nodes.append(node.start())
        subprocess.run(
            [redis_binary("redis-cli"), "--cluster", "create",
             *(f"{LOOPBACK}:{node.port}" for node in cluster.nodes),
             "--cluster-replicas", "0", "--cluster-yes"],
            capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while not all(_cluster_ok(node) for node in cluster.nodes):
            if time.monotonic() > deadline:
                pytest.fail("the Redis Cluster did not reach cluster_state:ok", pytrace=False)
            time.sleep(0.1)
        yield cluster
    finally:
        cluster.stop()
