"""The ``Agent`` custom resource: its spec as the kit reads it, and the status the operator writes.

The spec *is* the kit's ``AgentSpec`` (``agentrun.runner._spec``) written as a resource, plus the
default budget of a run that sets none: one vocabulary for a declared agent, whether it is
written in Python, in a file for the CLI, or with kubectl. The CRD
(``crds/agents.agentrun.dev.yaml``) states the same names and bounds, and ``AgentSpec``'s own
validators say, naming the field, what the CRD cannot (a secret sent in a query string).

The status is pointers and facts only — which endpoints answered, the tools and their
dispositions, the revision — never a key, a header or a tool's output.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from agentrun._base import SpecModel
from agentrun.operator._resource import Condition, Count, ResourceModel
from agentrun.runner._spec import AgentSpec
from agentrun.runner._tools import Disposition

AGENT_KIND = "Agent"
AGENT_PLURAL = "agents"
READY = "Ready"


class AgentBudget(SpecModel):
    max_cost_micros: Annotated[int, Field(ge=1, le=1_000_000_000_000)]


class AgentResourceSpec(AgentSpec):
    """An Agent's spec: the declared agent, and the budget of a run that names none."""

    budget: AgentBudget | None = None


class EndpointStatus(ResourceModel):
    name: str
    url: str
    reachable: bool
    message: str | None = None
    tool_count: Count | None = None


class ToolStatus(ResourceModel):
    name: str
    server: str
    """The MCP server that lists the tool, or ``http`` for an HTTP tool."""
    disposition: Disposition
    destructive: bool
    overridden: bool
    key_arguments: list[str] | None = None
    """Unset when the tool has none."""
    requires_approval: bool


class AgentStatus(ResourceModel):
    observed_generation: Count | None = None
    probed_at: datetime | None = None
    revision: str | None = None
    tool_count: Count | None = None
    model: EndpointStatus | None = None
    tool_servers: list[EndpointStatus] | None = None
    tools: list[ToolStatus] | None = None
    conditions: list[Condition] | None = None
