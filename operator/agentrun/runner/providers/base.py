"""The provider contract the loop talks to, independent of any vendor's wire format."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import JsonValue

from agentrun._base import FrozenModel
from agentrun.errors import AgentRunError
from agentrun.messages import Message, ToolCall, Usage


class ProviderError(AgentRunError):
    """The model could not be asked (transport, status, unreadable reply)."""

    retryable = True


class ModelReply(FrozenModel):
    """What a model answered: text, the tool calls it asks for, and the tokens it used."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()


class Provider(Protocol):
    """A model behind any wire format: messages and tool schemas in, a ``ModelReply`` out."""

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[dict[str, JsonValue]],
    ) -> ModelReply: ...
