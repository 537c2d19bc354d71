"""A long-lived runner keeps nothing of the runs it finished: when a run's tenure ends (the run
stopped, however it stopped) the checkpointer lets go of the chain it appended the run's
transcript to (``Checkpointer.let_go``), some tens of kilobytes a run that a worker carrying
thousands of runs would otherwise hold for ever.

Measured with ``tracemalloc``: what is still allocated by ``agentrun._checkpointing`` after the
runs, against before them. Every run here is stopped before its dispatch and then resumed to
its end, so both ways a tenure ends are measured.
"""

from __future__ import annotations

import gc
import tracemalloc

import pytest

import agentrun._checkpointing
from agentrun import Backend
from agentrun.runner._loop import AgentRunner
from agentrun.runner._results import RunStatus
from tests.runner.helpers import Probe, agent, runner, script, stop_before_the_dispatch

RUNS = 20
BIG = "x" * 12_000
"""The call's argument, and so its result: a transcript of tens of kilobytes, as a chain's
context would keep of a real one."""
LEFT_PER_RUN = 128
"""Bytes a finished run may leave allocated by the checkpointer, on average: what stays is a
constant (a dictionary's room, ~35 bytes a run over 20 runs), far below one run's chain, which
keeps the last 32 KB of the transcript storing segment by segment (~25 KB a run here) and the
handles of its recent segments committing whole boundaries (~230 bytes a run here)."""


def _held_by_checkpointing() -> int:
    gc.collect()
    only = [tracemalloc.Filter(True, agentrun._checkpointing.__file__)]
    snapshot = tracemalloc.take_snapshot().filter_traces(only)
    return sum(stat.size for stat in snapshot.statistics("filename"))


async def _finish_runs(worker: AgentRunner, first: int, count: int) -> None:
    defined = agent(Probe("fetch").tool())
    for number in range(first, first + count):
        stopped = await worker.run(
            defined, "go", tenant="t", run_id=f"run-{number}", stop=stop_before_the_dispatch()
        )
        assert stopped.status is RunStatus.INTERRUPTED
        finished = await worker.resume(defined, f"run-{number}", tenant="t")
        assert finished.status is RunStatus.COMPLETED


@pytest.mark.parametrize("whole", [False, True], ids=["store-by-store", "whole-boundaries"])
async def test_a_long_lived_runner_keeps_nothing_of_its_finished_runs(
    sqlite: Backend, whole: bool
) -> None:
    worker = runner(sqlite, script([("fetch", {"item": BIG})], "done"), history=True, whole=whole)
    await _finish_runs(worker, 0, 3)  # what every run shares is allocated by now
    tracemalloc.start()
    try:
        before = _held_by_checkpointing()
        await _finish_runs(worker, 3, RUNS)
        left = _held_by_checkpointing() - before
    finally:
        tracemalloc.stop()
    assert left < RUNS * LEFT_PER_RUN, f"{left / RUNS:.0f} bytes a finished run"
