"""An OpenAI-compatible chat-completions provider, on the official SDK's ``AsyncOpenAI``.

Speaks ``/v1/chat/completions``, which OpenAI and most self-hosted servers and gateways (vLLM,
llama.cpp, Ollama's compatible endpoint) accept. Transport, pooling, timeouts and retries are
the SDK's (see ``_providers.sdk``); this module maps the kit's messages to the wire format and the
reply back, tool-call ids exactly as the endpoint sent them.

The request is sent with the SDK's public ``post`` rather than ``chat.completions.create`` on a
``with_options(api_key=)`` copy (``SdkProvider``): together the typed-dict transform and the copy
were a sixth of what a replica spent on model calls under ``bench.agent_scale``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import openai
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall
from pydantic import JsonValue

from agentrun._messages import Message, ToolCall, Usage
from agentrun.runner._providers import sdk
from agentrun.runner._providers.base import ModelReply

OPENAI_URL = "https://api.openai.com/v1"


def _wire_message(message: Message) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": message.role, "content": message.text}
    if message.tool_calls:
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id is not None:
        wire["tool_call_id"] = message.tool_call_id
    return wire


def _reply(completion: ChatCompletion) -> ModelReply:
    """The reply in ``completion``. A call without an id (some servers send none, or an empty
    one) gets its place in the reply as one, as servers that number calls per reply do; the
    runner makes every call id of a run unique, so such ids repeating across turns is harmless."""
    message = completion.choices[0].message
    calls = []
    for index, raw in enumerate(message.tool_calls or ()):
        if not isinstance(raw, ChatCompletionMessageFunctionToolCall):
            raise ValueError(f"tool call {raw.id!r} is of type {raw.type!r}, not a function call")
        arguments = json.loads(raw.function.arguments or "{}")
        if not isinstance(arguments, dict):
            raise ValueError(f"the arguments of tool call {raw.id!r} are not a JSON object")
        calls.append(
            ToolCall(id=raw.id or f"call_{index}", name=raw.function.name, arguments=arguments)
        )
    usage = completion.usage
    return ModelReply(
        text=message.content or "",
        tool_calls=tuple(calls),
        usage=Usage(
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
        ),
    )


class _KeyedOpenAI(sdk.KeyedByRequest, AsyncOpenAI):
    """``AsyncOpenAI`` sending the key of the request in progress (``sdk.KeyedByRequest``)."""


class OpenAIChatProvider(sdk.SdkProvider[AsyncOpenAI]):
    """Chat completions through ``AsyncOpenAI``; see the module's notes."""

    default_url = OPENAI_URL
    path = "/chat/completions"
    failures = sdk.Failures(
        openai.APIStatusError, openai.APIConnectionError, openai.APIResponseValidationError
    )

    def connect(self, **options: Any) -> AsyncOpenAI:
        return _KeyedOpenAI(**options)

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[dict[str, JsonValue]],
    ) -> ModelReply:
        request: dict[str, Any] = {
            "model": model,
            "messages": [_wire_message(m) for m in messages],
        }
        if tools:
            request["tools"] = [{"type": "function", "function": schema} for schema in tools]
        if self.settings.temperature is not None:
            request["temperature"] = self.settings.temperature
        if self.settings.max_tokens is not None:
            request["max_tokens"] = self.settings.max_tokens
        return await self.ask(request, ChatCompletion, _reply)
