"""``agentrun.testing.worker.start_or_resume``, the crash-test worker's run, in one process: a
resume waits out a dead worker's lease, gives up after ``lease_wait``, and says each ending on
stdout and in the exit status (the crash tests read both from real processes)."""

from __future__ import annotations

import json

import pytest

from agentrun._frontier import Boundary
from agentrun.stores._memory import MemoryBackend
from agentrun.testing.worker import WorkerExit, start_or_resume
from tests.runner.helpers import Boundaries, Crash, Probe, agent, runner, script

TURNS = ([("act", {"item": "x"})], "done")


async def _resume_after_a_crash(
    memory: MemoryBackend, *, dead_lease_ttl: float, lease_wait: float
) -> WorkerExit:
    """Run ``r`` dies after its first model call, its lease left held ``dead_lease_ttl`` seconds;
    a new worker resumes it, waiting at most ``lease_wait``."""
    defined = agent(Probe("act").tool())
    crash = Boundaries(crash_at=(Boundary.AFTER_MODEL_CALL, 1))
    with pytest.raises(Crash):
        await runner(memory, script(*TURNS), boundaries=crash).run(
            defined, "go", tenant="t", run_id="r"
        )
    await memory.leases.acquire("t", "r", "the-dead-worker", ttl=dead_lease_ttl)
    resuming = runner(memory, script(*TURNS), holder="worker-b")
    return await start_or_resume(
        resuming, defined, "resume", tenant="t", run_id="r", lease_wait=lease_wait
    )


async def test_a_resume_waits_out_the_dead_workers_lease_and_finishes(
    memory: MemoryBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    exit_status = await _resume_after_a_crash(memory, dead_lease_ttl=0.3, lease_wait=5)
    assert exit_status is WorkerExit.FINISHED
    said = json.loads(capsys.readouterr().out)
    assert said == {"status": "completed", "output": "done", "fence": 3}


async def test_a_lease_held_past_the_wait_ends_the_worker_with_3_and_prints_nothing(
    memory: MemoryBackend, capsys: pytest.CaptureFixture[str]
) -> None:
    exit_status = await _resume_after_a_crash(memory, dead_lease_ttl=30, lease_wait=0.3)
    assert exit_status == 3
    assert capsys.readouterr().out == ""


async def test_a_mode_it_does_not_know_is_refused_naming_both_it_knows(
    memory: MemoryBackend,
) -> None:
    with pytest.raises(ValueError, match=r"mode is 'restart': give start .* or resume"):
        await start_or_resume(
            runner(memory, script(*TURNS)), agent(), "restart", tenant="t", run_id="r"
        )
