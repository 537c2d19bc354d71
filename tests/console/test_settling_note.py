"""What the console says of an undecidable call the operator may settle: read from the status
note the operator writes (``status.indeterminateCalls[].settlement``), rendered by the pages'
own templates and masker."""

from __future__ import annotations

from typing import Any

from agentrun._redaction import Masker
from agentrun.console._runs import row_of
from agentrun.console._web import environment

KEY = "sk-proj-" + "abcdefghijklmnopqrstuvwxyz0123456789"


def _run(settlement: dict[str, Any] | None) -> dict[str, Any]:
    call: dict[str, Any] = {"callId": "call_2_0", "tool": "charge_card"}
    if settlement is not None:
        call["settlement"] = settlement
    return {
        "metadata": {"namespace": "shop", "name": "paid-1", "uid": "u-1"},
        "spec": {"agent": "booking-paid"},
        "status": {"indeterminateCalls": [call]},
    }


def _note(settlement: dict[str, Any] | None) -> str:
    [call] = row_of(_run(settlement)).undecidable
    return environment(Masker.build()).get_template("_settling.html").render(call=call).strip()


def test_a_call_waiting_for_the_settler_says_when_it_will_be_asked() -> None:
    note = _note({"dueAt": "2026-12-03T09:30:05Z", "attempts": 0, "phase": "Waiting"})
    assert "will ask the tool's service what became of it at 09:30:05 UTC" in note
    assert "unless someone answers first" in note


def test_a_call_left_to_a_person_says_what_the_settler_saw_masked() -> None:
    note = _note(
        {
            "dueAt": "2026-12-03T09:30:05Z",
            "attempts": 2,
            "phase": "LeftToPerson",
            "message": f"asked 3 times: the lookup answered 503 (key {KEY})",
        }
    )
    assert "asked the tool's service (2 times) and it settled nothing" in note
    assert "It saw: asked 3 times: the lookup answered 503" in note
    assert KEY not in note
    assert "[REDACTED]" in note


def test_a_call_no_settler_asks_about_says_nothing_more() -> None:
    assert _note(None) == ""
