"""How a tool declares that a machine may settle its calls: what is accepted, what is refused
(naming the field and the fix), and that the declaration is part of the agent's revision."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import JsonValue, ValidationError

from agentrun._errors import ConfigurationError
from agentrun.runner import AgentDefinition, DidNotRun, Probe, Ran, Replay, Unknown, tool
from agentrun.runner._settlement import Answer, ProbeSpec, SettleSpec
from agentrun.runner._spec import AgentSpec, HttpToolSpec, ToolOverride

PARAMETERS: dict[str, JsonValue] = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "amount_cents": {"type": "integer"}},
    "required": ["order_id", "amount_cents"],
}
PROBE: dict[str, Any] = {
    "http": {"url": "https://pay.example/charges/{idempotencyKey}"},
    "ran": {"status": [200], "pointer": "/state", "equals": ["confirmed"]},
}


def http_spec(settle: dict[str, Any], **more: Any) -> HttpToolSpec:
    return HttpToolSpec.model_validate(
        {
            "name": "charge",
            "url": "https://pay.example/charges",
            "parameters": PARAMETERS,
            "keyArguments": ["order_id"],
            "settle": settle,
            **more,
        }
    )


def test_a_replay_and_a_probe_are_read_with_their_defaults() -> None:
    replay = http_spec({"replay": {}}).settle
    assert replay is not None
    assert (replay.delay_seconds, replay.attempts) == (30, 3)
    probe = http_spec({"delaySeconds": 5, "attempts": 2, "probe": PROBE}).settle
    assert probe is not None
    assert probe.probe is not None
    assert (probe.delay_seconds, probe.attempts) == (5, 2)
    assert not probe.probe.did_not_run_is_authoritative


@pytest.mark.parametrize(
    ("settle", "more", "said"),
    [
        ({"replay": {}}, {"keyArguments": []}, "settle.replay needs keyArguments"),
        ({"replay": {}, "probe": PROBE}, {}, "exactly one of replay ({}) or probe"),
        ({}, {}, "exactly one of replay ({}) or probe"),
        (
            {"probe": {**PROBE, "http": {"url": "https://pay.example/c?o={order}"}}},
            {},
            "placeholders ['order'] are not arguments of the tool (amount_cents, order_id)",
        ),
        (
            {"probe": PROBE},
            {"keyArguments": []},
            "uses {idempotencyKey}, and the tool has no keyArguments",
        ),
        (
            {"probe": {"mcp": {"tool": "lookup"}, "ran": {"pointer": "/state"}}},
            {},
            "settle.probe.mcp is for MCP tools",
        ),
        ({"probe": {"http": PROBE["http"]}}, {}, "needs ran or didNotRun"),
        (
            {"probe": {**PROBE, "didNotRunIsAuthoritative": True}},
            {},
            "didNotRunIsAuthoritative needs didNotRun",
        ),
        (
            {"probe": {**PROBE, "http": {"url": "https://pay.example/c?a={account}"}}},
            {"arguments": {"account": {"valueFrom": {"secretKeyRef": {"name": "p", "key": "a"}}}}},
            "name fixed arguments",
        ),
        ({"probe": {**PROBE, "ran": {"equals": ["x"]}}}, {}, "equals needs pointer"),
        ({"probe": {**PROBE, "ran": {}}}, {}, "a condition needs status or pointer"),
        ({"delaySeconds": 0, "replay": {}}, {}, "greater than or equal to 1"),
        ({"attempts": 11, "replay": {}}, {}, "less than or equal to 10"),
        ({"replay": {}, "mode": "guess"}, {}, "Extra inputs are not permitted"),
    ],
)
def test_what_cannot_work_is_refused_naming_the_field_and_the_fix(
    settle: dict[str, Any], more: dict[str, Any], said: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        http_spec(settle, **more)
    assert said in str(refused.value)


def test_an_mcp_probe_has_no_status_and_needs_keyed_calls_for_the_key() -> None:
    with pytest.raises(ValidationError, match="status conditions are for HTTP probes"):
        ToolOverride.model_validate(
            {
                "keyArguments": ["flight"],
                "settle": {"probe": {"mcp": {"tool": "find"}, "ran": {"status": [200]}}},
            }
        )
    with pytest.raises(ValidationError, match=r"settle\.replay needs keyArguments"):
        ToolOverride.model_validate({"settle": {"replay": {}}})
    override = ToolOverride.model_validate(
        {
            "keyArguments": ["flight"],
            "settle": {
                "probe": {
                    "mcp": {"tool": "find", "arguments": {"reference": "{idempotencyKey}"}},
                    "ran": {"pointer": "/state", "equals": ["booked"]},
                }
            },
        }
    )
    assert override.settle is not None


def test_the_secrets_of_probe_headers_are_among_the_agents_secrets() -> None:
    token = {"valueFrom": {"secretKeyRef": {"name": "pay", "key": "token"}}, "prefix": "Bearer "}
    lookup = {"valueFrom": {"secretKeyRef": {"name": "airline", "key": "lookup"}}}
    spec = AgentSpec.model_validate(
        {
            "model": {
                "provider": "openai",
                "name": "m",
                "price": {"inputMicrosPerMillion": 0, "outputMicrosPerMillion": 0},
            },
            "instructions": "pay",
            "tools": {
                "http": [
                    {
                        "name": "charge",
                        "url": "https://pay.example/charges",
                        "parameters": PARAMETERS,
                        "keyArguments": ["order_id"],
                        "settle": {
                            "probe": {
                                **PROBE,
                                "http": {**PROBE["http"], "headers": {"Authorization": token}},
                            }
                        },
                    }
                ],
                "mcp": [
                    {
                        "name": "airline",
                        "url": "https://air.example/mcp",
                        "tools": {
                            "book": {
                                "keyArguments": ["flight"],
                                "settle": {
                                    "probe": {
                                        "http": {
                                            "url": "https://air.example/b/{idempotencyKey}",
                                            "headers": {"X-Key": lookup},
                                        },
                                        "ran": {"status": [200]},
                                    }
                                },
                            }
                        },
                    }
                ],
            },
        }
    )
    named = {str(reference.ref) for reference in spec.secret_references()}
    assert {"pay/token", "airline/lookup"} <= named


def _answers(spec: dict[str, Any], status: int | None, text: str) -> Answer:
    return ProbeSpec.model_validate(spec).judge("asked", status, text)


def test_a_probes_conditions_decide_what_an_answer_means() -> None:
    probe = {
        **PROBE,
        "didNotRun": {"status": [404]},
        "result": "/receipt",
    }
    assert _answers(probe, 200, '{"state": "confirmed", "receipt": {"id": 7}}') == Ran(
        '{"id": 7}', evidence='asked: 200 {"state": "confirmed", "receipt": {"id": 7}}'
    )
    assert _answers(probe, 404, "gone") == DidNotRun(evidence="asked: 404 gone")
    assert isinstance(_answers(probe, 200, '{"state": "pending"}'), Unknown)
    assert isinstance(_answers(probe, 500, "oops"), Unknown)
    said = _answers(probe, 200, '{"state": "confirmed"}')
    assert isinstance(said, Unknown)
    assert "no /receipt" in said.why
    # a pointer without equals must exist; numbers compare as JSON writes them
    exists = {"mcp": {"tool": "t"}, "ran": {"pointer": "/seat"}}
    assert isinstance(_answers(exists, None, '{"seat": "12A"}'), Ran)
    assert isinstance(_answers(exists, None, '{"state": 1}'), Unknown)
    counted = {"mcp": {"tool": "t"}, "ran": {"pointer": "/n/0", "equals": ["3"]}}
    assert isinstance(_answers(counted, None, '{"n": [3]}'), Ran)
    assert isinstance(_answers(counted, None, "not json"), Unknown)


async def _charge(order_id: str, idempotency_key: str | None = None) -> str:
    return f"charged {order_id}"


async def _lookup(arguments: Any, key: str | None) -> Answer:
    return Unknown("nobody knows")


def test_a_code_tool_declares_replay_only_with_a_key_it_passes_on() -> None:
    keyed = tool(key_arguments=("order_id",), settle=Replay(delay_seconds=5, attempts=2))(_charge)
    assert keyed.settlement == Replay(delay_seconds=5, attempts=2)
    with pytest.raises(ConfigurationError, match="needs key_arguments"):
        tool(settle=Replay())(_charge)

    async def no_key_parameter(order_id: str) -> str:
        return order_id

    with pytest.raises(ConfigurationError, match="idempotency_key parameter"):
        tool(key_arguments=("order_id",), settle=Replay())(no_key_parameter)
    with pytest.raises(ConfigurationError, match="attempts is 0"):
        Replay(attempts=0)
    probed = tool(settle=Probe(_lookup, did_not_run_is_authoritative=True))(_charge)
    assert probed.settlement is not None
    assert probed.settlement.delay_seconds == 30


def test_the_declaration_is_part_of_the_revision_and_absent_ones_change_nothing() -> None:
    plain = tool(key_arguments=("order_id",))(_charge)
    assert "settle" not in plain.definition()
    revisions = {
        AgentDefinition(name="a", instructions="", model="m", tools=(each,)).revision
        for each in (
            plain,
            tool(key_arguments=("order_id",), settle=Replay())(_charge),
            tool(key_arguments=("order_id",), settle=Replay(attempts=5))(_charge),
            tool(key_arguments=("order_id",), settle=Probe(_lookup))(_charge),
            tool(key_arguments=("order_id",), settle=Probe(_lookup, True))(_charge),
        )
    }
    assert len(revisions) == 5


def test_a_declared_probe_is_described_in_the_revision_by_its_declaration() -> None:
    spec = SettleSpec.model_validate({"probe": PROBE})
    settlement = spec.settlement(_lookup)
    assert isinstance(settlement, Probe)
    described = settlement.definition()
    assert described["probe"] == spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert settlement.needs_key
