"""What a run's status says about settling its undecidable calls decides, from the watch alone,
whether and when a replica asks the services (``_settlement_notes``): no agent is built, no
request made, to know that a run is due."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentrun.operator._config import OperatorConfig
from agentrun.operator._settlement_notes import (
    MAX_ATTEMPTS,
    asking,
    due_at,
    is_due,
    left_to_person,
    noted,
    planned,
    to_settle,
)
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._settlement import Replay
from agentrun.runner._tools import tool

AT = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


@tool(key_arguments=("order_id",), settle=Replay(delay_seconds=30))
async def charge(order_id: str, idempotency_key: str | None = None) -> str:
    return order_id


@tool(key_arguments=("order_id",))
async def refund(order_id: str, idempotency_key: str | None = None) -> str:
    return order_id


AGENT = AgentDefinition(name="payer", instructions="Pay.", model="m", tools=(charge, refund))


def _run(calls: list[dict[str, Any]], answered: tuple[str, ...] = ()) -> dict[str, Any]:
    resolutions = [{"callId": c, "outcome": "didNotRun", "by": "alice"} for c in answered]
    return {
        "metadata": {"uid": "u1"},
        "spec": {"agent": "payer", "resolutions": resolutions},
        "status": {"indeterminateCalls": calls},
    }


def _entry(call_id: str, tool_name: str) -> dict[str, Any]:
    return planned(AGENT, call_id, tool_name, AT).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )


def test_a_call_is_noted_only_when_its_tool_declares_a_way_to_settle_it() -> None:
    noted_call = _entry("c1", "charge")
    assert noted_call["settlement"] == {
        "dueAt": "2026-12-03T09:00:30Z",
        "attempts": 0,
        "phase": "Waiting",
    }
    assert "settlement" not in _entry("c2", "refund")
    assert "settlement" not in _entry("c3", "gone")


def test_what_is_due_and_when_comes_from_the_status() -> None:
    calls = [_entry("c1", "charge"), _entry("c2", "refund")]
    due = to_settle(_run(calls))
    assert [c["callId"] for c in due] == ["c1"]
    assert due_at(due) == AT + timedelta(seconds=30)
    assert not is_due(due[0], AT + timedelta(seconds=29))
    assert is_due(due[0], AT + timedelta(seconds=30))
    assert to_settle(_run(calls, answered=("c1",))) == [], "a person's answer comes first"
    assert due_at([]) is None


def test_a_round_counts_and_moves_the_due_time_to_when_its_lease_would_lapse() -> None:
    call = _entry("c1", "charge")
    lapses = AT + timedelta(minutes=5)
    begun = asking(call, lapses)
    assert (begun.phase, begun.attempts, begun.due_at) == ("Asking", 1, lapses)
    status = {"indeterminateCalls": [call, _entry("c2", "refund")]}
    written = noted(status, {"c1": begun})
    assert written is not None
    assert written[0]["settlement"]["phase"] == "Asking"
    assert "settlement" not in written[1]
    assert noted(status, {"c9": begun}) is None, "a call no longer listed: the run moved on"


def test_nobody_asks_again_once_left_to_a_person_or_out_of_attempts() -> None:
    call = _entry("c1", "charge")
    ended = left_to_person(call, "x" * 5000)
    assert ended.phase == "LeftToPerson"
    assert len(ended.message or "") == 2048
    left = {**call, "settlement": ended.model_dump(mode="json", by_alias=True)}
    assert to_settle(_run([left])) == []
    spent = {**call, "settlement": {**call["settlement"], "attempts": MAX_ATTEMPTS}}
    assert to_settle(_run([spent])) == []


def test_settling_is_on_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTRUN_STORE_URL", "memory://")
    monkeypatch.delenv("AGENTRUN_SETTLING", raising=False)
    assert OperatorConfig.from_environment().settling is True
    monkeypatch.setenv("AGENTRUN_SETTLING", "false")
    assert OperatorConfig.from_environment().settling is False
