"""``OpenAIChatProvider`` over HTTP against a local endpoint that speaks chat completions."""

from __future__ import annotations

import socket

import pytest

from agentrun.messages import Message, ToolCall, Usage
from agentrun.outcomes import Outcome
from agentrun.runner.agents import AgentDefinition
from agentrun.runner.pricing import ModelPrice, PriceTable
from agentrun.runner.providers.base import ProviderError
from agentrun.runner.providers.openai import OpenAIChatProvider
from agentrun.runner.results import RunStatus
from agentrun.stores.memory import MemoryBackend
from tests.runner.helpers import Probe, runner
from tests.runner.wire import chat_reply, endpoint

CONVERSATION = (Message.of("system", "Be brief."), Message.of("user", "book LH1172"))
SCHEMA = Probe("act").tool().schema()


async def test_tool_calls_usage_tools_and_key_go_over_the_wire() -> None:
    with endpoint() as server:
        server.answer(
            200,
            chat_reply(
                calls=[("call_abc", "act", {"item": "LH1172"})],
                prompt_tokens=57,
                completion_tokens=9,
            ),
        )
        provider = OpenAIChatProvider(server.url + "/v1/", api_key="sk-test-key")
        reply = await provider.complete(model="gpt-x", messages=CONVERSATION, tools=[SCHEMA])

    assert reply.text == ""
    assert reply.tool_calls == (ToolCall(id="call_abc", name="act", arguments={"item": "LH1172"}),)
    assert reply.usage == Usage(input_tokens=57, output_tokens=9)
    (sent,) = server.received
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["Authorization"] == "Bearer sk-test-key"
    assert sent.headers["Content-Type"] == "application/json"
    body = sent.json()
    assert body["model"] == "gpt-x"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "book LH1172"},
    ]
    assert body["tools"] == [{"type": "function", "function": SCHEMA}]


async def test_no_key_no_tools_plain_text() -> None:
    with endpoint() as server:
        server.answer(200, chat_reply("hello", prompt_tokens=3, completion_tokens=1))
        reply = await OpenAIChatProvider(server.url).complete(
            model="m", messages=CONVERSATION, tools=[]
        )
    assert (reply.text, reply.tool_calls) == ("hello", ())
    (sent,) = server.received
    assert "Authorization" not in sent.headers
    assert "tools" not in sent.json()


@pytest.mark.parametrize(
    ("status", "body", "says", "outcome"),
    [
        (500, {"error": {"message": "overloaded"}}, "answered 500", Outcome.PROVIDER_UNAVAILABLE),
        (429, {"error": {"message": "slow down"}}, "answered 429", Outcome.PROVIDER_UNAVAILABLE),
        (401, {"error": {"message": "bad key"}}, "answered 401", Outcome.REFUSED),
        (200, b"<html>gateway timeout</html>", "not JSON", Outcome.REFUSED),
        (200, {"choices": []}, "cannot read", Outcome.REFUSED),
        (
            200,
            {"choices": [{"message": {"tool_calls": [{"id": "x"}]}}]},
            "cannot read",
            Outcome.REFUSED,
        ),
    ],
    ids=["500", "429", "401", "garbage", "no-choices", "broken-call"],
)
async def test_a_bad_answer_is_a_provider_error_that_says_whether_to_retry(
    status: int, body: object, says: str, outcome: Outcome
) -> None:
    """A busy or failing server is worth asking again; a refusal or an unreadable reply is not."""
    with endpoint() as server:
        server.answer(status, body)
        with pytest.raises(ProviderError, match=says) as raised:
            await OpenAIChatProvider(server.url).complete(
                model="m", messages=CONVERSATION, tools=[]
            )
    assert raised.value.outcome is outcome
    assert raised.value.retryable is outcome.retryable


async def test_an_unreachable_server_is_a_provider_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ProviderError, match="could not be asked") as raised:
        await OpenAIChatProvider(f"http://127.0.0.1:{port}", timeout=2).complete(
            model="m", messages=CONVERSATION, tools=[]
        )
    assert raised.value.outcome is Outcome.PROVIDER_UNAVAILABLE


async def test_an_agent_runs_end_to_end_through_the_wire(memory: MemoryBackend) -> None:
    probe = Probe("act")
    defined = AgentDefinition(
        name="wired", instructions="Book it.", model="local-model", tools=(probe.tool(),)
    )
    prices = PriceTable(
        prices={
            "local-model": ModelPrice(
                input_micros_per_million=1_000_000, output_micros_per_million=2_000_000
            )
        }
    )
    with endpoint() as server:
        server.answer(
            200,
            chat_reply(
                "Booking.",
                [("call_1", "act", {"item": "LH1172"})],
                prompt_tokens=40,
                completion_tokens=5,
            ),
        )
        server.answer(200, chat_reply("Booked.", prompt_tokens=60, completion_tokens=3))
        provider = OpenAIChatProvider(server.url + "/v1", api_key="k")
        result = await runner(memory, provider, prices=prices).run(
            defined, "book LH1172", tenant="t", run_id="r"
        )

    assert result.status is RunStatus.COMPLETED
    assert result.output == "Booked."
    assert probe.calls == ["LH1172"]
    assert result.usage == Usage(input_tokens=100, output_tokens=8)
    assert result.cost_micros == 40 + 10 + 60 + 6 == await memory.ledger.spent("t", "r")
    second = server.received[1].json()["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    assert second[2]["tool_calls"][0]["id"] == "call_1"
    assert second[2]["tool_calls"][0]["function"] == {
        "name": "act",
        "arguments": '{"item": "LH1172"}',
    }
    assert second[3] == {"role": "tool", "content": "act did LH1172", "tool_call_id": "call_1"}
