"""The provider contract the loop talks to, independent of any vendor's wire format."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import JsonValue

from agentrun._base import FrozenModel
from agentrun.errors import AgentRunError
from agentrun.messages import Message, ToolCall, Usage
from agentrun.outcomes import Outcome


class ProviderError(AgentRunError):
    """The model could not be asked: unreachable or busy (``unavailable``, worth asking again
    later), or it refused the request or sent a reply nobody can read (asking again will not
    help: fix the key, the model name, the provider)."""

    def __init__(self, message: str, *, unavailable: bool) -> None:
        super().__init__(message)
        self.outcome = Outcome.PROVIDER_UNAVAILABLE if unavailable else Outcome.REFUSED


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
