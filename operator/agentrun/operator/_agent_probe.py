"""What an ``Agent``'s status says: each endpoint probed, the tools discovered, the revision.

Every replica ticks a kopf timer per Agent; a tick probes when the spec changed since the last
probe (``observedGeneration``) or the last probe is older than ``PROBE_EVERY``, and otherwise
does nothing. A probe asks:

* the model endpoint for its model list (``GET /models``) with the key read from its Secret (one
  annotated for this Agent: ``kube_secrets``; nothing is sent when it is not usable): an
  answer of any kind means it is reachable, 401 or 403 that the key was refused — no completion
  is asked for, so a probe costs nothing;
* each MCP server for its tools, as a run would list them (``allowedTools``, overrides);
* then, when every server answered, builds the agent as a run would, for the revision new runs
  pin and the tools with their dispositions.

Every connection goes through the pool's egress policy (``agentrun.runner._egress``), a redirect
the model endpoint answers with included (the probe follows it, to say where it leads); the URLs
of HTTP tools, which nothing connects to before a run calls them, are checked against it without
connecting. A destination the policy refuses is ``EgressRefused``, naming the spec's field: it
was refused before any connection, so the status says nothing of whether anything listens there.

``Ready`` is True only when all of that worked; otherwise its reason names the first thing to fix
(``READY_REASONS`` in that order). Nothing a probe writes comes from a Secret or a tool's output:
a failure is said with its type and the endpoint's words, scrubbed of the values the request used.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import httpx2
from pydantic.alias_generators import to_camel

from agentrun._errors import ConfigurationError
from agentrun.operator._agent_resolver import AgentNotReadyError, agent_spec
from agentrun.operator._agent_resource import (
    READY,
    AgentResourceSpec,
    AgentStatus,
    EndpointStatus,
    ToolStatus,
)
from agentrun.operator._conditions import set_condition
from agentrun.operator._kube_secrets import KubeSecrets, SecretCache
from agentrun.operator._kubeapi import KubeApi
from agentrun.runner._connections import Connections
from agentrun.runner._declared import DeclaredAgent
from agentrun.runner._egress import EgressRefused, fixed_host, refusal_in
from agentrun.runner._mcp_tools import McpServer, ToolServerUnavailableError
from agentrun.runner._secrets import Revealed, SecretResolver, SecretUnavailableError
from agentrun.runner._spec import ModelSpec
from agentrun.runner._tools import Disposition

PROBE_EVERY = 30.0
"""Seconds between probes of an Agent whose spec did not change."""
TICK = 2.0
"""Seconds between the timer's ticks: how soon an edited Agent is probed."""
PROBE_TIMEOUT = 10.0

VENDOR_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
CLEARED: dict[str, None] = {to_camel(field): None for field in AgentStatus.model_fields}
READY_REASONS = (
    "InvalidSpec",
    "EgressRefused",
    "SecretUnavailable",
    "ModelUnreachable",
    "KeyRefused",
    "ToolServerUnreachable",
    "ToolsMisdeclared",
)


def due(body: Mapping[str, Any], now: datetime | None = None) -> bool:
    """Whether a tick should probe: a spec not yet probed, or a probe older than PROBE_EVERY."""
    status = body.get("status") or {}
    if status.get("observedGeneration") != body["metadata"].get("generation"):
        return True
    probed = status.get("probedAt")
    if not probed:
        return True
    age = (now or datetime.now(UTC)) - datetime.fromisoformat(probed)
    return age.total_seconds() >= PROBE_EVERY


def newly_invalid(body: Mapping[str, Any], status: Mapping[str, Any]) -> str | None:
    """What to post as an event for the probe's ``status`` of the Agent ``body``: the Ready
    message, when the probe found the spec unreadable and the Agent did not already say so.
    A condition is overwritten at every probe; the event is what stays in ``kubectl describe``
    and in an event log, once per change, naming the field."""

    def ready(conditions: Any) -> Mapping[str, Any]:
        return next((c for c in conditions or () if c.get("type") == READY), {})

    now = ready(status.get("conditions"))
    before = ready((body.get("status") or {}).get("conditions"))
    if now.get("reason") != "InvalidSpec" or (
        before.get("reason"),
        before.get("message"),
    ) == (now["reason"], now.get("message")):
        return None
    return str(now.get("message") or "")


def _said(error: BaseException, revealed: Revealed) -> str:
    return revealed.scrub(f"{type(error).__name__}: {error}")[:500]


async def probe_model(
    model: ModelSpec, connections: Connections, secrets: SecretResolver
) -> tuple[EndpointStatus, str | None]:
    """The model endpoint as probed, and the Ready reason it stands in the way with (or None)."""
    base = (model.base_url or VENDOR_URLS[model.provider]).rstrip("/")
    url = base + ("/v1/models" if model.provider == "anthropic" else "/models")
    revealed = Revealed(secrets)
    headers: dict[str, str] = {}
    if model.api_key is not None:
        key = await revealed.reveal(model.api_key)
        if model.provider == "anthropic":
            headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
        else:
            headers = {"authorization": f"Bearer {key}"}
    client = connections.client(headers=headers, timeout=min(model.timeout_seconds, PROBE_TIMEOUT))
    try:
        answer = await client.get(url, follow_redirects=True)
    except EgressRefused as error:
        said = revealed.scrub(error.said_for("spec.model.baseURL"))
        return EndpointStatus(name=model.name, url=base, reachable=False, message=said), (
            "EgressRefused"
        )
    except httpx2.HTTPError as error:
        said = _said(error, revealed)
        return EndpointStatus(name=model.name, url=base, reachable=False, message=said), (
            "ModelUnreachable"
        )
    if answer.status_code in (401, 403):
        refused = f"the endpoint refused the key with {answer.status_code}"
        return EndpointStatus(name=model.name, url=base, reachable=True, message=refused), (
            "KeyRefused"
        )
    return EndpointStatus(name=model.name, url=base, reachable=True), None


async def _probe_servers(
    spec: AgentResourceSpec, connections: Connections, secrets: SecretResolver
) -> tuple[list[EndpointStatus], str | None]:
    found: list[EndpointStatus] = []
    reason: str | None = None
    for index, server in enumerate(spec.tools.mcp):
        try:
            tools = await McpServer(server, connections=connections, secrets=secrets).discover()
        except (ConfigurationError, ToolServerUnavailableError) as error:
            listed = error.__cause__ is None  # it answered, but not with what the spec names
            message = str(error)
            if (refused := refusal_in(error)) is not None:
                reason = reason or "EgressRefused"
                message = refused.said_for(f"spec.tools.mcp[{index}].url")
            reason = reason or ("ToolsMisdeclared" if listed else "ToolServerUnreachable")
            found.append(
                EndpointStatus(name=server.name, url=server.url, reachable=listed, message=message)
            )
            continue
        found.append(
            EndpointStatus(name=server.name, url=server.url, reachable=True, tool_count=len(tools))
        )
    if reason == "ToolsMisdeclared" and any(not each.reachable for each in found):
        reason = "ToolServerUnreachable"
    return found, reason


async def _refused_http_tools(spec: AgentResourceSpec, connections: Connections) -> list[str]:
    """What the egress policy says of each HTTP tool's URL whose host is fixed (a host the model
    fills in is checked when a run calls it)."""
    refused: list[str] = []
    for index, tool in enumerate(spec.tools.http):
        if fixed_host(tool.url):
            try:
                await connections.screen(tool.url)
            except EgressRefused as error:
                refused.append(error.said_for(f"spec.tools.http[{index}].url"))
    return refused


def _tools(declared: DeclaredAgent) -> list[ToolStatus]:
    tools = [
        ToolStatus(
            name=each.name,
            server=each.server,
            disposition=each.disposition,
            destructive=each.destructive,
            overridden=each.overridden,
            key_arguments=list(each.key_arguments) or None,
            requires_approval=each.requires_approval,
        )
        for each in declared.discovered
    ]
    tools.extend(
        ToolStatus(
            name=each.name,
            server="http",
            disposition=each.disposition,
            destructive=each.disposition is Disposition.SIDE_EFFECTING,
            overridden=False,
            key_arguments=list(each.key_arguments) or None,
            requires_approval=each.requires_approval,
        )
        for each in declared.spec.tools.http
    )
    return tools


async def probe(api: KubeApi, connections: Connections, body: Mapping[str, Any]) -> dict[str, Any]:
    """Probe the Agent ``body`` describes; the status to write (camelCase, as the CRD has it)."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    generation = int(meta.get("generation") or 0)
    started = time.monotonic()
    status = AgentStatus(observed_generation=generation)
    reason: str | None = None
    message = ""
    refused_tools: list[str] = []
    try:
        spec = agent_spec(namespace, name, body.get("spec") or {})
        secrets = KubeSecrets(SecretCache(api, max_age=0), namespace, name)  # read afresh
        model, reason = await probe_model(spec.model, connections, secrets)
        servers, server_reason = await _probe_servers(spec, connections, secrets)
        refused_tools = await _refused_http_tools(spec, connections)
        reason = reason or server_reason or ("EgressRefused" if refused_tools else None)
        status = status.model_copy(update={"model": model, "tool_servers": servers})
        if server_reason is None:
            declared = await DeclaredAgent.build(
                name, spec, secrets=secrets, connections=connections, read_ahead=False
            )
            tools = _tools(declared)
            status = status.model_copy(
                update={
                    "revision": declared.definition.revision,
                    "tools": tools,
                    "tool_count": len(tools),
                }
            )
    except AgentNotReadyError as error:
        reason, message = "InvalidSpec", str(error)
    except SecretUnavailableError as error:
        reason, message = "SecretUnavailable", str(error)
    except (ConfigurationError, ToolServerUnavailableError) as error:
        # a server that changed, or went away, between listing and building
        reason, message = "ToolServerUnreachable", str(error)
    if reason is None:
        took = time.monotonic() - started
        message = f"the model endpoint and {len(status.tool_servers or [])} tool server(s) " + (
            f"answered in {took:.1f}s"
        )
    elif not message:
        message = "; ".join(
            [
                f"{each.name}: {each.message}"
                for each in (status.model, *(status.tool_servers or []))
                if each is not None and each.message
            ]
            + refused_tools
        )
    conditions = set_condition(
        (body.get("status") or {}).get("conditions") or [],
        READY,
        "True" if reason is None else "False",
        reason or "Ready",
        message,
        generation=generation,
    )
    written = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {
        **CLEARED,  # a merge patch: what this probe did not find is removed, not left stale
        **written,
        "probedAt": datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "conditions": conditions,
    }
