"""The payments agent whose calls the settle tests kill, settle and carry on.

One HTTP tool, ``charge``, against ``agentrun.testing.settle_services.PaymentService``: keyed by
the order, side-effecting, and declaring ``settle: {replay: {}}``. A run charges its order once
and says "done". ``turns(order_id)`` is the model's script for one run (the order is the run's
own, so the service's books tell the runs apart); the agent's revision does not depend on it.

Imported by ``AGENTRUN_AGENT_MODULES`` (``agentrun settle`` in a subprocess), it registers the
agent for the service at ``AGENTRUN_TEST_PAYMENTS`` (``REGISTERED``), charging
``AGENTRUN_TEST_ORDER``.
"""

from __future__ import annotations

import os

from pydantic import JsonValue

from agentrun.runner import AgentDefinition, ScriptedProvider
from agentrun.runner._connections import Connections
from agentrun.runner._http_tool import http_tool
from agentrun.runner._registry import RegisteredAgent
from agentrun.runner._spec import HttpToolSpec

SERVICE_VARIABLE = "AGENTRUN_TEST_PAYMENTS"
ORDER_VARIABLE = "AGENTRUN_TEST_ORDER"
AMOUNT = 4200


def payments_agent(service_url: str, connections: Connections) -> AgentDefinition:
    spec = HttpToolSpec.model_validate(
        {
            "name": "charge",
            "url": service_url + "/charges",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": {"type": "string"},
                    "amount_cents": {"type": "integer"},
                },
                "required": ["order_id", "amount_cents"],
            },
            "keyArguments": ["order_id"],
            "timeoutSeconds": 10,
            "settle": {"replay": {}, "delaySeconds": 1},
        }
    )
    return AgentDefinition(
        name="payments",
        instructions="charge the order",
        model="scripted",
        tools=(http_tool(spec, connections=connections),),
    )


def turns(order_id: str) -> ScriptedProvider:
    usage: dict[str, JsonValue] = {"input_tokens": 10, "output_tokens": 5}
    charge: dict[str, JsonValue] = {"order_id": order_id, "amount_cents": AMOUNT}
    return ScriptedProvider(
        [
            {"tool_calls": [{"name": "charge", "arguments": charge}], "usage": usage},
            {"text": "done", "usage": usage},
        ]
    )


if SERVICE_VARIABLE in os.environ:
    REGISTERED = RegisteredAgent(
        definition=payments_agent(os.environ[SERVICE_VARIABLE], Connections()),
        provider=lambda: turns(os.environ.get(ORDER_VARIABLE, "o-1")),
    )
