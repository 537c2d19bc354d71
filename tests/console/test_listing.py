"""The runs page's view: a page of runs, and the counts a live update sends alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentrun.console._listing import Filter, listing, state_counts
from agentrun.console._runs import RunRow

NOW = datetime(2026, 12, 3, tzinfo=UTC)


def _row(name: str, state: str, namespace: str = "shop", age: int = 60) -> RunRow:
    return RunRow(
        namespace=namespace, name=name, uid=name, state=state,
        created=NOW - timedelta(seconds=age),
    )  # fmt: skip


ROWS = [
    _row("a", "Running"),
    _row("b", "AwaitingApproval"),
    _row("c", "AwaitingApproval"),
    _row("d", "Completed", namespace="other"),
    _row("e", "Completed", age=7200),
]


def test_the_counts_alone_are_the_pages_counts() -> None:
    for view in (Filter(), Filter(state="AwaitingApproval"), Filter(namespace="shop", age="1h")):
        assert state_counts(view, ROWS, NOW) == listing(view, ROWS, NOW).counts


def test_the_counts_leave_the_views_own_state_aside() -> None:
    assert state_counts(Filter(state="Running", namespace="shop", age="1h"), ROWS, NOW) == (
        ("AwaitingApproval", 2),
        ("Running", 1),
    )
