"""The booking run as a declared agent: a model endpoint and the airline's MCP server, no Python.

``booking_spec`` declares it against the fake model server and the booking MCP server of
``agentrun.testing`` (both on loopback); ``TURNS`` is what the fake model answers: search,
book, charge, text, report. The model's key and the airline's token are secret references,
read by whatever resolver the runner is given.
"""

from __future__ import annotations

from typing import Literal

from agentrun.runner._spec import AgentSpec
from agentrun.testing.model_server import Turn

TURNS: tuple[Turn, ...] = (
    Turn("Looking for flights.", (("search_flights", {"origin": "MUC", "destination": "LIS"}),)),
    Turn("Booking LH1172.", (("book_flight", {"flight": "LH1172", "passenger": "Ada Lovelace"}),)),
    Turn("Charging the card.", (("charge_card", {"order_id": "o-1", "amount_cents": 42000}),)),
    Turn("Letting Ada know.", (("send_sms", {"phone": "+49 89 1234567", "text": "Booked."}),)),
    Turn("Booked LH1172 for Ada Lovelace, charged the card and sent her a text."),
)

MODEL_KEY = ("model-keys", "token")
AIRLINE_TOKEN = ("airline", "token")


def _secret(name: str, key: str) -> dict[str, object]:
    return {"valueFrom": {"secretKeyRef": {"name": name, "key": key}}}


TOOLS = ("search_flights", "book_flight", "charge_card", "send_sms")


def booking_spec(
    *, provider: Literal["openai", "anthropic"], model_url: str, mcp_url: str, max_retries: int = 2
) -> AgentSpec:
    """The booking agent, as a person would write it (camelCase, as in an ``Agent``)."""
    token = {**_secret(*AIRLINE_TOKEN), "prefix": "Bearer "}
    return AgentSpec.model_validate(
        {
            "model": {
                "provider": provider,
                "name": "fake-model",
                "baseURL": model_url,
                "apiKey": _secret(*MODEL_KEY),
                "maxRetries": max_retries,
                "timeoutSeconds": 30,
                "price": {"inputMicrosPerMillion": 1_000_000, "outputMicrosPerMillion": 4_000_000},
            },
            "instructions": "You book flights: search, book one seat, charge, tell the passenger.",
            "tools": {
                "mcp": [
                    {
                        "name": "airline",
                        "url": mcp_url,
                        "headers": {"Authorization": token},
                        "allowedTools": list(TOOLS),
                        "tools": {
                            "book_flight": {"keyArguments": ["flight", "passenger"]},
                            "charge_card": {"keyArguments": ["order_id"]},
                        },
                    }
                ]
            },
        }
    )
