"""A declared agent made real: the provider, tools and prices an ``AgentSpec`` describes.

``DeclaredAgent.build`` lists the MCP servers' tools, makes the HTTP tools, and builds the
provider, all over one connection pool; its ``definition`` pins the revision — a digest that
takes in the discovered tool schemas and dispositions as well as the spec, so a server that
changes its tools changes the revision, and a run checkpointed under the old one is refused on
resume (``RevisionMismatchError``) rather than carried on by a different agent. ``refresh`` lists
again and gives the definition as it now is.

Secrets are referenced by the spec and read by the ``SecretResolver`` the caller supplies, at
each request that needs one: the kit's own are ``MappingSecrets`` and ``EnvironmentSecrets``;
the operator brings one that reads Kubernetes Secrets. Every value read is remembered in the
agent's ``SecretValues`` (``Remembering``), which its runs mask by value (``registered``). They
are all read once as the agent is built, before any run of it writes anything: a run resumed in
a fresh process masks a value the model echoes at its first reply, before any request of its own
read it. One that cannot be read then is read, and remembered, at the request that needs it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import JsonValue

from agentrun._redaction import SecretValues
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._connections import Connections
from agentrun.runner._http_tool import http_tool
from agentrun.runner._mcp_tools import DiscoveredTool, McpServer
from agentrun.runner._pricing import PriceTable
from agentrun.runner._providers.anthropic import AnthropicMessagesProvider
from agentrun.runner._providers.base import Provider
from agentrun.runner._providers.openai import OpenAIChatProvider
from agentrun.runner._registry import RegisteredAgent
from agentrun.runner._secrets import (
    Remembering,
    Revealed,
    SecretResolver,
    SecretUnavailableError,
)
from agentrun.runner._spec import AgentSpec, ModelSpec
from agentrun.runner._tools import Tool


def _provider(
    model: ModelSpec, connections: Connections, secrets: SecretResolver | None
) -> Provider:
    kind = AnthropicMessagesProvider if model.provider == "anthropic" else OpenAIChatProvider
    return kind(
        model.base_url,
        api_key=model.api_key,
        secrets=secrets,
        settings=model,
        http_client=connections.client(),
    )


def _settings(model: ModelSpec) -> dict[str, JsonValue]:
    """What of the model's spec shapes replies (not timeouts, retries or the key)."""
    return {
        "provider": model.provider,
        "base_url": model.base_url,
        "temperature": model.temperature,
        "max_tokens": model.max_tokens,
    }


async def _define(
    name: str, spec: AgentSpec, servers: tuple[McpServer, ...], http_tools: tuple[Tool, ...]
) -> AgentDefinition:
    listed: list[Tool] = []
    for server in servers:
        listed.extend(await server.discover())
    return AgentDefinition(
        name=name,
        instructions=spec.instructions,
        model=spec.model.name,
        tools=(*listed, *http_tools),
        max_iterations=spec.max_iterations,
        settings=_settings(spec.model),
    )


async def _read_ahead(spec: AgentSpec, secrets: SecretResolver | None) -> None:
    """Read every secret ``spec`` references, so that each is remembered before a run writes
    anything; one that cannot be read now is read at its request (and fails that)."""
    revealed = Revealed(secrets)
    for reference in spec.secret_references():
        try:
            await revealed.reveal(reference)
        except SecretUnavailableError:
            continue


@dataclass
class DeclaredAgent:
    name: str
    spec: AgentSpec
    definition: AgentDefinition
    provider: Provider
    prices: PriceTable
    servers: tuple[McpServer, ...]
    http_tools: tuple[Tool, ...]
    connections: Connections
    secret_values: SecretValues

    @classmethod
    async def build(
        cls,
        name: str,
        spec: AgentSpec,
        *,
        secrets: SecretResolver | None = None,
        connections: Connections | None = None,
        read_ahead: bool = True,
    ) -> DeclaredAgent:
        """List every MCP server and make the agent; ``ConfigurationError`` names what does not
        fit (a server that refuses the listing, a tool the allow-list names that it does not
        list, two tools of one name), ``ToolServerUnavailableError`` a server that could not be
        reached (retryable: the spec is fine). ``read_ahead=False`` reads no secret the listing
        does not need, for an agent no run will use (the operator's probe of an ``Agent``,
        which would otherwise read every Secret it names again at every probe)."""
        pool = connections or Connections()
        values = SecretValues()
        secrets = None if secrets is None else Remembering(secrets, values)
        try:
            if read_ahead:
                await _read_ahead(spec, secrets)
            servers = tuple(
                McpServer(server, connections=pool, secrets=secrets) for server in spec.tools.mcp
            )
            http_tools = tuple(
                http_tool(tool, connections=pool, secrets=secrets) for tool in spec.tools.http
            )
            definition = await _define(name, spec, servers, http_tools)
        except BaseException:
            if connections is None:
                await pool.aclose()
            raise
        return cls(
            name=name,
            spec=spec,
            definition=definition,
            provider=_provider(spec.model, pool, secrets),
            prices=PriceTable(prices={spec.model.name: spec.model.price}),
            servers=servers,
            http_tools=http_tools,
            connections=pool,
            secret_values=values,
        )

    async def refresh(self) -> AgentDefinition:
        """List every MCP server again; the definition as it now is (its revision changes when
        what was listed did)."""
        self.definition = await _define(self.name, self.spec, self.servers, self.http_tools)
        return self.definition

    @property
    def discovered(self) -> tuple[DiscoveredTool, ...]:
        """The MCP tools as listed, with what the agent makes of each."""
        return tuple(found for server in self.servers for found in server.discovered)

    def registered(self) -> RegisteredAgent:
        """The agent as the CLI and the operator run one (``AgentRunner.on_backend``)."""
        provider = self.provider
        return RegisteredAgent(
            definition=self.definition,
            provider=lambda: provider,
            prices=self.prices,
            secrets=self.secret_values,
        )

    async def aclose(self) -> None:
        await self.connections.aclose()
