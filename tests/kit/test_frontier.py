"""The frontier model: frozen, strict, versioned, and described in exactly three lines."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from agentrun._errors import CheckpointFormatError
from agentrun._frontier import (
    CHECKPOINT_FORMAT,
    Boundary,
    PendingApproval,
    PendingCall,
    decode,
    describe,
    encode,
)
from agentrun._messages import BinaryPart, Message, TextPart, ToolCall, Usage
from tests.support.frontiers import frontier, pending

APPROVAL = PendingApproval(request_id="req-9", call_id="call-1", tool="book_flight")


def _instances() -> list[BaseModel]:
    call = ToolCall(id="call-1", name="book_flight", arguments={"flight": "LH400"})
    return [
        TextPart(text="hi"),
        BinaryPart(media_type="image/png", data=b"\x89PNG"),
        call,
        Message.of("user", "hi"),
        Usage(input_tokens=1, output_tokens=2),
        PendingCall(call=call),
        APPROVAL,
        frontier(),
    ]


@pytest.mark.parametrize("model", _instances(), ids=lambda m: type(m).__name__)
def test_models_are_frozen(model: BaseModel) -> None:
    field = next(iter(type(model).model_fields))
    with pytest.raises(ValidationError, match="frozen"):
        setattr(model, field, getattr(model, field))


@pytest.mark.parametrize("model", _instances(), ids=lambda m: type(m).__name__)
def test_models_refuse_extra_fields(model: BaseModel) -> None:
    raw: dict[str, Any] = model.model_dump()
    type(model).model_validate(raw)  # the dump itself is valid
    with pytest.raises(ValidationError, match="extra"):
        type(model).model_validate({**raw, "surprise": 1})


def test_a_new_checkpoint_carries_the_current_format() -> None:
    assert isinstance(CHECKPOINT_FORMAT, int)
    assert CHECKPOINT_FORMAT >= 1
    checkpoint = frontier()
    assert checkpoint.format_version == CHECKPOINT_FORMAT
    assert json.loads(encode(checkpoint))["format_version"] == CHECKPOINT_FORMAT


def test_describe_prints_the_three_lines_waiting_on_approval() -> None:
    checkpoint = frontier(
        run_id="run_1",
        boundary=Boundary.BEFORE_APPROVAL,
        approval=APPROVAL,
        iteration=3,
        usage=Usage(input_tokens=1200, output_tokens=300),
        cost_micros=4100,
    )
    assert describe(checkpoint) == (
        "run run_1  tenant acme  agent booking\n"
        "iteration 3  1200 in, 300 out  4100 micros\n"
        "waiting on approval req-9"
    )


def test_describe_prints_the_three_lines_waiting_on_nothing() -> None:
    checkpoint = frontier(
        run_id="r",
        tenant="t",
        agent_name="a",
        iteration=12,
        usage=Usage(input_tokens=5, output_tokens=6),
        cost_micros=7,
    )
    assert describe(checkpoint).splitlines() == [
        "run r  tenant t  agent a",
        "iteration 12  5 in, 6 out  7 micros",
        "waiting on nothing",
    ]


def test_a_newer_format_with_unknown_fields_is_a_format_error() -> None:
    raw = json.loads(encode(frontier()))
    raw["format_version"] = CHECKPOINT_FORMAT + 1
    raw["field_from_the_future"] = {"x": 1}
    raw["boundary"] = "some_boundary_from_the_future"
    with pytest.raises(CheckpointFormatError) as caught:
        decode(json.dumps(raw).encode(), run_id="run-1")
    assert not isinstance(caught.value, ValidationError)
    assert caught.value.found == CHECKPOINT_FORMAT + 1
    assert caught.value.supported == CHECKPOINT_FORMAT
    assert "'run-1'" in str(caught.value)
    assert not isinstance(caught.value.__cause__, ValidationError)


@pytest.mark.parametrize(
    ("version", "label"),
    [
        (0, "zero"),
        (-1, "negative"),
        ("1", "a string"),
        (True, "a bool"),
        (1.0, "a float"),
        (None, "null"),
    ],
)
def test_a_version_that_is_not_a_known_int_is_refused(version: object, label: str) -> None:
    raw = json.loads(encode(frontier()))
    raw["format_version"] = version
    with pytest.raises(CheckpointFormatError):
        decode(json.dumps(raw))


def test_a_payload_without_a_version_is_refused() -> None:
    raw = json.loads(encode(frontier()))
    del raw["format_version"]
    with pytest.raises(CheckpointFormatError):
        decode(json.dumps(raw))


@pytest.mark.parametrize(
    "payload",
    [b"\xff\xfe\x00garbage", b"not json at all", b"", b"[1, 2, 3]", b'"a string"', b"{"],
    ids=["bytes", "text", "empty", "list", "string", "truncated"],
)
def test_garbage_is_a_format_error(payload: bytes) -> None:
    with pytest.raises(CheckpointFormatError):
        decode(payload, run_id="run-1")


def test_the_current_version_with_an_unknown_field_is_a_format_error_too() -> None:
    raw = json.loads(encode(frontier()))
    raw["unknown"] = 1
    with pytest.raises(CheckpointFormatError) as caught:
        decode(json.dumps(raw).encode())
    assert "invalid" in str(caught.value)


def test_round_trip_keeps_everything_including_binary_parts() -> None:
    every_byte = bytes(range(256))
    checkpoint = frontier(
        boundary=Boundary.BEFORE_APPROVAL,
        approval=APPROVAL,
        fence=7,
        messages=(
            Message.of("system", "you book flights"),
            Message(
                role="user",
                parts=(
                    TextPart(text="this seat, ünïcode ✈"),
                    BinaryPart(media_type="image/png", data=every_byte),
                ),
            ),
            Message(
                role="assistant",
                tool_calls=(
                    ToolCall(
                        id="call-1",
                        name="book_flight",
                        arguments={"seat": "12A", "n": [1, 2.5, None, True]},
                    ),
                ),
            ),
            Message.tool_result("call-1", '{"ok": true}'),
        ),
        pending=(pending("call-2", key="idem:v1:abc", safe_to_repeat=False),),
        usage=Usage(input_tokens=10, output_tokens=20),
        cost_micros=30,
        iteration=4,
        grant="grant-1",
        scopes=("flights:book",),
        user="mara",
        written_at=datetime(2024, 3, 15, 10, 22, 33, 120000, tzinfo=UTC),
        metadata={"trace": {"id": "t-1", "spans": [1, 2]}},
    )
    back = decode(encode(checkpoint))
    assert back == checkpoint
    binary = back.messages[1].parts[1]
    assert isinstance(binary, BinaryPart)
    assert binary.data == every_byte
    assert decode(encode(checkpoint).decode()) == checkpoint  # str payloads read the same


def test_transcript_is_inline_or_out_of_line_not_both() -> None:
    with pytest.raises(ValidationError, match="not both"):
        frontier(messages=(Message.of("user", "hi"),), history_handle="sha256:00")


def test_before_approval_must_name_the_approval() -> None:
    with pytest.raises(ValidationError, match="approval"):
        frontier(boundary=Boundary.BEFORE_APPROVAL)


def test_boundaries_are_the_spec_three() -> None:
    assert {b.value for b in Boundary} == {
        "after_model_call",
        "after_tool_result",
        "before_approval",
    }
