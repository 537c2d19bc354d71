"""The frontier: the state a run is at rest in at one of three unambiguous boundaries.

A checkpoint is only ever taken where the state is not moving (``Boundary``): after the model
answered and before anything it asked for ran; after every result of the turn came back; before
the run waits on a person. Anywhere else the frontier describes a state the run was never in.

``decode`` reads the format version before it validates anything else, so a payload written by
a newer kit is refused with ``CheckpointFormatError`` even when it carries fields this version
has never heard of, and the payload is left where it is for a newer worker.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from enum import StrEnum

from pydantic import Field, JsonValue, ValidationError, model_validator

from agentrun._base import FrozenModel
from agentrun._errors import CheckpointFormatError
from agentrun._messages import Message, ToolCall, Usage

CHECKPOINT_FORMAT = 1
"""The payload version this kit writes, and the newest it reads."""


class Boundary(StrEnum):
    """The three places a run's state is at rest, and so the only ones a frontier is written at."""

    AFTER_MODEL_CALL = "after_model_call"
    AFTER_TOOL_RESULT = "after_tool_result"
    BEFORE_APPROVAL = "before_approval"


class PendingCall(FrozenModel):
    """A call the model asked for whose result is not yet in the conversation.

    ``idempotency_key`` is None for a tool that declares no key arguments; such a call is
    tracked by a per-call dispatch marker instead, and a marker left in flight is indeterminate.
    ``arguments_masked`` says redaction changed the arguments as persisted: the call can then
    never be dispatched from this frontier (see ``resume``).
    """

    call: ToolCall
    idempotency_key: str | None = None
    safe_to_repeat: bool = False
    requires_approval: bool = False
    arguments_masked: bool = False


class PendingApproval(FrozenModel):
    """The approval a run stopped to wait on: its request id, and the call and tool it holds."""

    request_id: str = Field(min_length=1)
    call_id: str = Field(min_length=1)
    tool: str = Field(min_length=1)


class Checkpoint(FrozenModel):
    """A run's frontier at one boundary: the transcript (inline or as a handle), the calls still
    outstanding, what was spent, the fence it was written under and the agent revision it pins."""

    format_version: int = CHECKPOINT_FORMAT
    run_id: str = Field(min_length=1)
    tenant: str = Field(min_length=1)
    agent_name: str = Field(min_length=1)
    agent_revision: str = Field(min_length=1)
    boundary: Boundary
    fence: int = Field(default=0, ge=0)
    messages: tuple[Message, ...] = ()
    history_handle: str | None = None
    history_length: int = Field(default=0, ge=0)
    pending: tuple[PendingCall, ...] = ()
    usage: Usage = Usage()
    cost_micros: int = Field(default=0, ge=0)
    iteration: int = Field(default=0, ge=0)
    approval: PendingApproval | None = None
    grant: str | None = None
    scopes: tuple[str, ...] = ()
    user: str | None = None
    written_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    metadata: dict[str, JsonValue] = Field(default_factory=dict)

    @property
    def holds_intent(self) -> bool:
        """Whether a call it names may have side effects (is not safe to repeat): then this
        frontier is the only record a resume has that the call may have been made."""
        return any(not pending.safe_to_repeat for pending in self.pending)

    @model_validator(mode="after")
    def _one_transcript(self) -> Checkpoint:
        if self.history_handle is not None and self.messages:
            raise ValueError(
                "a checkpoint carries its transcript either inline (messages) or out of line "
                "(history_handle), not both"
            )
        if self.boundary is Boundary.BEFORE_APPROVAL and self.approval is None:
            raise ValueError("a before_approval checkpoint must name the approval it waits on")
        return self


def encode(checkpoint: Checkpoint) -> bytes:
    """The exact bytes a store writes for this checkpoint."""
    return checkpoint.__pydantic_serializer__.to_json(checkpoint)


def encode_message(message: Message) -> bytes:
    """One message as ``encode`` writes it inside a frontier's ``messages``."""
    return message.__pydantic_serializer__.to_json(message)


_NO_MESSAGES = b'"messages":[]'


def encode_spliced(checkpoint: Checkpoint, messages: Sequence[bytes]) -> bytes:
    """``encode`` of ``checkpoint`` with ``messages`` (each from ``encode_message``) as its
    transcript, given the checkpoint without one: byte for byte what encoding the whole
    checkpoint would give, without encoding again the messages a run wrote at every boundary.

    The splice point is the first ``"messages":[]`` of the encoded checkpoint, and it can only be
    the top-level field: inside a JSON string every quote is escaped, a closing quote cannot be
    followed by a letter, and every field before ``messages`` is a number or a string.
    """
    if checkpoint.messages:
        raise ValueError("encode_spliced takes the checkpoint without its messages")
    encoded = encode(checkpoint)
    at = encoded.index(_NO_MESSAGES) + len(_NO_MESSAGES) - 1
    parts = [encoded[:at]]
    for index, message in enumerate(messages):
        if index:
            parts.append(b",")
        parts.append(message)
    parts.append(encoded[at:])
    return b"".join(parts)


def decode(payload: bytes | str, *, run_id: str | None = None) -> Checkpoint:
    """Read a stored payload, refusing a newer or unreadable format before anything else."""
    try:
        raw = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointFormatError(
            run_id=run_id, found=f"unparseable ({exc})", supported=CHECKPOINT_FORMAT
        ) from exc
    if not isinstance(raw, dict):
        kinds = {list: "array", str: "string", bool: "boolean", type(None): "null"}
        kind = kinds.get(type(raw), "number")
        raise CheckpointFormatError(
            run_id=run_id,
            found=f"a JSON {kind} where a frontier object belongs",
            supported=CHECKPOINT_FORMAT,
        )
    version = raw.get("format_version")
    if type(version) is not int or not 1 <= version <= CHECKPOINT_FORMAT:
        raise CheckpointFormatError(run_id=run_id, found=version, supported=CHECKPOINT_FORMAT)
    try:
        return Checkpoint.model_validate(raw)
    except ValidationError as exc:
        raise CheckpointFormatError(
            run_id=run_id,
            found=f"invalid ({exc.error_count()} errors: {exc})",
            supported=CHECKPOINT_FORMAT,
        ) from exc


def describe(checkpoint: Checkpoint) -> str:
    """The three lines an on-call engineer reads first.

    ``inspect`` and ``run --resume`` both print it, so the two cannot drift.
    """
    waiting = (
        f"waiting on approval {checkpoint.approval.request_id}"
        if checkpoint.approval is not None
        else "waiting on nothing"
    )
    return "\n".join(
        (
            f"run {checkpoint.run_id}  tenant {checkpoint.tenant}  agent {checkpoint.agent_name}",
            f"iteration {checkpoint.iteration}  {checkpoint.usage.input_tokens} in, "
            f"{checkpoint.usage.output_tokens} out  {checkpoint.cost_micros} micros",
            waiting,
        )
    )
