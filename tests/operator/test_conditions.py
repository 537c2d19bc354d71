"""The condition helper: observedGeneration always stamped, lastTransitionTime kept unless the
status changes, other conditions untouched and in order."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentrun._outcomes import SUCCEEDED
from agentrun.operator._conditions import initial_conditions, is_terminal, set_condition

T0 = datetime(2026, 11, 27, 17, 0, tzinfo=UTC)


def test_first_visit_sets_every_condition_with_the_generation() -> None:
    conditions = initial_conditions(3, now=T0)
    assert [c["type"] for c in conditions] == [
        "Succeeded",
        "AwaitingApproval",
        "Indeterminate",
        "Checkpointed",
    ]
    assert {c["observedGeneration"] for c in conditions} == {3}
    assert {c["lastTransitionTime"] for c in conditions} == {"2026-11-27T17:00:00Z"}
    assert not is_terminal(conditions)


def test_a_new_reason_under_the_same_status_is_not_a_transition() -> None:
    before = initial_conditions(1, now=T0)
    after = set_condition(
        before,
        SUCCEEDED,
        "Unknown",
        "Running",
        "w1 holds it",
        generation=2,
        now=T0 + timedelta(days=3),
    )
    succeeded = after[0]
    assert (succeeded["reason"], succeeded["message"]) == ("Running", "w1 holds it")
    assert succeeded["lastTransitionTime"] == "2026-11-27T17:00:00Z"
    assert succeeded["observedGeneration"] == 2
    assert after[1:] == before[1:]


def test_a_changed_status_is_a_transition_and_ends_the_run() -> None:
    before = initial_conditions(1, now=T0)
    after = set_condition(
        before, SUCCEEDED, "True", "Completed", "done", generation=1, now=T0 + timedelta(hours=1)
    )
    assert after[0]["lastTransitionTime"] == "2026-11-27T18:00:00Z"
    assert is_terminal(after)
    assert before[0]["status"] == "Unknown", "the input is not changed in place"


def test_an_unknown_type_is_appended() -> None:
    after = set_condition(
        [], "Checkpointed", "False", "StoreUnavailable", "x" * 40000, generation=5, now=T0
    )
    assert len(after) == 1
    assert len(after[0]["message"]) == 32768
