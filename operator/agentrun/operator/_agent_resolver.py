"""Which agent an AgentRun's ``spec.agent`` names: an ``Agent`` resource, or one in the image.

**An Agent resource in the run's namespace wins** over an agent of the same name registered in
the image (an entry point or ``AGENTRUN_AGENT_MODULES``). The resource is what the people of that
namespace declared, next to their runs; the image's agent stays reachable under every name no
Agent takes. Creating an Agent named like an image agent therefore changes the agent of that
name's runs in that namespace — and, its revision being another, the runs already checkpointed
under the image's end ``RevisionMismatch`` when next carried on, never run on by a different
agent. The Agent is read from the watch's view of Agents (``agent_book``), not asked of the API
server at each attempt.

A declared agent is built (its MCP servers listed, its provider made) with the Agent's Secrets
read through ``KubeSecrets`` for that Agent (only Secrets annotated for it are used; each Secret
kept ``AGENTRUN_SECRET_MAX_AGE`` seconds, one cache for the replica), over one connection pool the
operator shares. It is kept while the Agent's generation stays and listed again when it is older
than ``RELIST_AFTER``, so a tool server that changes its tools changes the revision the next
attempt runs under (and a run checkpointed under the old listing is refused, as for an edit).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from agentrun._errors import ConfigurationError
from agentrun._outcomes import Outcome
from agentrun.operator._agent_book import AgentBook
from agentrun.operator._agent_resource import AgentResourceSpec
from agentrun.operator._kube_secrets import DEFAULT_MAX_AGE, KubeSecrets, SecretCache
from agentrun.operator._kubeapi import KubeApi
from agentrun.operator._nesting import MAX_DEPTH, cut_fields, field_errors, shortened
from agentrun.runner._connections import Connections
from agentrun.runner._declared import DeclaredAgent
from agentrun.runner._mcp_tools import ToolServerUnavailableError
from agentrun.runner._registry import RegisteredAgent

RELIST_AFTER = 30.0
"""Seconds a declared agent's tool listing is trusted before the next attempt lists again."""


class AgentNotFoundError(ConfigurationError):
    """Neither an Agent resource nor an agent in the image has the name a run gives."""

    outcome = Outcome.AGENT_NOT_REGISTERED

    def __init__(self, name: str, namespace: str, registered: Mapping[str, object]) -> None:
        listed = ", ".join(sorted(registered)) or "none"
        super().__init__(
            f"no Agent named {name!r} in namespace {namespace}, and no agent of that name is "
            f"registered in the image (registered: {listed}); kubectl apply an Agent named "
            f"{name!r} there, or fix spec.agent"
        )


class AgentNotReadyError(ConfigurationError):
    """The Agent exists but cannot be made into an agent yet; the message says why."""

    outcome = Outcome.AGENT_NOT_READY

    def __init__(self, namespace: str, name: str, why: str) -> None:
        super().__init__(
            f"Agent {namespace}/{name} is not ready: {why} (kubectl describe agent {name})"
        )


def agent_spec(namespace: str, name: str, spec: Mapping[str, Any]) -> AgentResourceSpec:
    """The Agent's spec as the kit reads it; ``AgentNotReadyError`` names the fields that do not
    fit (the CRD refuses most of them; what only the kit checks is said here), and those nested
    too deep to be read at all (``nesting``)."""
    cut = cut_fields(spec, "spec")
    if cut:
        wrong = "; ".join(
            f"{shortened(path)}: nests deeper than {MAX_DEPTH} levels" for path in cut
        )
        raise AgentNotReadyError(namespace, name, f"{wrong}; the operator reads none of this spec")
    try:
        return AgentResourceSpec.model_validate(dict(spec))
    except ValidationError as error:
        raise AgentNotReadyError(namespace, name, field_errors(error, "spec")) from None


@dataclass(frozen=True)
class ResolvedAgent:
    """The agent a run executes, and the budget it has when its own spec sets none."""

    registered: RegisteredAgent
    budget_micros: int | None = None


@dataclass
class _Built:
    generation: int
    listed_at: float
    declared: DeclaredAgent
    budget_micros: int | None


class AgentResolver:
    def __init__(
        self,
        api: KubeApi,
        registered: Mapping[str, RegisteredAgent],
        connections: Connections | None = None,
        *,
        secret_max_age: float = DEFAULT_MAX_AGE,
        book: AgentBook | None = None,
    ) -> None:
        self.api = api
        self.book = book or AgentBook(api.get_agent)
        """Where Agents are looked up: the watch's view (``agent_book``)."""
        self.registered = registered
        self.connections = connections or Connections()
        self.secrets = SecretCache(api, secret_max_age)
        self._built: dict[tuple[str, str], _Built] = {}

    async def resolve(self, namespace: str, name: str) -> ResolvedAgent:
        """The agent ``name`` in ``namespace`` (see the module's notes for which wins)."""
        body = await self.book.get(namespace, name)
        if body is None:
            self._built.pop((namespace, name), None)
            found = self.registered.get(name)
            if found is None:
                raise AgentNotFoundError(name, namespace, self.registered)
            return ResolvedAgent(found)
        built = await self._declared(namespace, name, body)
        return ResolvedAgent(built.declared.registered(), built.budget_micros)

    async def _declared(self, namespace: str, name: str, body: Mapping[str, Any]) -> _Built:
        generation = int(body["metadata"].get("generation") or 0)
        built = self._built.get((namespace, name))
        now = time.monotonic()
        if built is not None and built.generation == generation:
            if now - built.listed_at >= RELIST_AFTER:
                try:
                    await built.declared.refresh()
                except (ConfigurationError, ToolServerUnavailableError) as error:
                    raise AgentNotReadyError(namespace, name, str(error)) from error
                built.listed_at = now
            return built
        spec = agent_spec(namespace, name, body.get("spec") or {})
        try:
            declared = await DeclaredAgent.build(
                name,
                spec,
                secrets=KubeSecrets(self.secrets, namespace, name),
                connections=self.connections,
            )
        except (ConfigurationError, ToolServerUnavailableError) as error:
            if error.outcome not in (Outcome.MISCONFIGURED, Outcome.AGENT_NOT_READY):
                raise
            raise AgentNotReadyError(namespace, name, str(error)) from error
        budget = spec.budget.max_cost_micros if spec.budget else None
        built = _Built(generation, now, declared, budget)
        self._built[(namespace, name)] = built
        return built

    async def aclose(self) -> None:
        await self.connections.aclose()
