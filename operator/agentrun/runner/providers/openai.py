"""An OpenAI-compatible chat-completions provider over plain HTTP.

Speaks the ``/v1/chat/completions`` wire format that OpenAI and most self-hosted servers (vLLM,
llama.cpp, Ollama's compatible endpoint) accept. It uses the standard library's HTTP client in a
worker thread, so the kit needs no HTTP dependency of its own.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from pydantic import JsonValue

from agentrun.messages import Message, ToolCall, Usage
from agentrun.runner.providers.base import ModelReply, ProviderError


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


def _reply(body: dict[str, Any]) -> ModelReply:
    """The reply in ``body``. A call without an id (some servers send none, or an empty one)
    gets its place in the reply as one, as servers that number calls per reply do; the runner
    makes every call id of a run unique, so such ids repeating across turns is harmless."""
    message = body["choices"][0]["message"]
    calls = tuple(
        ToolCall(
            id=raw.get("id") or f"call_{index}",
            name=raw["function"]["name"],
            arguments=json.loads(raw["function"].get("arguments") or "{}"),
        )
        for index, raw in enumerate(message.get("tool_calls") or ())
    )
    usage = body.get("usage") or {}
    return ModelReply(
        text=message.get("content") or "",
        tool_calls=calls,
        usage=Usage(
            input_tokens=usage.get("prompt_tokens", 0),
            output_tokens=usage.get("completion_tokens", 0),
        ),
    )


class OpenAIChatProvider:
    def __init__(self, base_url: str, *, api_key: str | None = None, timeout: float = 60.0) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.timeout = timeout

    def _post(self, payload: bytes) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=payload, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body: dict[str, Any] = json.load(response)
                return body
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:500].decode(errors="replace")
            raise ProviderError(f"{self.url} answered {exc.code}: {detail}") from exc
        except (urllib.error.URLError, TimeoutError, ValueError) as exc:
            raise ProviderError(f"{self.url} could not be asked: {exc}") from exc

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[dict[str, JsonValue]],
    ) -> ModelReply:
        payload: dict[str, Any] = {"model": model, "messages": [_wire_message(m) for m in messages]}
        if tools:
            payload["tools"] = [{"type": "function", "function": schema} for schema in tools]
        body = await asyncio.to_thread(self._post, json.dumps(payload).encode())
        try:
            return _reply(body)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ProviderError(
                f"{self.url} sent a reply this provider cannot read: {exc}"
            ) from exc
