"""Tools from an MCP server over streamable HTTP, with the official ``mcp`` SDK's client.

**Listing.** ``McpServer.discover`` lists the server's tools — at start, and again whenever the
caller asks (the listing is part of an agent's revision, so an operator lists again to see
whether it changed). Only the tools named in ``allowedTools`` are kept, and naming one the server
does not list is refused: an allow-list that silently shrinks is a spec nobody can trust. A
listing that fails says which of two things happened: the server could not be reached or was
briefly unwell (refused, reset or dropped connections, timeouts, a 429 or 5xx) —
``ToolServerUnavailableError``, retryable, since a restarting server answers again with nothing
changed — or it answered in a way no retry changes (401/403, a path that is not an MCP endpoint,
a URL that is not HTTP, a protocol it does not speak, a destination the egress policy refuses):
``ConfigurationError``, naming the fix.

**Dispositions** come from the tool's annotations, which are the server's claims (MCP calls them
hints): ``readOnlyHint`` makes a tool read-only — unless ``destructiveHint`` is also true, a
contradiction that gets the cautious reading — and ``idempotentHint`` makes it idempotent. A tool
that declares neither, or declares nothing at all, is side-effecting and keyless: a crash in its
call is reported indeterminate, never guessed at. The spec's per-tool override has the last word,
and is where key arguments are named.

**Calls.** Each call opens its own session on the shared connection pool, sends ``tools/call``
with the model's arguments (plus any the spec fixes) and the call's idempotency key in the
request's ``_meta`` (``dev.agentrun/idempotency-key``), and closes it. A session per call means
no session state that can go stale between calls — a server restart or its idle timeout would
otherwise fail the next call after it was handed over, making a destructive call indeterminate
that was never sent. What the outcomes mean:

* a result with ``isError`` is the tool answering that it failed, and a JSON-RPC error saying the
  server did not run the call (unknown tool, invalid arguments) is the server refusing it: both
  are ``ToolError``, told to the model;
* a session that cannot be opened means ``tools/call`` was never sent: ``ToolError`` too (the
  call was not made, and the model is told so);
* so does a ``tools/call`` whose connection could not be made (``Unsent``): the server may have
  gone down between opening the session and the call; and so does a connection the egress
  policy refused (``agentrun.runner._egress``), which is refused before it is tried;
* anything else that goes wrong once ``tools/call`` is on its way is ``ToolTransportError``:
  nobody knows whether the tool acted, so the loop leaves a side-effecting call indeterminate.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import httpx2
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import (
    CONNECTION_CLOSED,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    REQUEST_TIMEOUT,
    CallToolResult,
    RequestParamsMeta,
    TextContent,
)
from mcp.types import Tool as McpTool
from pydantic import JsonValue

from agentrun._errors import AgentRunError, ConfigurationError
from agentrun._outcomes import Outcome
from agentrun.runner._connections import Connections
from agentrun.runner._egress import refusal_in
from agentrun.runner._http_tool import http_probe
from agentrun.runner._json_arguments import JsonSchemaArguments
from agentrun.runner._secrets import MaybeSecret, Revealed, SecretResolver, SecretUnavailableError
from agentrun.runner._settlement import (
    Answer,
    MissingPlaceholderError,
    Probe,
    Replay,
    SettleSpec,
    Unknown,
    fill,
)
from agentrun.runner._spec import McpServerSpec, ToolOverride
from agentrun.runner._tools import Disposition, Tool, ToolError, ToolTransportError

logger = logging.getLogger(__name__)

IDEMPOTENCY_META = "dev.agentrun/idempotency-key"
"""The ``_meta`` entry a ``tools/call`` carries the call's idempotency key in."""


class ToolServerUnavailableError(AgentRunError):
    """An MCP server could not be reached to list its tools, or was briefly unwell (a timeout,
    a connection refused or dropped, a 429 or 5xx): nothing is wrong with the spec, and the
    agent can be made once the server answers. Retryable: a tool server restarting, or not up
    yet, is what this usually is."""

    outcome = Outcome.AGENT_NOT_READY

    def __init__(self, server: str, url: str, said: str) -> None:
        self.server = server
        self.url = url
        super().__init__(
            f"MCP server {server!r} at {url} could not be reached to list its tools ({said}); "
            "the agent is made once it answers"
        )


UNWELL = (429, *range(500, 600))
"""HTTP statuses by which a server (or a gateway before it) says it is briefly unable to
answer, not that the request is wrong: a listing that met one may succeed unchanged."""

UNREACHED = (httpx2.NetworkError, httpx2.TimeoutException, httpx2.RemoteProtocolError)
"""What the shared transport raises when no answer came (``_connections._MEANING``): refused,
reset or dropped connections and timeouts. ``UnsupportedProtocol`` and a bare
``TransportError`` (a URL aiohttp cannot use) are the URL's fault, not the network's."""


def _unreachable(error: BaseException, statuses: Sequence[int]) -> bool:
    """Whether a listing failed because the server was away or unwell, not because of what
    the spec says (see ``UNWELL`` and ``UNREACHED``). The SDK turns an HTTP error status into
    a JSON-RPC error that no longer says which, so the statuses the server answered with are
    what tells a 503 from a 401."""
    if any(status in UNWELL for status in statuses):
        return True
    inner = _innermost(error)
    if isinstance(inner, MCPError):
        return inner.code in (REQUEST_TIMEOUT, CONNECTION_CLOSED)
    return isinstance(inner, UNREACHED)


@dataclass(frozen=True)
class DiscoveredTool:
    """One tool as listed, and what the agent makes of it (for a status, and for people)."""

    server: str
    name: str
    disposition: Disposition
    destructive: bool
    """MCP's ``destructiveHint`` (true when unsaid, unless the tool is read-only)."""
    overridden: bool
    key_arguments: tuple[str, ...]
    requires_approval: bool


def disposition_of(tool: McpTool) -> tuple[Disposition, bool]:
    """What the annotations claim: the disposition, and whether the tool is destructive."""
    hints = tool.annotations
    read_only = bool(hints and hints.read_only_hint)
    destructive_said = hints.destructive_hint if hints else None
    destructive = (not read_only) if destructive_said is None else destructive_said
    if read_only and not destructive:
        return Disposition.READ_ONLY, False
    if hints is not None and hints.idempotent_hint:
        return Disposition.IDEMPOTENT, destructive
    return Disposition.SIDE_EFFECTING, destructive


def _text(result: CallToolResult) -> str:
    """The result as the model is shown it: its content blocks (MCP has a tool that returns
    structured content send it as text too), or the structured content when that is all."""
    if not result.content and result.structured_content is not None:
        return json.dumps(result.structured_content, sort_keys=True)
    return "\n".join(
        block.text if isinstance(block, TextContent) else f"[{block.type} content]"
        for block in result.content
    )


REFUSALS = frozenset({INVALID_PARAMS, METHOD_NOT_FOUND})
"""JSON-RPC errors by which a server says it did not run the call (unknown tool, arguments that
do not fit); any other error leaves open whether it did."""


def _innermost(error: BaseException) -> BaseException:
    """The error inside the exception groups the SDK's task groups wrap it in."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def _refusal(error: BaseException) -> str | None:
    inner = _innermost(error)
    return inner.message if isinstance(inner, MCPError) and inner.code in REFUSALS else None


def _answered(statuses: Sequence[int]) -> str:
    """The HTTP error status a listing met, said beside the SDK's words for it."""
    failed = [status for status in statuses if status >= 400]
    return f" (HTTP {failed[-1]})" if failed else ""


def _flattened(error: BaseException) -> str:
    inner = _innermost(error)
    return f"{type(inner).__name__}: {inner}"


@dataclass
class Unsent:
    """Tells, once a session failed, whether its ``tools/call`` certainly never left.

    It is shown every request the session's client hands to the transport (an ``httpx2``
    request hook). The call was not made when the session failed with ``httpx2.ConnectError``
    alone, raised for the one and only ``tools/call`` request handed over. That is certain
    because: the shared transport raises ``ConnectError`` only when aiohttp could not get a
    connection (refused, DNS, TLS handshake: ``ClientConnectorError``), which is before any byte
    of the request is written (a connection lost after that is ``RemoteProtocolError`` or
    ``ReadError``, a timeout is ``ConnectTimeout`` or ``ReadTimeout``: all left indeterminate);
    the error names its request, so a refused ``tools/list`` after the tool ran is not mistaken
    for it; and no other ``tools/call`` went out in the session, so no earlier attempt of the
    same call can have reached the server."""

    handed: list[httpx2.Request] = field(default_factory=list)

    async def hand(self, request: httpx2.Request) -> None:
        self.handed.append(request)

    def never_left(self, error: BaseException) -> bool:
        inner = _innermost(error)
        if not isinstance(inner, httpx2.ConnectError):
            return False
        try:
            refused = inner.request
        except RuntimeError:  # an error that names no request says nothing about this one
            return False
        calls = [request for request in self.handed if _jsonrpc_method(request) == "tools/call"]
        return len(calls) == 1 and refused is calls[0]


def _jsonrpc_method(request: httpx2.Request) -> object:
    try:
        sent = json.loads(request.content) if request.method == "POST" else None
    except (httpx2.RequestNotRead, ValueError):
        return None
    return sent.get("method") if isinstance(sent, dict) else None


class McpServer:
    def __init__(
        self,
        spec: McpServerSpec,
        *,
        connections: Connections,
        secrets: SecretResolver | None = None,
    ) -> None:
        self.spec = spec
        self.connections = connections
        self.secrets = secrets
        self.discovered: tuple[DiscoveredTool, ...] = ()

    def _client(
        self,
        headers: dict[str, str],
        revealed: Revealed,
        unsent: Unsent | None = None,
        statuses: list[int] | None = None,
    ) -> Client:
        """A client of the server; ``statuses`` gathers the HTTP status of every answer."""

        async def answered(response: httpx2.Response) -> None:
            # A 401/403 from the server or a gateway in front of it: a kept key is read afresh
            # next time, whatever the SDK makes of the status.
            revealed.refused(response.status_code)
            if statuses is not None:
                statuses.append(response.status_code)

        http = self.connections.client(
            headers=headers,
            timeout=self.spec.timeout_seconds,
            on_request=unsent.hand if unsent else None,
            on_response=answered,
        )
        return Client(
            streamable_http_client(self.spec.url, http_client=http),
            read_timeout_seconds=self.spec.timeout_seconds,
            cache=None,  # a listing is read afresh every time it is asked for
        )

    async def discover(self) -> tuple[Tool, ...]:
        """List the server's tools and make them the agent's tools (see the module's notes)."""
        revealed = Revealed(self.secrets)
        listed: list[McpTool] = []
        statuses: list[int] = []
        try:
            headers = await revealed.reveal_all(self.spec.headers)
            async with self._client(headers, revealed, statuses=statuses) as client:
                cursor: str | None = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    listed.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
        except SecretUnavailableError:
            raise
        except Exception as error:
            if (refused := refusal_in(error)) is not None:
                raise ConfigurationError(
                    f"MCP server {self.spec.name!r} at {self.spec.url}: {refused}"
                ) from error
            said = revealed.scrub(_flattened(error))
            if _unreachable(error, statuses):
                raise ToolServerUnavailableError(self.spec.name, self.spec.url, said) from error
            raise ConfigurationError(
                f"MCP server {self.spec.name!r} at {self.spec.url} could not be listed: "
                f"{said}{_answered(statuses)}; it answered, or its url cannot work: fix the url "
                "(scheme, host, the MCP endpoint's path) or the credentials its headers send"
            ) from error
        by_name = {tool.name: tool for tool in listed}
        wanted = self.spec.allowed_tools if self.spec.allowed_tools is not None else by_name
        missing = sorted((set(wanted) | set(self.spec.tools)) - set(by_name))
        if missing:
            raise ConfigurationError(
                f"MCP server {self.spec.name!r} does not list {missing} "
                f"(it lists: {', '.join(sorted(by_name)) or 'nothing'}); fix allowedTools or "
                "the tools overrides"
            )
        tools = [self._tool(by_name[name], self.spec.tools.get(name), by_name) for name in wanted]
        self.discovered = tuple(found for _, found in tools)
        return tuple(tool for tool, _ in tools)

    def _tool(
        self, listed: McpTool, override: ToolOverride | None, by_name: Mapping[str, McpTool]
    ) -> tuple[Tool, DiscoveredTool]:
        claimed, destructive = disposition_of(listed)
        chosen = override.disposition if override and override.disposition else claimed
        fixed = override.arguments if override else {}
        key_arguments = override.key_arguments if override and override.key_arguments else ()
        approval = bool(override and override.requires_approval)
        name = listed.name

        async def call(arguments: dict[str, Any], idempotency_key: str | None) -> str:
            return await self.call(name, arguments, key=idempotency_key, fixed=fixed)

        settle = None
        if override is not None and override.settle is not None:
            settle = self._settlement(listed, override.settle, by_name)

        tool = Tool(
            name=name,
            fn=call,
            description=listed.description or "",
            key_arguments=key_arguments,
            read_only=chosen is Disposition.READ_ONLY,
            idempotent=chosen is Disposition.IDEMPOTENT,
            requires_approval=approval,
            version=f"mcp:{self.spec.name}",
            settle=settle,
            declared=JsonSchemaArguments(name, listed.input_schema, fixed=fixed),
        )
        found = DiscoveredTool(
            server=self.spec.name,
            name=name,
            disposition=chosen,
            destructive=destructive,
            overridden=chosen is not claimed,
            key_arguments=key_arguments,
            requires_approval=approval,
        )
        return tool, found

    def _settlement(
        self, listed: McpTool, settle: SettleSpec, by_name: Mapping[str, McpTool]
    ) -> Replay | Probe:
        """What ``settle`` (a tool override's) declares, checked against the listing: the
        probe's placeholders name arguments the tool takes, and an MCP probe is a tool the
        server lists as read-only (a probe must not act)."""
        where = f"MCP server {self.spec.name!r}, tool {listed.name!r}"
        given = listed.input_schema.get("properties")
        try:
            settle.check_arguments(given if isinstance(given, dict) else ())
        except ValueError as error:
            raise ConfigurationError(f"{where}: {error}") from error
        sends = f"tools/call {listed.name} to MCP server {self.spec.name!r} with the same key"
        probe = settle.probe
        if probe is None:
            return settle.settlement(None, sends=sends)
        if probe.http is not None:
            client = self.connections.client(timeout=self.spec.timeout_seconds)
            return settle.settlement(http_probe(probe, client=client, secrets=self.secrets))
        asks = probe.mcp
        assert asks is not None
        lookup = by_name.get(asks.tool)
        override = self.spec.tools.get(asks.tool)
        said = override.disposition if override and override.disposition else None
        if lookup is None or (said or disposition_of(lookup)[0]) is not Disposition.READ_ONLY:
            raise ConfigurationError(
                f"{where}: settle.probe.mcp.tool {asks.tool!r} is not a tool the server lists as "
                "read-only (readOnlyHint, or a read_only disposition in tools); a probe must not "
                "act: name a read-only lookup tool of the same server"
            )

        async def ask(arguments: Mapping[str, JsonValue], key: str | None) -> Answer:
            try:
                sent = {name: fill(text, arguments, key) for name, text in asks.arguments.items()}
            except MissingPlaceholderError as error:
                return Unknown(str(error))
            asked = f"probed {asks.tool} on MCP server {self.spec.name!r} with {sent}"
            try:
                answer = await self.call(asks.tool, dict(sent), key=None)
            except (ToolError, ToolTransportError) as error:
                return Unknown(f"{asked}: {error}")
            return probe.judge(asked, None, answer)

        return settle.settlement(ask)

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        key: str | None,
        fixed: Mapping[str, MaybeSecret] | None = None,
    ) -> str:
        """Call ``name`` in a session of its own (see the module's notes for what fails how)."""
        revealed = Revealed(self.secrets)
        try:
            headers = await revealed.reveal_all(self.spec.headers)
            given = {**arguments, **await revealed.reveal_all(fixed or {})}
        except SecretUnavailableError as error:
            raise ToolError(f"the call was not made: {error}") from error
        # An open map on the wire; its TypedDict only names the keys MCP reserves.
        meta = cast(RequestParamsMeta, {IDEMPOTENCY_META: key}) if key is not None else None
        opened = False
        unsent = Unsent()
        result: CallToolResult | None = None
        try:
            async with self._client(headers, revealed, unsent) as client:
                opened = True
                result = await client.call_tool(name, given, meta=meta)
        except Exception as error:
            said = revealed.scrub(_flattened(error))
            if result is None and (refused := refusal_in(error)) is not None:
                # The policy refuses before any connection is tried: nothing was sent there.
                raise ToolError(
                    f"the call was not made: MCP server {self.spec.name!r}: {refused}"
                ) from error
            if result is not None:  # the answer came; only closing the session failed
                logger.warning("MCP server %s: closing a session failed: %s", self.spec.name, said)
            elif not opened or unsent.never_left(error):
                raise ToolError(
                    f"the call was not made: MCP server {self.spec.name!r} at {self.spec.url} "
                    f"could not be reached ({said})"
                ) from error
            elif (refusal := _refusal(error)) is not None:
                raise ToolError(
                    f"MCP server {self.spec.name!r} refused the call: {revealed.scrub(refusal)}"
                ) from error
            else:
                raise ToolTransportError(
                    f"{name} was sent to MCP server {self.spec.name!r} and no answer came back "
                    f"({said}); nobody knows whether it acted"
                ) from error
        assert result is not None
        text = revealed.scrub(_text(result))
        if result.is_error:
            raise ToolError(text)
        return text
