"""The conversation a run carries: messages, their parts, the tool calls a model asks for.

These are provider-neutral. A provider adapter maps them to its wire format; the frontier
persists them as they are here.
"""

from __future__ import annotations

import base64
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, JsonValue, PlainSerializer

from agentrun._base import FrozenModel


def _from_base64(value: object) -> object:
    return base64.b64decode(value, validate=True) if isinstance(value, str) else value


def _to_base64(data: bytes) -> str:
    return base64.b64encode(data).decode()


Base64Data = Annotated[
    bytes,
    BeforeValidator(_from_base64),
    PlainSerializer(_to_base64, return_type=str, when_used="json"),
]
"""Raw bytes in Python, base64 text in the persisted JSON.

Not pydantic's ``Base64Bytes``: that decodes whatever it is given, so ``BinaryPart(data=raw)``
would silently keep other bytes than the caller's (or refuse them). Here bytes are taken as they
are and only text, which is what a stored payload carries, is read as base64.
"""


class TextPart(FrozenModel):
    """Text in a message."""

    kind: Literal["text"] = "text"
    text: str


class BinaryPart(FrozenModel):
    """Bytes a message carries (an image, a file). Never masked: see ``redaction``."""

    kind: Literal["binary"] = "binary"
    media_type: str
    data: Base64Data


Part = Annotated[TextPart | BinaryPart, Field(discriminator="kind")]

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(FrozenModel):
    """One call a model asked for. ``id`` is unique within the run."""

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: dict[str, JsonValue] = Field(default_factory=dict)


class Usage(FrozenModel):
    """Tokens a model call (or a run so far) used."""

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )


class ModelCall(FrozenModel):
    """One model call as the run paid for it: its tokens, its price and how long the provider
    took to answer. Kept on the assistant message the call answered with, so the transcript says
    what each call cost where it happened; the ledger stays what decides the run's spend (a call
    made again after a crash is charged twice and shown once, with its second answer)."""

    usage: Usage = Field(default_factory=Usage)
    cost_micros: int = Field(default=0, ge=0)
    latency_ms: int = Field(default=0, ge=0)


class Message(FrozenModel):
    """One turn of the conversation: a role, its parts, the tool calls it asks for (an assistant)
    or the call it answers (a tool)."""

    role: Role
    parts: tuple[Part, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    model_call: ModelCall | None = Field(default=None, exclude_if=lambda v: v is None)
    """On an assistant message: the model call that produced it (absent on every other role,
    and on messages written before it was kept). Left out of the stored JSON when absent, so a
    conversation's other messages are stored as they were."""

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @classmethod
    def of(cls, role: Role, text: str) -> Message:
        return cls(role=role, parts=(TextPart(text=text),))

    @classmethod
    def tool_result(cls, call_id: str, text: str) -> Message:
        return cls(role="tool", parts=(TextPart(text=text),), tool_call_id=call_id)
