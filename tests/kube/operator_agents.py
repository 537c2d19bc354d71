"""Agents the operator tests register through ``AGENTRUN_AGENT_MODULES``.

Their side effects land in the SQLite file ``AGENTRUN_TEST_EFFECTS`` — the stand-in for the
outside world the tests count bookings and texts in. ``AGENTRUN_TEST_REVISION`` changes the
instructions of ``slowbook``, as a redeployed image with an edited agent would.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import sqlite3
import string
import time
import urllib.request

from pydantic import JsonValue

from agentrun.runner import AgentDefinition, ScriptedProvider, Tool, tool
from agentrun.runner._registry import RegisteredAgent


def _effect(kind: str, detail: str) -> None:
    with sqlite3.connect(os.environ["AGENTRUN_TEST_EFFECTS"], timeout=10) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS effects (kind TEXT, detail TEXT)")
        connection.execute("INSERT INTO effects VALUES (?, ?)", (kind, detail))


@tool(key_arguments=("flight", "passenger"))
async def book_flight(flight: str, passenger: str) -> str:
    """Book a seat (the airline does not deduplicate)."""
    await asyncio.to_thread(_effect, "booking", f"{flight} {passenger}")
    return "seat 12A"


@tool(read_only=True)
async def wait_for_confirmation(seconds: float) -> str:
    """Wait for the airline's confirmation (slow, safe to repeat)."""
    await asyncio.sleep(seconds)
    return "confirmed"


@tool()
async def send_sms(phone: str, text: str) -> str:
    """Text the passenger (no key; the gateway does not deduplicate)."""
    await asyncio.to_thread(_effect, "sms", text)
    await asyncio.sleep(float(os.environ.get("AGENTRUN_TEST_SMS_LINGER", "0")))
    return "sent"


@tool(key_arguments=("amount",), requires_approval=True)
async def refund(amount: int) -> str:
    """Refund the customer (a person approves first)."""
    await asyncio.to_thread(_effect, "refund", str(amount))
    return f"refunded {amount}"


LEAKED = "ghp_" + "".join(random.Random(15).choices(string.ascii_letters + string.digits, k=36))
"""A GitHub-token-shaped secret (generated, not a real one) that ``leaky`` spreads around."""


@tool()
async def fetch_report(name: str) -> str:
    """Fetch a report; its text, and this tool's log line, carry an access token."""
    logging.getLogger(__name__).warning("fetched report %s, token %s", name, LEAKED)
    return f"report {name} is ready; open it with {LEAKED}"


def _turn(name: str, arguments: dict[str, JsonValue]) -> dict[str, JsonValue]:
    return {
        "tool_calls": [{"name": name, "arguments": arguments}],
        "usage": {"input_tokens": 100, "output_tokens": 10},
    }


def _agent(
    name: str, tools: tuple[Tool, ...], script: list[dict[str, JsonValue]], instructions: str = ""
) -> RegisteredAgent:
    definition = AgentDefinition(
        name=name, instructions=instructions or name, model="scripted", tools=tools
    )
    return RegisteredAgent(definition=definition, provider=lambda: ScriptedProvider(script))


DONE: dict[str, JsonValue] = {"text": "done", "usage": {"input_tokens": 50, "output_tokens": 5}}

slowbook = _agent(
    "slowbook",
    (book_flight, wait_for_confirmation),
    [
        _turn("book_flight", {"flight": "LH1172", "passenger": "Ada"}),
        _turn("wait_for_confirmation", {"seconds": 4}),
        _turn("wait_for_confirmation", {"seconds": 1}),
        DONE,
    ],
    instructions="book, then wait " + os.environ.get("AGENTRUN_TEST_REVISION", "1"),
)
texter = _agent("texter", (send_sms,), [_turn("send_sms", {"phone": "+49", "text": "hi"}), DONE])
approver = _agent("approver", (refund,), [_turn("refund", {"amount": 42}), DONE])
patient = _agent(
    "patient",
    (wait_for_confirmation,),
    [
        _turn("wait_for_confirmation", {"seconds": 3}),
        _turn("wait_for_confirmation", {"seconds": 3}),
        _turn("wait_for_confirmation", {"seconds": 1}),
        DONE,
    ],
)
leaky = _agent(
    "leaky",
    (fetch_report,),
    [
        _turn("fetch_report", {"name": "q3"}),
        {"text": f"Here it is: {LEAKED}", "usage": {"input_tokens": 50, "output_tokens": 5}},
    ],
)


@tool()
async def tick(count: int) -> str:
    """Make one more call to the outside world (no key; it records when it was called)."""
    await asyncio.to_thread(_effect, "tick", repr(time.time()))
    await asyncio.sleep(0.3)
    return f"tick {count}"


ticker = _agent("ticker", (tick,), [*(_turn("tick", {"count": n}) for n in range(200)), DONE])
"""A long run of many side-effecting calls: deleting it mid-way must stop them."""


@tool(read_only=True)
async def call_out(n: int) -> str:
    """Ask the test's tool server (``AGENTRUN_TEST_TOOL_URL``, on loopback): it counts the calls
    that begin and holds each until the test lets it go."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy

    def ask() -> str:
        with opener.open(f"{os.environ['AGENTRUN_TEST_TOOL_URL']}?n={n}", timeout=120) as answer:
            return str(answer.read().decode())

    return await asyncio.to_thread(ask)


caller = _agent("caller", (call_out,), [*(_turn("call_out", {"n": n}) for n in range(200)), DONE])
"""A long run of calls to a server the test controls."""
