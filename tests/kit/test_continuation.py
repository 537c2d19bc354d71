"""Continuation: when an execution is due to start again, and what crosses over."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentrun._checkpointing import Checkpointer
from agentrun._continuation import (
    DEFAULT_CONTINUATION,
    Authority,
    Continuation,
    ContinuationPolicy,
    continued,
)
from agentrun._errors import ConfigurationError
from agentrun._frontier import Boundary, Checkpoint, PendingApproval
from agentrun._messages import Usage
from agentrun.stores._memory import MemoryBackend
from tests.support.frontiers import APPROVAL, RUN, TENANT, conversation, frontier, pending


def test_defaults_are_200_steps_and_1_5_mb() -> None:
    assert (DEFAULT_CONTINUATION.max_steps, DEFAULT_CONTINUATION.max_history_bytes) == (
        200,
        1_500_000,
    )
    assert ContinuationPolicy() == DEFAULT_CONTINUATION


@pytest.mark.parametrize(("steps", "due"), [(0, False), (199, False), (200, True), (500, True)])
def test_due_on_max_steps(steps: int, due: bool) -> None:
    assert DEFAULT_CONTINUATION.due(steps) is due


@pytest.mark.parametrize(
    ("history_bytes", "due"), [(0, False), (1_499_999, False), (1_500_000, True), (9**9, True)]
)
def test_due_on_max_history_bytes(history_bytes: int, due: bool) -> None:
    assert DEFAULT_CONTINUATION.due(0, history_bytes=history_bytes) is due


def test_a_custom_policy_uses_its_own_limits() -> None:
    policy = ContinuationPolicy(max_steps=3, max_history_bytes=100)
    assert not policy.due(2, history_bytes=99)
    assert policy.due(3)
    assert policy.due(0, history_bytes=100)


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValidationError):
        ContinuationPolicy(max_steps=0)


async def out_of_line(backend: MemoryBackend, **fields: object) -> Checkpoint:
    checkpointer = Checkpointer(backend.checkpoints, history=backend.history)
    await checkpointer.write(frontier(messages=conversation(4), **fields))
    stored = await checkpointer.latest(TENANT, RUN)
    assert stored is not None
    assert stored.history_handle is not None
    return stored


async def test_continued_carries_the_handle_and_the_counters(backend: MemoryBackend) -> None:
    state = await out_of_line(
        backend,
        boundary=Boundary.BEFORE_APPROVAL,
        approval=APPROVAL,
        iteration=41,
        usage=Usage(input_tokens=1200, output_tokens=300),
        cost_micros=4100,
        grant="grant-7",
        scopes=("flights:book",),
        user="mara",
    )
    carry = continued(state, tenant=TENANT, agent_name="booking")
    assert carry.history_handle == state.history_handle
    assert carry.history_length == state.history_length == 8
    assert (carry.iteration, carry.usage, carry.cost_micros) == (
        41,
        Usage(input_tokens=1200, output_tokens=300),
        4100,
    )
    assert (carry.grant, carry.approval, carry.scopes, carry.user) == (
        "grant-7",
        APPROVAL,
        ("flights:book",),
        "mara",
    )
    assert carry.acting_under == Authority(grant="grant-7", approval=APPROVAL)
    assert (carry.run_id, carry.agent_revision) == (RUN, state.agent_revision)
    assert "messages" not in Continuation.model_fields  # the transcript crosses as a handle


def test_continued_from_an_inline_checkpoint_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="history store"):
        continued(frontier(messages=conversation(1)), tenant=TENANT, agent_name="booking")


async def test_continued_as_another_tenant_or_agent_is_refused(backend: MemoryBackend) -> None:
    state = await out_of_line(backend)
    with pytest.raises(ConfigurationError):
        continued(state, tenant="someone-else", agent_name="booking")
    with pytest.raises(ConfigurationError):
        continued(state, tenant=TENANT, agent_name="another-agent")


async def test_dropping_the_grant_cannot_be_constructed(backend: MemoryBackend) -> None:
    carry = continued(
        await out_of_line(backend, grant="grant-7"), tenant=TENANT, agent_name="booking"
    )
    for grant in (None, "grant-8"):
        with pytest.raises(ConfigurationError, match="grant-7") as caught:
            Continuation(**{**carry.model_dump(), "grant": grant})
        assert not isinstance(caught.value, ValidationError)


async def test_dropping_the_approval_cannot_be_constructed(backend: MemoryBackend) -> None:
    state = await out_of_line(backend, boundary=Boundary.BEFORE_APPROVAL, approval=APPROVAL)
    carry = continued(state, tenant=TENANT, agent_name="booking")
    other = PendingApproval(request_id="req-10", call_id="c1", tool="book_flight")
    for approval in (None, other.model_dump()):
        with pytest.raises(ConfigurationError, match="req-9") as caught:
            Continuation(**{**carry.model_dump(), "approval": approval})
        assert not isinstance(caught.value, ValidationError)
    with pytest.raises(ConfigurationError):
        carry.model_validate({**carry.model_dump(), "approval": None})


async def test_a_continuation_that_keeps_its_authority_is_built(backend: MemoryBackend) -> None:
    carry = continued(await out_of_line(backend, grant="g"), tenant=TENANT, agent_name="booking")
    again = Continuation(**carry.model_dump())
    assert again == carry


def test_a_frontier_with_calls_outstanding_is_not_continued_from() -> None:
    outstanding = frontier(
        boundary=Boundary.AFTER_MODEL_CALL,
        history_handle="sha256:" + "0" * 64,
        history_length=3,
        pending=(pending("c1"),),
    )
    with pytest.raises(ConfigurationError, match="calls outstanding"):
        continued(outstanding, tenant=TENANT, agent_name="booking")
