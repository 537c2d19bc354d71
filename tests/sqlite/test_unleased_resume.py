"""Two worker processes resuming one run, sharing a SQLite file but no lease store: the call
outstanding at the frontier is dispatched once, and the second worker gets
``ResumeConflictError`` (the resume claim, ``ClaimingLeaseStore``), as docs/contract.md says.

The run is started here and stopped before its dispatch; then two real OS processes
(``unleased_worker.py``) resume it at one instant. The dispatch of whichever gets in waits until
the test lets it end, so the other asks while it is under way. The tool is declared idempotent:
a resume dispatches it whatever its record says, so nothing but the claim keeps the second out.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from agentrun import open_backend
from agentrun.runner._results import RunStatus
from tests.runner.helpers import stop_before_the_dispatch
from tests.sqlite.unleased_worker import AGENT, RUN, TENANT, unleased

WORKER = Path(__file__).with_name("unleased_worker.py")
START_ALLOWANCE = 3.0
"""Seconds from now to the instant both workers resume at: time for both to start."""
ANSWER_WITHIN = 60.0
"""Seconds the harness waits on the workers before it calls them hung (not a measure)."""


def _dispatches(effects: Path) -> int:
    if not effects.exists():
        return 0
    with sqlite3.connect(effects, timeout=10) as connection:
        return int(connection.execute("SELECT count(*) FROM dispatches").fetchone()[0])


def _until_one_ends_or_both_dispatch(workers: list[subprocess.Popen[str]], effects: Path) -> None:
    """Returns once a worker has exited or both have dispatched: the moment to let the
    dispatch under way end."""
    deadline = time.monotonic() + ANSWER_WITHIN
    while time.monotonic() < deadline:
        if any(worker.poll() is not None for worker in workers) or _dispatches(effects) >= 2:
            return
        time.sleep(0.05)
    raise AssertionError("neither worker ended and no second dispatch came")


def _race(url: str, effects: Path, go_on: Path) -> dict[int, dict[str, str]]:
    """Two workers resuming the run at one instant; what each said, by its exit status."""
    at = str(time.time() + START_ALLOWANCE)
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), url, str(effects), str(go_on), at],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        _until_one_ends_or_both_dispatch(workers, effects)
        go_on.touch()
        said = [worker.communicate(timeout=ANSWER_WITHIN) for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
    assert all(worker.returncode in (0, 3) for worker in workers), said
    return {
        worker.returncode: json.loads(out) for worker, (out, _) in zip(workers, said, strict=True)
    }


async def test_two_workers_without_a_lease_store_dispatch_the_outstanding_call_once(
    url: str, tmp_path: Path
) -> None:
    async with await open_backend(url) as backend:
        stopped = await unleased(backend).run(
            AGENT, "book", tenant=TENANT, run_id=RUN, stop=stop_before_the_dispatch()
        )
    assert stopped.status is RunStatus.INTERRUPTED
    effects = tmp_path / "effects.db"
    endings = _race(url, effects, tmp_path / "go-on")
    assert _dispatches(effects) == 1, endings
    assert sorted(endings) == [0, 3], endings
    assert endings[0]["status"] == RunStatus.COMPLETED.value
    assert endings[3] == {"refused": "ResumeConflictError", "holder": endings[0]["holder"]}
