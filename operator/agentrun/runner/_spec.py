"""A declared agent: its model endpoint, MCP servers and HTTP tools, written as data.

What a person writes (or an ``Agent`` resource carries) to get an agent without writing Python:
``DeclaredAgent.build`` (``agentrun.runner._declared``) turns it into the definition, provider and
prices a runner uses. Keys, tokens and passwords are never written here: a value that is secret
is a ``SecretReference``, read at each request by the resolver the caller supplies.

Every model reads camelCase (as a Kubernetes resource is written) and snake_case; a mistake is
refused with the field's path and what would fit.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import Field, JsonValue, field_validator, model_validator

from agentrun._base import SpecModel
from agentrun.runner._pricing import ModelPrice
from agentrun.runner._request_fields import URL, Headers, placeholders
from agentrun.runner._secrets import MaybeSecret, SecretReference
from agentrun.runner._settlement import SettleSpec
from agentrun.runner._tools import Disposition

# The bounds the Agent CRD (crds/agents.agentrun.dev.yaml) states, so that an agent declared in a
# file is held to what a declared resource is, and the operator refuses, naming the field, what
# an older CRD let through.
ToolName = Annotated[str, Field(min_length=1, max_length=128)]
KeyArguments = Annotated[tuple[Annotated[str, Field(max_length=128)], ...], Field(max_length=32)]
ArgumentValue = Annotated[str, Field(max_length=8192)]
Arguments = Annotated[dict[str, ArgumentValue | SecretReference], Field(max_length=64)]
PARAMETERS_DEPTH = 32
"""How deep an HTTP tool's JSON schema may nest: far beyond any real schema, and shallow enough
that no later walk of it (validation, a digest, a request to the model) runs out of stack."""
PARAMETERS_SIZE = 65536
"""How long an HTTP tool's JSON schema may be, as JSON."""


class RequestSettings(SpecModel):
    """How each model request is made: how long one attempt may take, how often a retryable
    failure (429, 5xx, a dropped connection, a timeout) is tried again, and the sampling
    settings sent with it."""

    timeout_seconds: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=2, ge=0, le=10)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, gt=0)


class ModelSpec(RequestSettings):
    """The model endpoint: ``openai`` is any OpenAI-compatible chat-completions server (vLLM,
    llama.cpp, Ollama, most gateways); ``anthropic`` is the Anthropic Messages API."""

    provider: Literal["openai", "anthropic"]
    name: str = Field(min_length=1, max_length=253)
    base_url: URL | None = Field(default=None, alias="baseURL")
    api_key: SecretReference | None = None
    price: ModelPrice
    """What a million tokens cost (0 for a model that costs nothing): every call is charged, and a
    budget can only stop a run whose calls have a price."""


class ToolOverride(SpecModel):
    """What the spec says about one tool, over what its server declares."""

    disposition: Disposition | None = None
    key_arguments: KeyArguments | None = None
    requires_approval: bool = False
    arguments: Arguments = Field(default_factory=dict)
    """Arguments the tool is always called with, hidden from the model (a secret among them is
    read at each call)."""
    settle: SettleSpec | None = None
    """How a machine may settle a call a crash left undecided (its probe's placeholders are
    checked against the tool's arguments once the server lists it)."""

    @model_validator(mode="after")
    def _settles_as_it_can(self) -> ToolOverride:
        if self.settle is not None:
            self.settle.check(kind="mcp", keyed=bool(self.key_arguments), fixed=self.arguments)
        return self


class McpServerSpec(SpecModel):
    """An MCP server reached over streamable HTTP."""

    name: str = Field(min_length=1, max_length=63)
    url: URL
    headers: Headers = Field(default_factory=dict)
    allowed_tools: Annotated[tuple[ToolName, ...], Field(max_length=128)] | None = None
    """The tools the agent may use; None: every tool the server lists."""
    tools: Annotated[dict[ToolName, ToolOverride], Field(max_length=128)] = Field(
        default_factory=dict
    )
    timeout_seconds: float = Field(default=30.0, gt=0)

    @model_validator(mode="after")
    def _overrides_are_allowed(self) -> McpServerSpec:
        if self.allowed_tools is not None:
            outside = sorted(set(self.tools) - set(self.allowed_tools))
            if outside:
                raise ValueError(
                    f"tools overrides {outside} name tools outside allowedTools "
                    f"{list(self.allowed_tools)}; add them to allowedTools or drop the overrides"
                )
        return self


HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
QUERY_METHODS = ("GET", "DELETE")
"""Methods whose arguments travel in the query string; every other sends them as a JSON body."""


def nesting(value: JsonValue) -> int:
    """How many lists and objects deep ``value`` goes, walked without recursion so that a value
    too deep for the stack is measured rather than fatal."""
    deepest = 0
    todo: list[tuple[JsonValue, int]] = [(value, 0)]
    while todo:
        each, depth = todo.pop()
        if isinstance(each, dict | list):
            deepest = max(deepest, depth + 1)
            todo.extend(
                (inner, depth + 1) for inner in (each.values() if isinstance(each, dict) else each)
            )
    return deepest


def _no_arguments() -> dict[str, JsonValue]:
    return {"type": "object", "properties": {}}


class HttpToolSpec(SpecModel):
    """A tool that is one HTTP request: ``url`` may hold ``{argument}`` placeholders, the other
    arguments go in the query (GET, DELETE) or as a JSON body."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str = Field(default="", max_length=8192)
    method: HttpMethod = "POST"
    url: URL
    parameters: Annotated[dict[str, JsonValue], Field(max_length=64)] = Field(
        default_factory=_no_arguments
    )
    """The JSON schema of the arguments the model gives."""
    key_arguments: KeyArguments = ()
    disposition: Disposition = Disposition.SIDE_EFFECTING
    requires_approval: bool = False
    headers: Headers = Field(default_factory=dict)
    arguments: Arguments = Field(default_factory=dict)
    """Arguments the tool is always called with, hidden from the model."""
    timeout_seconds: float = Field(default=30.0, gt=0)
    settle: SettleSpec | None = None
    """How a machine may settle a call a crash left undecided."""

    @field_validator("parameters")
    @classmethod
    def _parameters_are_bounded(cls, schema: dict[str, JsonValue]) -> dict[str, JsonValue]:
        if nesting(schema) > PARAMETERS_DEPTH:
            raise ValueError(f"nests deeper than {PARAMETERS_DEPTH} levels")
        if len(json.dumps(schema)) > PARAMETERS_SIZE:
            raise ValueError(f"is longer than {PARAMETERS_SIZE} characters as JSON")
        return schema

    @model_validator(mode="after")
    def _secrets_stay_out_of_urls(self) -> HttpToolSpec:
        secret = sorted(n for n, v in self.arguments.items() if isinstance(v, SecretReference))
        in_url = sorted(set(secret) & set(placeholders(self.url)))
        if in_url:
            raise ValueError(
                f"arguments {in_url} are secrets and would be written into the URL, which "
                "clients, proxies and servers log; send them in a header instead"
            )
        if secret and self.method in QUERY_METHODS:
            raise ValueError(
                f"arguments {secret} are secrets and {self.method} sends arguments in the query "
                "string, which clients, proxies and servers log; send them in a header instead"
            )
        return self

    @model_validator(mode="after")
    def _settles_as_it_can(self) -> HttpToolSpec:
        if self.settle is not None:
            self.settle.check(kind="http", keyed=bool(self.key_arguments), fixed=self.arguments)
            given = self.parameters.get("properties")
            self.settle.check_arguments(given if isinstance(given, dict) else ())
        return self


class ToolsSpec(SpecModel):
    mcp: Annotated[tuple[McpServerSpec, ...], Field(max_length=32)] = ()
    http: Annotated[tuple[HttpToolSpec, ...], Field(max_length=64)] = ()

    @field_validator("mcp")
    @classmethod
    def _servers_named_once(cls, servers: tuple[McpServerSpec, ...]) -> tuple[McpServerSpec, ...]:
        names = [server.name for server in servers]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"MCP servers {twice} are named twice; give each its own name")
        return servers


def _probe_headers(settle: SettleSpec | None) -> tuple[MaybeSecret, ...]:
    probe = settle.probe if settle is not None else None
    return () if probe is None or probe.http is None else tuple(probe.http.headers.values())


class AgentSpec(SpecModel):
    model: ModelSpec
    instructions: str = Field(max_length=65536)
    max_iterations: int = Field(default=25, ge=1)
    tools: ToolsSpec = Field(default_factory=ToolsSpec)

    def secret_references(self) -> tuple[SecretReference, ...]:
        """Every secret the agent's requests read: the model's key, MCP servers' headers and
        fixed arguments, HTTP tools' headers and fixed arguments, and the headers of every
        settlement's HTTP probe."""
        written: list[MaybeSecret] = [] if self.model.api_key is None else [self.model.api_key]
        for server in self.tools.mcp:
            written.extend(server.headers.values())
            for override in server.tools.values():
                written.extend((*override.arguments.values(), *_probe_headers(override.settle)))
        for tool in self.tools.http:
            written.extend((*tool.headers.values(), *tool.arguments.values()))
            written.extend(_probe_headers(tool.settle))
        return tuple(value for value in written if isinstance(value, SecretReference))
