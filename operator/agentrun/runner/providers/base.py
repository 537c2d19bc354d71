"""The provider contract the loop talks to, independent of any vendor's wire format."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import JsonValue

from agentrun._base import FrozenModel
from agentrun.errors import AgentRunError
from agentrun.messages import Message, ToolCall, Usage


class ProviderError(AgentRunError):
    """The model could not be asked, and asking again now will not help: the run stops here.

    A provider retries, with backoff and honouring ``Retry-After``, what a retry can fix (a rate
    limit, a 5xx, a dropped connection, a timeout: a model call has no side effect, so repeating
    it is safe). What reaches the loop is what is left when those retries are spent, or what no
    retry fixes (a refused key, a request the endpoint rejects, a reply nobody can read). So it
    is not retryable: the run ends (the operator reports it ``Failed`` with this message), and
    because everything before this call is checkpointed, a resume once the endpoint is well
    again carries the run on without repeating a tool call.
    """

    def __init__(
        self, endpoint: str, problem: str, *, status: int | None = None, attempts: int = 1
    ) -> None:
        self.endpoint = endpoint
        self.status = status
        self.attempts = attempts
        tried = f" (after {attempts} attempts)" if attempts > 1 else ""
        super().__init__(
            f"the model endpoint {endpoint} {problem}{tried}. The run stops here; it is "
            "checkpointed, so resume it once the endpoint answers."
        )


class ModelReply(FrozenModel):
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()


class Provider(Protocol):
    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[dict[str, JsonValue]],
    ) -> ModelReply: ...
