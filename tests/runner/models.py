"""Providers of either kind, pointed at the fake model server (``testing.model_server``)."""

from __future__ import annotations

from typing import Any, Literal

from agentrun.runner._providers.anthropic import AnthropicMessagesProvider
from agentrun.runner._providers.openai import OpenAIChatProvider
from agentrun.runner._providers.sdk import REQUEST_KEY
from agentrun.runner._secrets import MaybeSecret, SecretResolver
from agentrun.runner._spec import RequestSettings
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


async def by_the_sdk_method(asked: Sdk, body: dict[str, Any], key: str) -> object:
    """``body`` sent the way the providers sent it before they used the SDK's ``post``: through
    the resource method (``chat.completions.create``, ``messages.create``) on a client copy
    with the key (``with_options(api_key=)``). What the providers send now must be the same.
    (The copy is of the provider's client class, whose ``Authorization`` is the request's key:
    set to the same key, so that the header is what the copy's ``api_key`` makes it.)"""
    given = REQUEST_KEY.set(key)
    try:
        if isinstance(asked, OpenAIChatProvider):
            openai = asked.client.with_options(api_key=key)
            return await openai.chat.completions.create(**body)
        return await asked.client.with_options(api_key=key).messages.create(**body)
    finally:
        REQUEST_KEY.reset(given)
