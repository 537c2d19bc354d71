"""The loop: agent definitions, tools, providers, and ``AgentRunner``."""

from agentrun.runner.agents import AgentDefinition
from agentrun.runner.http_tool import http_post_tool
from agentrun.runner.loop import AgentRunner
from agentrun.runner.pricing import DEFAULT_PRICES, ModelPrice, PriceTable
from agentrun.runner.providers import ModelReply, OpenAIChatProvider, Provider, ScriptedProvider
from agentrun.runner.results import RunResult, RunStatus
from agentrun.runner.tools import Tool, ToolError, tool

__all__ = [
    "DEFAULT_PRICES",
    "AgentDefinition",
    "AgentRunner",
    "ModelPrice",
    "ModelReply",
    "OpenAIChatProvider",
    "PriceTable",
    "Provider",
    "RunResult",
    "RunStatus",
    "ScriptedProvider",
    "Tool",
    "ToolError",
    "http_post_tool",
    "tool",
]
