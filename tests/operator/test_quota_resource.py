"""The RunQuota model's pure parts: windows every replica agrees on, and the status summaries.

What the CRD and ``parse_quota`` refuse is tests/kube/test_kube_runquota.py's, asked of a real API
server; here, what needs none.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from agentrun.operator._quota_resource import (
    EPOCH,
    Budget,
    RunQuotaSpec,
    active_summary,
    spent_summary,
    window_key,
    window_start,
)

NOW = datetime(2026, 12, 2, 13, 47, 12, 345678, tzinfo=UTC)
"""A Wednesday."""


def test_a_day_window_starts_at_midnight_utc() -> None:
    assert window_start(NOW, timedelta(hours=24)) == datetime(2026, 12, 2, tzinfo=UTC)


def test_an_hour_window_starts_on_the_hour_and_a_30m_one_on_the_half_hour() -> None:
    assert window_start(NOW, timedelta(hours=1)) == datetime(2026, 12, 2, 13, tzinfo=UTC)
    assert window_start(NOW, timedelta(minutes=30)) == datetime(2026, 12, 2, 13, 30, tzinfo=UTC)


def test_a_week_window_starts_on_the_thursday_the_epoch_was() -> None:
    start = window_start(NOW, timedelta(days=7))
    assert start == datetime(2026, 11, 26, tzinfo=UTC)
    assert start.strftime("%A") == EPOCH.strftime("%A") == "Thursday"


@pytest.mark.parametrize(
    "window", [timedelta(minutes=1), timedelta(minutes=90), timedelta(hours=7), timedelta(days=3)]
)
def test_the_window_holds_now_and_is_a_whole_number_of_windows_from_the_epoch(
    window: timedelta,
) -> None:
    for now in (NOW, NOW + window / 3, NOW + 5 * window, EPOCH, EPOCH + window):
        start = window_start(now, window)
        assert start <= now < start + window
        assert (start - EPOCH) % window == timedelta(0)
        assert window_start(start, window) == start
        assert window_start(start + window, window) == start + window


def test_every_replica_computes_the_same_window_and_key_whatever_its_timezone() -> None:
    elsewhere = NOW.astimezone(timezone(timedelta(hours=-5, minutes=-30)))
    day = timedelta(hours=24)
    assert window_start(elsewhere, day) == window_start(NOW, day)
    assert window_key(window_start(elsewhere, day)) == window_key(window_start(NOW, day))
    assert window_key(window_start(NOW, day)) == "20261202T000000Z"
    assert window_key(window_start(elsewhere, day).astimezone(elsewhere.tzinfo)) == (
        "20261202T000000Z"
    )


def test_keys_sort_as_their_windows_do() -> None:
    window = timedelta(minutes=90)
    starts = [window_start(NOW + k * window, window) for k in (3, -40, 0, 1000, 7)]
    assert sorted(starts, key=window_key) == sorted(starts)


def test_a_window_given_in_python_must_be_whole_minutes() -> None:
    assert Budget(window=timedelta(days=7), max_tokens=1).model_dump(by_alias=True)["window"] == (
        "7d"
    )
    assert Budget(window=timedelta(minutes=90), max_tokens=1).model_dump()["window"] == "90m"
    for window in (timedelta(seconds=90), timedelta(0), timedelta(minutes=-1)):
        with pytest.raises(ValidationError, match="whole number of minutes, 1m at least"):
            Budget(window=window, max_tokens=1)
    with pytest.raises(ValidationError, match="whole number of m, h or d"):
        Budget.model_validate({"window": 3600, "maxTokens": 1})


def test_the_summaries_show_what_the_quota_limits() -> None:
    both = RunQuotaSpec(max_active_runs=5, budget=Budget(max_cost_micros=5_000_000, max_tokens=9))
    assert active_summary(3, both) == "3/5"
    assert spent_summary(120_000, 4000, both) == "0.12/5.00"
    tokens = RunQuotaSpec(budget=Budget(max_tokens=2_000_000))
    assert active_summary(3, tokens) == "3"
    assert spent_summary(120_000, 4000, tokens) == "4000/2000000"
    runs = RunQuotaSpec(max_active_runs=0)
    assert active_summary(0, runs) == "0/0"
    assert spent_summary(1_234_567, 4000, runs) == "1.23"
