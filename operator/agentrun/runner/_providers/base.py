"""The provider contract the loop talks to, independent of any vendor's wire format."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pydantic import JsonValue

from agentrun._base import FrozenModel
from agentrun._errors import AgentRunError
from agentrun._messages import Message, ToolCall, Usage
from agentrun._outcomes import Outcome

BUSY = frozenset({408, 425, 429})
"""Statuses that say "not now" rather than "no": asking again later can succeed (as 5xx can)."""


class ProviderError(AgentRunError):
    """The model could not be asked, or refused: what is left once the provider's own retries
    are spent.

    A provider retries, with backoff and honouring ``Retry-After``, what a retry can fix (a rate
    limit, a 5xx, a dropped connection, a timeout: a model call has no side effect, so repeating
    it is safe). What reaches the loop ends this attempt at the run, and everything before this
    call is checkpointed, so carrying the run on later repeats no tool call. Its outcome says
    whether that can help: ``provider_unavailable`` when the endpoint was unreachable or busy
    (no status, 408, 425, 429, 5xx: the operator carries the run on after a pause), ``refused``
    when it said no or answered what nobody can read (a key, a model name, a request it rejects:
    the run fails with the endpoint's own message, since asking again unchanged cannot help), and
    when the egress policy refused the endpoint before it was asked (``refused``: it is the
    Agent's URL that must change).
    """

    def __init__(
        self,
        endpoint: str,
        problem: str,
        *,
        status: int | None = None,
        attempts: int = 1,
        unreadable: bool = False,
        refused: bool = False,
    ) -> None:
        self.endpoint = endpoint
        self.status = status
        self.attempts = attempts
        tried = f" (after {attempts} attempts)" if attempts > 1 else ""
        answerable = not (unreadable or refused)
        busy = answerable and (status is None or status in BUSY or status >= 500)
        self.outcome = Outcome.PROVIDER_UNAVAILABLE if busy else Outcome.REFUSED
        then = (
            "the run is checkpointed: resume it once the endpoint answers"
            if busy
            else "asking again unchanged will not help: fix the key, the model name or the request"
        )
        super().__init__(f"the model endpoint {endpoint} {problem}{tried}; {then}")


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
