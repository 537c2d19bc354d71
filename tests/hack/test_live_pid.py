"""``hack/cluster.sh kill-container`` sends SIGKILL only to a live container process.

crictl gives pid 0 for a container that has exited, and ``kill -KILL 0`` kills the caller's
whole process group: the test run that asked for one pod's process to die. The check is the
function both cluster scripts call (``live_pid`` in ``hack/lib/cluster-host.sh``), run here by
bash as they run it, on pids that are real processes or were.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.kube import REPO

HOST_LIB = REPO / "hack" / "lib" / "cluster-host.sh"


def _live_pid(pid: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f'set -euo pipefail; source "{HOST_LIB}"; live_pid "$1"', "live_pid", pid],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@pytest.fixture
def live() -> Iterator[int]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def _dead() -> int:
    """The pid of a process that has exited and been reaped."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@pytest.mark.parametrize("pid", ["0", "", "1", "-1", "12x"])
def test_refuses_what_is_no_container_process(pid: str) -> None:
    result = _live_pid(pid)
    assert result.returncode != 0
    assert result.stdout == ""
    assert "refusing to kill" in result.stderr


def test_refuses_a_process_that_has_exited() -> None:
    pid = _dead()
    result = _live_pid(str(pid))
    assert result.returncode != 0
    assert result.stdout == ""
    assert f"refusing to kill pid {pid}: no such process" in result.stderr


def test_passes_a_live_process(live: int) -> None:
    result = _live_pid(str(live))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(live)
