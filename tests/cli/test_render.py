"""What ``inspect`` prints for each kind of outstanding call."""

from __future__ import annotations

from agentrun._frontier import Boundary, PendingCall
from agentrun._messages import ToolCall
from agentrun._resume import CallDecision, ResumePlan, ToolDisposition
from agentrun.cli._render import plan_lines
from tests.support.frontiers import frontier


def test_each_call_says_what_a_resume_would_do() -> None:
    safe = PendingCall(call=ToolCall(id="c1", name="search"), safe_to_repeat=True)
    keyed = PendingCall(call=ToolCall(id="c2", name="book"), idempotency_key="idem:v1:x")
    loose = PendingCall(call=ToolCall(id="c3", name="sms"))
    plan = ResumePlan(
        run_id="r",
        tenant="t",
        decisions=(
            CallDecision(pending=safe, disposition=ToolDisposition.NEVER_RAN, reason="safe"),
            CallDecision(
                pending=keyed,
                disposition=ToolDisposition.COMPLETED,
                outcome="ok",
                reason="recorded",
            ),
            CallDecision(pending=loose, disposition=ToolDisposition.INDETERMINATE, reason="gone"),
        ),
    )
    lines = plan_lines(
        frontier(boundary=Boundary.AFTER_MODEL_CALL, pending=(safe, keyed, loose)), plan
    )
    assert lines[1:] == [
        "  c1  search  safe to repeat: dispatch it again",
        "  c2  book  completed: replay the recorded outcome",
        "      (recorded)",
        "  c3  sms  indeterminate: refuse: nobody can say whether it happened",
        "      (gone)",
    ]
