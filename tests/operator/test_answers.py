"""Whether a run waits on people: an approval or a resolution its spec does not give yet."""

from __future__ import annotations

from typing import Any

import pytest

from agentrun.operator._answers import waiting_on_people
from agentrun.operator._resource import AgentRunSpec

PENDING = {"pendingApproval": {"requestId": "apr-1", "callId": "c1", "tool": "pay"}}
UNDECIDED = {"indeterminateCalls": [{"callId": "c2", "tool": "sms"}]}
APPROVED = {"approvals": [{"requestId": "apr-1", "decision": "approve", "by": "ada"}]}
RESOLVED = {"resolutions": [{"callId": "c2", "outcome": "didNotRun", "by": "bob"}]}


@pytest.mark.parametrize(
    ("status", "answers", "waiting"),
    [
        ({}, {}, False),
        (PENDING, {}, True),
        (PENDING, APPROVED, False),
        (UNDECIDED, {}, True),
        (UNDECIDED, RESOLVED, False),
        ({**PENDING, **UNDECIDED}, APPROVED, True),
        ({**PENDING, **UNDECIDED}, {**APPROVED, **RESOLVED}, False),
    ],
)
def test_a_run_waits_until_the_spec_answers_everything_it_waits_on(
    status: dict[str, Any], answers: dict[str, Any], waiting: bool
) -> None:
    spec = AgentRunSpec.model_validate({"agent": "booking", **answers})
    assert waiting_on_people(spec, status) is waiting
