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


class Message(FrozenModel):
    """One turn of the conversation: a role, its parts, the tool calls it asks for (an assistant)
    or the call it answers (a tool)."""

    role: Role
    parts: tuple[Part, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @classmethod
    def of(cls, role: Role, text: str) -> Message:
        return cls(role=role, parts=(TextPart(text=text),))

    @classmethod
    def tool_result(cls, call_id: str, text: str) -> Message:
        return cls(role="tool", parts=(TextPart(text=text),), tool_call_id=call_id)


class Usage(FrozenModel):
    """Tokens a model call (or a run so far) used."""

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )
