"""``bench.parked_runs`` end to end in a small form, on its own control plane, Redis and replicas.

The benchmark is a command, never a timed test: nothing here holds a figure to a value. It holds
the command to what bench/README.md says it measures, so that the before and the after of issue
24 come from one command that works: every figure is printed, the approvals it appends as a
person pass the chart's decision policy and wake their runs, and the delete finishes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.parked_runs import main

FIGURES = (
    "1 working runs alone: created -> all Succeeded",
    "1 working runs alone: replicas' CPU",
    "6 runs: created -> AwaitingApproval=True",
    "parked: API requests",
    "parked: store commands",
    "parked: CPU replica-a",
    "parked: CPU replica-b",
    "parked: CPU of the rest",
    "RSS replica-a, per parked run",
    "RSS replica-b, per parked run",
    "1 working runs beside 6 parked: created -> all Succeeded",
    "parked runs' share of the replicas' CPU while 1 work",
    "resume 2: approval -> moved on",
    "delete 6 runs (4 still parked)",
    "delete 6 configmaps (baseline: no controller, no finalizer)",
)


def test_every_figure_is_printed_and_approvals_wake_their_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        [
            "--parked", "6", "--working", "1", "--quiet-window", "3", "--resume", "2",
            "--settle", "1", "--budget", "120", "--delete-timeout", "120",
            "--workdir", str(tmp_path),
        ]
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert status == 0, printed
    table = printed.split("\nmeasure ", 1)[-1]
    missing = [figure for figure in FIGURES if figure not in table]
    assert missing == [], printed
    assert "1/1 done" in table, printed
    assert "6/6 parked" in table, printed
    assert "2/2 moved on (outcomes {'ok': 2})" in table, printed
    assert "did not finish" not in table, printed
