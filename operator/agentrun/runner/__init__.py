"""The loop: agent definitions, tools, providers, and ``AgentRunner``.

What needs the ``agents`` extra (the vendors' SDKs, MCP, HTTP) is imported from its own module,
so the loop itself runs with none of it installed: ``providers.openai``, ``providers.anthropic``,
``mcp_tools``, ``http_tool`` and ``declared``.
"""

from agentrun.runner.agents import AgentDefinition
from agentrun.runner.loop import AgentRunner
from agentrun.runner.pricing import DEFAULT_PRICES, ModelPrice, PriceTable
from agentrun.runner.providers import ModelReply, Provider, ProviderError, ScriptedProvider
from agentrun.runner.results import RunResult, RunStatus
from agentrun.runner.tools import Tool, ToolError, tool

__all__ = [
    "DEFAULT_PRICES",
    "AgentDefinition",
    "AgentRunner",
    "ModelPrice",
    "ModelReply",
    "PriceTable",
    "Provider",
    "ProviderError",
    "RunResult",
    "RunStatus",
    "ScriptedProvider",
    "Tool",
    "ToolError",
    "tool",
]
