"""The loop: agent definitions, tools, providers, and ``AgentRunner``.

What needs the ``agents`` extra (the vendors' SDKs, MCP, HTTP) is imported from its own module,
so the loop itself runs with none of it installed: ``_providers.openai``, ``_providers.anthropic``,
``_mcp_tools``, ``_http_tool`` and ``_declared``.
"""

from agentrun.runner._agents import AgentDefinition
from agentrun.runner._loop import AgentRunner
from agentrun.runner._pricing import DEFAULT_PRICES, ModelPrice, PriceTable
from agentrun.runner._providers import ModelReply, Provider, ProviderError, ScriptedProvider
from agentrun.runner._results import RunResult, RunStatus
from agentrun.runner._run_settler import Settled, SettledCall, settle_run
from agentrun.runner._settlement import DidNotRun, Probe, Ran, Replay, Unknown
from agentrun.runner._spec import AgentSpec
from agentrun.runner._tools import StillInFlightError, Tool, ToolError, tool

__all__ = [
    "DEFAULT_PRICES",
    "AgentDefinition",
    "AgentRunner",
    "AgentSpec",
    "DidNotRun",
    "ModelPrice",
    "ModelReply",
    "PriceTable",
    "Probe",
    "Provider",
    "ProviderError",
    "Ran",
    "Replay",
    "RunResult",
    "RunStatus",
    "ScriptedProvider",
    "Settled",
    "SettledCall",
    "StillInFlightError",
    "Tool",
    "ToolError",
    "Unknown",
    "settle_run",
    "tool",
]
