"""A deterministic provider whose replies are data, for tests and the demo.

It keeps no state of its own: the reply is chosen by how many times the model has already
answered in the conversation it is shown. That is what makes it usable across a crash — a
resumed process, shown the restored conversation, gets exactly the reply the dead one would have
got next, and a resume from ``after_model_call`` (which does not repeat the model call) never
asks for a reply twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import JsonValue

from agentrun._errors import ConfigurationError
from agentrun._messages import Message, ToolCall, Usage
from agentrun.runner._providers.base import ModelReply


class ScriptedProvider:
    """A ``Provider`` that plays back a fixed list of replies: the demo's model, and the tests'."""

    def __init__(self, script: Sequence[ModelReply | Mapping[str, JsonValue]]) -> None:
        if not script:
            raise ConfigurationError("a scripted provider needs at least one reply in its script")
        self.script = tuple(self._reply(turn, step) for turn, step in enumerate(script))
        self.calls = 0

    @staticmethod
    def _reply(turn: int, step: ModelReply | Mapping[str, JsonValue]) -> ModelReply:
        if isinstance(step, ModelReply):
            return step
        raw_calls = step.get("tool_calls") or []
        assert isinstance(raw_calls, list)
        calls = []
        for index, raw in enumerate(raw_calls):
            assert isinstance(raw, dict)
            arguments = raw.get("arguments") or {}
            assert isinstance(arguments, dict)
            calls.append(
                ToolCall(
                    id=str(raw.get("id") or f"call_{turn}_{index}"),
                    name=str(raw["name"]),
                    arguments=arguments,
                )
            )
        usage = step.get("usage") or {}
        return ModelReply(
            text=str(step.get("text", "")),
            tool_calls=tuple(calls),
            usage=Usage.model_validate(usage),
        )

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[dict[str, JsonValue]],
    ) -> ModelReply:
        self.calls += 1
        turn = sum(1 for message in messages if message.role == "assistant")
        if turn >= len(self.script):
            return ModelReply(text="(the script has no more replies)")
        return self.script[turn]
