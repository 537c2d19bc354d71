"""Model providers: messages and tool schemas in; a reply, its tool calls and usage out."""

from agentrun.runner._providers.base import ModelReply, Provider, ProviderError
from agentrun.runner._providers.scripted import ScriptedProvider

__all__ = ["ModelReply", "Provider", "ProviderError", "ScriptedProvider"]
