"""Fixtures for the CLI tests: this checkout's CLI (``python -m agentrun.cli``), as a subprocess.

Every test gets its own SQLite state file and its own demo services file (``AGENTRUN_DEMO_DIR``),
and the same store opened in the test process, to arrange what a command will find (a lease held
by another worker, a checkpoint from a newer kit) and to read what it left.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agentrun import Backend, open_backend
from tests.support.cli import COMMAND, cli_env


@dataclass
class Cli:
    store: str
    env: dict[str, str]
    started: list[subprocess.Popen[str]] = field(default_factory=list)

    def __call__(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*COMMAND, "--store", self.store, *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
        )

    def spawn(self, *args: str, **env: str) -> subprocess.Popen[str]:
        """Start ``agentrun`` in the background (killed at the end of the test if still alive)."""
        process = subprocess.Popen(
            [*COMMAND, "--store", self.store, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**self.env, **env},
        )
        self.started.append(process)
        return process


@pytest.fixture
def demo_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "demo"
    monkeypatch.setenv("AGENTRUN_DEMO_DIR", str(folder))  # for reading the services here too
    return folder


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}"


@pytest.fixture
def cli(store_url: str, demo_dir: Path) -> Iterator[Cli]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("AGENTRUN_") and key != "PYTHONHASHSEED"
    }
    env["AGENTRUN_DEMO_DIR"] = str(demo_dir)
    runner = Cli(store_url, cli_env(env))
    try:
        yield runner
    finally:
        for process in runner.started:
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
            process.communicate(timeout=10)


@pytest.fixture
async def backend(store_url: str) -> AsyncIterator[Backend]:
    async with await open_backend(store_url) as opened:
        yield opened
