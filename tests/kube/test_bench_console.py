"""``bench.console`` end to end in a small form, on its own control plane.

The benchmark is a command, never a timed test: nothing here holds a timing to a value. It holds
the command to what bench/README.md says it measures: every figure is printed, every page timed
showed the runs it should (the command refuses a figure of a page that did not), and however
many browsers are connected the API server serves one AgentRun watch for the console — a
property of the design, not a timing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.console import main

FIGURES = (
    "60 runs in 3 namespaces",
    "console start -> runs listed",
    "first page of 60 runs, warm p50 / p99",
    "baseline: the same runs listed from the API server",
    "AgentRun watches on the API server, 5 browsers",
    "a status change -> all 5 browsers, p50 / p99",
)


def test_every_figure_is_printed_and_five_browsers_cost_one_watch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        [
            "--runs", "60", "--namespaces", "3", "--pages", "3", "--spacing", "0.2",
            "--browsers", "5", "--changes", "3", "--workdir", str(tmp_path),
        ]
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert status == 0, printed
    table = printed.split("\nmeasure ", 1)[-1]
    missing = [figure for figure in FIGURES if figure not in table]
    assert missing == [], printed
    [watches] = [line for line in table.splitlines() if line.startswith("AgentRun watches")]
    assert watches.split("|")[1].strip() == "1", watches
    assert "before the console 0, with it and no browser 1" in watches, watches
