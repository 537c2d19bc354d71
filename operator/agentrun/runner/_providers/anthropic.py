"""An Anthropic Messages provider, on the official SDK's ``AsyncAnthropic``.

Maps the kit's conversation to the Messages API's: system messages become the ``system``
parameter, a tool call is a ``tool_use`` block of the assistant's turn, and the results of one
turn's calls go back together as ``tool_result`` blocks of the next user turn. Transport, pooling,
timeouts and retries are the SDK's (see ``_providers.sdk``), and so is the request's span: the
request is posted with the span name and route ``messages.create`` gives its own, so a traced
call has the SDK's ``anthropic.messages.create`` span and sends its trace context as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anthropic
from anthropic import AsyncAnthropic
from anthropic.types import Message as AnthropicMessage
from anthropic.types import TextBlock, ToolUseBlock
from pydantic import JsonValue

from agentrun._messages import Message, ToolCall, Usage
from agentrun.runner._providers import sdk
from agentrun.runner._providers.base import ModelReply

ANTHROPIC_URL = "https://api.anthropic.com"
DEFAULT_MAX_TOKENS = 4096
"""The Messages API requires a cap on the reply's length; this one when the settings give none."""


def _is_results(message: dict[str, Any]) -> bool:
    return message["role"] == "user" and all(
        block["type"] == "tool_result" for block in message["content"]
    )


def _conversation(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    system = "\n\n".join(m.text for m in messages if m.role == "system")
    wire: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "tool":
            result = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id,
                "content": message.text,
            }
            if wire and _is_results(wire[-1]):
                wire[-1]["content"].append(result)
            else:
                wire.append({"role": "user", "content": [result]})
            continue
        content: list[dict[str, Any]] = (
            [{"type": "text", "text": message.text}] if message.text else []
        )
        content.extend(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
            for call in message.tool_calls
        )
        if content:  # the API refuses an empty turn; a reply of nothing said nothing
            wire.append({"role": message.role, "content": content})
    return system, wire


def _reply(answer: AnthropicMessage) -> ModelReply:
    text = "".join(block.text for block in answer.content if isinstance(block, TextBlock))
    calls = tuple(
        ToolCall(id=block.id, name=block.name, arguments=dict(block.input))
        for block in answer.content
        if isinstance(block, ToolUseBlock)
    )
    usage = answer.usage
    # Cached input is billed apart (reads cheaper, writes dearer); the kit's usage has one input
    # count, so it is counted there in full: a budget errs towards stopping early.
    cached = (usage.cache_creation_input_tokens or 0) + (usage.cache_read_input_tokens or 0)
    return ModelReply(
        text=text,
        tool_calls=calls,
        usage=Usage(input_tokens=usage.input_tokens + cached, output_tokens=usage.output_tokens),
    )


class _KeyedAnthropic(sdk.KeyedByRequest, AsyncAnthropic):
    """``AsyncAnthropic`` sending the key of the request in progress (``sdk.KeyedByRequest``)."""


class AnthropicMessagesProvider(sdk.SdkProvider[AsyncAnthropic]):
    """The Messages API through ``AsyncAnthropic``; see the module's notes."""

    default_url = ANTHROPIC_URL
    path = "/v1/messages"
    failures = sdk.Failures(
        anthropic.APIStatusError, anthropic.APIConnectionError, anthropic.APIResponseValidationError
    )
    traced = {"span_name": "anthropic.messages.create", "span_route": "/v1/messages"}

    def connect(self, **options: Any) -> AsyncAnthropic:
        return _KeyedAnthropic(**options)

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[dict[str, JsonValue]],
    ) -> ModelReply:
        system, conversation = _conversation(messages)
        request: dict[str, Any] = {
            "model": model,
            "messages": conversation,
            "max_tokens": self.settings.max_tokens or DEFAULT_MAX_TOKENS,
        }
        if system:
            request["system"] = system
        if tools:
            request["tools"] = [
                {
                    "name": schema["name"],
                    "description": schema.get("description", ""),
                    "input_schema": schema["parameters"],
                }
                for schema in tools
            ]
        if self.settings.temperature is not None:
            request["temperature"] = self.settings.temperature
        return await self.ask(request, AnthropicMessage, _reply)
