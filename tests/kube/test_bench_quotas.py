"""``bench.quotas`` end to end in a small form, on its own control plane, Redis and replicas.

The benchmark is a command, never a timed test: nothing here holds a timing or the fair-share
ratio to a value. It holds the command to what bench/README.md says it measures, so that issue
24's RunQuota figures come from one command that works: every figure is printed, every run it
waits for gets there, and what the command reads from the store is never over the quota (the
cap and the budget's bound are the quota's promises, not timings).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.quotas import main

FIGURES = (
    "budget, 3 runs: stopped",
    "budget, 3 runs: spent against the budget",
    "budget, 3 runs: overrun",
    "B alone: 2 runs created -> all Succeeded",
    "A, 12 runs: created -> each queued or at work",
    "A as B's runs are created, 12 runs",
    "B beside A's 12: 2 runs created -> all Succeeded",
    "B beside A / B alone (2 runs)",
    "A's places in the store, most at once (cap 2)",
    "A's runs showing a lease holder, most at once (cap 2)",
)


def test_every_figure_is_printed_and_no_quota_is_exceeded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        [
            "--runs-a", "12", "--cap-a", "2", "--runs-b", "2", "--cap-b", "2", "--capacity", "3",
            "--budget-runs", "3", "--budget", "120", "--workdir", str(tmp_path),
        ]
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert status == 0, printed
    table = printed.split("\nmeasure ", 1)[-1]
    missing = [figure for figure in FIGURES if figure not in table]
    assert missing == [], printed
    assert table.count("2/2 done") == 2, printed
    assert "12/12 queued, at work or done" in table, printed
    assert "(still going)" not in table, printed
    assert "still reserved 0 tokens" in table, printed
    assert "within it" in table, printed
    assert table.count("never over the cap") == 2, printed
    assert "OVER" not in table, printed
