"""Agents the operator benchmark registers in its replicas through ``AGENTRUN_AGENT_MODULES``.

They talk to the scripted provider and touch nothing outside the process, so what the benchmark
measures is the operator's own cost — the API server, the store, kopf — not a model's or a tool's:

* ``quick`` makes three fast tool calls (a read-only look-up, a keyed reservation, another
  look-up) and answers: four model calls and every boundary a real run writes;
* ``slow`` reserves, then waits ``SLOW_SECONDS`` in a read-only step, the step a replica is
  killed in for the takeover measurement (repeating it after the takeover is safe);
* ``parked`` asks for an approval nobody gives, so its run stays alive, idle, for the memory
  measurement;
* ``metered`` waits ``METERED_SECONDS`` twice, each time after a model call of ``CALL_USAGE``,
  so that ``bench.quotas`` knows what every call costs a namespace's budget and its runs hold
  their places long enough to be counted.
"""

from __future__ import annotations

import asyncio

from pydantic import JsonValue

from agentrun import Usage
from agentrun.runner import AgentDefinition, ScriptedProvider, tool
from agentrun.runner._registry import RegisteredAgent
from agentrun.runner._tools import Tool

SLOW_SECONDS = 10.0
METERED_SECONDS = 0.5
CALL_USAGE = Usage(input_tokens=100, output_tokens=10)
"""What each tool-calling turn of these agents uses; the closing answer uses half of it."""


@tool(read_only=True)
async def look_up(code: str) -> str:
    """Look a fare code up (read-only)."""
    return f"{code}: available"


@tool(key_arguments=("item",))
async def reserve(item: str) -> str:
    """Reserve an item (keyed, so a resume never books it twice)."""
    return f"reserved {item}"


@tool(read_only=True)
async def wait_for_confirmation(seconds: float) -> str:
    """Wait for a confirmation (slow, safe to repeat)."""
    await asyncio.sleep(seconds)
    return "confirmed"


@tool(key_arguments=("amount",), requires_approval=True)
async def refund(amount: int) -> str:
    """Refund the customer (a person approves first)."""
    return f"refunded {amount}"


def _turn(name: str, arguments: dict[str, JsonValue]) -> dict[str, JsonValue]:
    return {
        "tool_calls": [{"name": name, "arguments": arguments}],
        "usage": {
            "input_tokens": CALL_USAGE.input_tokens,
            "output_tokens": CALL_USAGE.output_tokens,
        },
    }


DONE: dict[str, JsonValue] = {"text": "done", "usage": {"input_tokens": 50, "output_tokens": 5}}


def _agent(
    name: str, tools: tuple[Tool, ...], script: list[dict[str, JsonValue]]
) -> RegisteredAgent:
    definition = AgentDefinition(
        name=name, instructions=f"benchmark agent {name}", model="scripted", tools=tools
    )
    return RegisteredAgent(definition=definition, provider=lambda: ScriptedProvider(script))


quick = _agent(
    "quick",
    (look_up, reserve),
    [
        _turn("look_up", {"code": "Y"}),
        _turn("reserve", {"item": "seat"}),
        _turn("look_up", {"code": "J"}),
        DONE,
    ],
)
slow = _agent(
    "slow",
    (reserve, wait_for_confirmation),
    [
        _turn("reserve", {"item": "seat"}),
        _turn("wait_for_confirmation", {"seconds": SLOW_SECONDS}),
        DONE,
    ],
)
parked = _agent("parked", (refund,), [_turn("refund", {"amount": 42}), DONE])
metered = _agent(
    "metered",
    (wait_for_confirmation,),
    [
        _turn("wait_for_confirmation", {"seconds": METERED_SECONDS}),
        _turn("wait_for_confirmation", {"seconds": METERED_SECONDS}),
        DONE,
    ],
)
