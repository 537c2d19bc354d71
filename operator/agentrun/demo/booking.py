"""The ``booking`` agent: search, book a seat, text the passenger, report.

``book_flight`` declares its key arguments and hands the key to the airline, which deduplicates
on it, so it is safe to repeat. ``notify_passenger`` has no key and the gateway does not
deduplicate: if a run dies while it is in flight, nobody can say whether the text went out, and
the kit refuses to guess.

``booking-approved`` is the same agent whose text waits for a person's approval: it stops at
``before_approval`` until someone decides (``agentrun approve`` or an AgentRun's
``spec.approvals``), which is what the approval examples and the runbook show.

``AGENTRUN_DEMO_LINGER`` (``book`` or ``notify``) makes that tool wait after it acted, standing
in for a slow confirmation, so the demo can kill the worker at exactly that moment: for
``AGENTRUN_DEMO_LINGER_SECONDS``, or until the services' ``release-STEP`` file appears (a test
that holds the call in flight until it has seen what it waits for, ``services.released``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os

from pydantic import JsonValue

from agentrun.demo import services
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._providers.scripted import ScriptedProvider
from agentrun.runner._registry import RegisteredAgent
from agentrun.runner._tools import tool

RELEASE_POLL = 0.2
"""Seconds between two looks for the file that ends a linger."""


async def _linger(step: str) -> None:
    if os.environ.get("AGENTRUN_DEMO_LINGER") != step:
        return
    seconds = float(os.environ.get("AGENTRUN_DEMO_LINGER_SECONDS", "60"))
    for _ in range(math.ceil(seconds / RELEASE_POLL)):
        if services.released(step):
            return
        await asyncio.sleep(RELEASE_POLL)


@tool(read_only=True)
async def search_flights(origin: str, destination: str) -> list[dict[str, str]]:
    """Find flights between two airports."""
    return [{"flight": "LH1172", "origin": origin, "destination": destination, "departs": "09:40"}]


@tool(key_arguments=("flight", "passenger"), idempotent=True)
async def book_flight(
    flight: str, passenger: str, idempotency_key: str | None = None
) -> dict[str, str]:
    """Book one seat on a flight for a passenger."""
    assert idempotency_key is not None
    seat = await asyncio.to_thread(services.book_seat, flight, passenger, idempotency_key)
    await _linger("book")
    return {"flight": flight, "passenger": passenger, "seat": seat}


@tool()
async def notify_passenger(phone: str, text: str) -> str:
    """Send the passenger a text message."""
    message_id = await asyncio.to_thread(services.send_text, phone, text)
    await _linger("notify")
    return f"message {message_id} sent"


BOOKING = AgentDefinition(
    name="booking",
    instructions="You book flights. Search, book exactly one seat, tell the passenger.",
    model="scripted",
    tools=(search_flights, book_flight, notify_passenger),
)

SCRIPT: tuple[dict[str, JsonValue], ...] = (
    {
        "text": "Looking for flights.",
        "tool_calls": [
            {"name": "search_flights", "arguments": {"origin": "MUC", "destination": "LIS"}}
        ],
        "usage": {"input_tokens": 420, "output_tokens": 38},
    },
    {
        "text": "Booking LH1172.",
        "tool_calls": [
            {"name": "book_flight", "arguments": {"flight": "LH1172", "passenger": "Ada Lovelace"}}
        ],
        "usage": {"input_tokens": 610, "output_tokens": 41},
    },
    {
        "text": "Letting Ada know.",
        "tool_calls": [
            {
                "name": "notify_passenger",
                "arguments": {"phone": "+49 89 1234567", "text": "Your seat on LH1172 is booked."},
            }
        ],
        "usage": {"input_tokens": 700, "output_tokens": 44},
    },
    {
        "text": "Booked one seat on LH1172 for Ada Lovelace and sent her a text.",
        "usage": {"input_tokens": 760, "output_tokens": 21},
    },
)

booking_agent = RegisteredAgent(definition=BOOKING, provider=lambda: ScriptedProvider(SCRIPT))

BOOKING_APPROVED = dataclasses.replace(
    BOOKING,
    name="booking-approved",
    tools=(
        search_flights,
        book_flight,
        dataclasses.replace(notify_passenger, requires_approval=True),
    ),
)
approved_booking_agent = RegisteredAgent(
    definition=BOOKING_APPROVED, provider=lambda: ScriptedProvider(SCRIPT)
)
