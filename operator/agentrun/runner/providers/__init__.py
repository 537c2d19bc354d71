"""Model providers: messages and tool schemas in; a reply, its tool calls and usage out."""

from agentrun.runner.providers.base import ModelReply, Provider, ProviderError
from agentrun.runner.providers.scripted import ScriptedProvider

__all__ = ["ModelReply", "Provider", "ProviderError", "ScriptedProvider"]
