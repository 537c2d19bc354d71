"""The ``booking`` agent: search, book a seat, text the passenger, report.

``book_flight`` declares its key arguments and hands the key to the airline, which deduplicates
on it, so it is safe to repeat. ``notify_passenger`` has no key and the gateway does not
deduplicate: if a run dies while it is in flight, nobody can say whether the text went out, and
the kit refuses to guess.

``booking-approved`` is the same agent whose text waits for a person's approval: it stops at
``before_approval`` until someone decides (``agentrun approve`` or an AgentRun's
``spec.approvals``), which is what the approval examples and the runbook show.

``booking-paid`` books and then charges the passenger's card with ``charge_card``: keyed and
side-effecting (the card must not be charged twice), and settled without a person when a crash
leaves it undecided: a probe asks the payment service what it charged under the call's key
(``services.charge_under``). The service is the record of every charge, so its "nothing under
this key" is authoritative: the call did not run, and is made again. The demo settles 5 s after
the call turned undecidable (the default is 30 s, so a person already looking answers first).

``AGENTRUN_DEMO_LINGER`` (``book``, ``notify``, ``charge`` or ``charge-before``: before the
service is asked) makes that tool wait after it acted, standing
in for a slow confirmation, so the demo can kill the worker at exactly that moment: for
``AGENTRUN_DEMO_LINGER_SECONDS``, or until the services' ``release-STEP`` file appears (a test
that holds the call in flight until it has seen what it waits for, ``services.released``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
from collections.abc import Mapping

from pydantic import JsonValue

from agentrun.demo import services
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._providers.scripted import ScriptedProvider
from agentrun.runner._registry import RegisteredAgent
from agentrun.runner._settlement import Answer, DidNotRun, Probe, Ran
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


async def _charged(arguments: Mapping[str, JsonValue], idempotency_key: str | None) -> Answer:
    """The payment service's own record of the charge made under the call's key."""
    assert idempotency_key is not None  # the probe needs the key (needs_key)
    receipt = await asyncio.to_thread(services.charge_under, idempotency_key)
    if receipt is None:
        return DidNotRun(evidence="the payment service holds no charge under the call's key")
    result = json.dumps(receipt, sort_keys=True)
    return Ran(result, evidence=f"the payment service holds {receipt['charge']} under the key")


@tool(
    key_arguments=("passenger", "amount_cents"),
    settle=Probe(_charged, did_not_run_is_authoritative=True, needs_key=True, delay_seconds=5),
)
async def charge_card(
    passenger: str, amount_cents: int, idempotency_key: str | None = None
) -> dict[str, str | int]:
    """Charge the passenger's card for the booked seat."""
    assert idempotency_key is not None
    await _linger("charge-before")
    receipt = await asyncio.to_thread(services.charge, passenger, amount_cents, idempotency_key)
    await _linger("charge")
    return receipt


BOOKING_PAID = AgentDefinition(
    name="booking-paid",
    instructions="You book flights and charge the passenger for them. Book one seat, charge once.",
    model="scripted",
    tools=(search_flights, book_flight, charge_card),
)

PAID_SCRIPT: tuple[dict[str, JsonValue], ...] = (
    SCRIPT[0],
    SCRIPT[1],
    {
        "text": "Charging Ada's card.",
        "tool_calls": [
            {
                "name": "charge_card",
                "arguments": {"passenger": "Ada Lovelace", "amount_cents": 18900},
            }
        ],
        "usage": {"input_tokens": 700, "output_tokens": 40},
    },
    {
        "text": "Booked one seat on LH1172 for Ada Lovelace and charged her card once.",
        "usage": {"input_tokens": 760, "output_tokens": 21},
    },
)

paid_booking_agent = RegisteredAgent(
    definition=BOOKING_PAID, provider=lambda: ScriptedProvider(PAID_SCRIPT)
)
