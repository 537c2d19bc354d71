"""Providers of either kind, pointed at the fake model server (``testing.model_server``)."""

from __future__ import annotations

from typing import Literal

from agentrun.runner.providers.anthropic import AnthropicMessagesProvider
from agentrun.runner.providers.openai import OpenAIChatProvider
from agentrun.runner.secrets import MaybeSecret, SecretResolver
from agentrun.runner.spec import RequestSettings
from agentrun.testing.model_server import ModelServer

Kind = Literal["openai", "anthropic"]
Sdk = OpenAIChatProvider | AnthropicMessagesProvider


def provider(
    kind: Kind,
    server: ModelServer,
    *,
    api_key: MaybeSecret | None = "sk-test-key",
    secrets: SecretResolver | None = None,
    **settings: float | int,
) -> Sdk:
    chosen = RequestSettings.model_validate(settings)
    if kind == "openai":
        return OpenAIChatProvider(
            server.openai_url, api_key=api_key, secrets=secrets, settings=chosen
        )
    return AnthropicMessagesProvider(
        server.anthropic_url, api_key=api_key, secrets=secrets, settings=chosen
    )


def path(kind: Kind) -> str:
    """The path each kind posts to."""
    return "/v1/chat/completions" if kind == "openai" else "/v1/messages"
