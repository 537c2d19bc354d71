"""Both SDK-backed providers against the fake model server, through the vendors' real clients.

Each test runs once per provider (``kind``): the same script, served in OpenAI's chat-completions
format or Anthropic's Messages format. What is checked is what went over the wire and what came
back: ids as the endpoint sent them, usage, the key read at each request, retries that honour
``Retry-After`` and survive a dropped connection, and the one error a run stops with once the
retries are spent.
"""

from __future__ import annotations

from typing import Any

import pytest
from anthropic import AsyncAnthropic
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentrun._frontier import Boundary
from agentrun._messages import Message, ToolCall, Usage
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._pricing import ModelPrice, PriceTable
from agentrun.runner._providers.anthropic import AnthropicMessagesProvider
from agentrun.runner._providers.base import ProviderError
from agentrun.runner._results import RunStatus
from agentrun.runner._secrets import MappingSecrets, SecretReference
from agentrun.stores._memory import MemoryBackend
from agentrun.testing.model_server import Turn, serving
from tests.runner.helpers import KeptSecrets, Probe, runner, tool_results
from tests.runner.models import Kind, by_the_sdk_method, path, provider

CONVERSATION = (Message.of("system", "Be brief."), Message.of("user", "book LH1172"))
SCHEMA = Probe("act").tool().schema()
ACT = Turn("Booking.", (("act", {"item": "LH1172"}),), input_tokens=57, output_tokens=9)
DONE = Turn("Booked.", input_tokens=60, output_tokens=3)
FIRST_ID = {"openai": "call_0_0", "anthropic": "toolu_0_0"}


async def test_tool_calls_usage_tools_and_key_go_over_the_wire(kind: Kind) -> None:
    with serving([ACT]) as server:
        asked = provider(kind, server)
        reply = await asked.complete(model="gpt-x", messages=CONVERSATION, tools=[SCHEMA])

    assert reply.text == "Booking."
    assert reply.tool_calls == (
        ToolCall(id=FIRST_ID[kind], name="act", arguments={"item": "LH1172"}),
    )
    assert reply.usage == Usage(input_tokens=57, output_tokens=9)
    (sent,) = server.seen
    assert sent.path == path(kind)
    assert sent.headers["Authorization"] == "Bearer sk-test-key"
    assert sent.body["model"] == "gpt-x"
    if kind == "openai":
        assert sent.body["messages"] == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "book LH1172"},
        ]
        assert sent.body["tools"] == [{"type": "function", "function": SCHEMA}]
    else:
        assert sent.body["system"] == "Be brief."
        assert sent.body["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "book LH1172"}]}
        ]
        assert sent.body["tools"] == [
            {
                "name": "act",
                "description": SCHEMA["description"],
                "input_schema": SCHEMA["parameters"],
            }
        ]


# Set by the SDK per attempt, or by the server's side of the connection.
PER_ATTEMPT = {"x-stainless-retry-count", "x-stainless-read-timeout", "traceparent"}


def _lasting(headers: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items() if k.lower() not in PER_ATTEMPT}


async def test_the_request_is_the_one_the_sdks_own_method_sends(kind: Kind) -> None:
    with serving([ACT, ACT]) as server:
        asked = provider(kind, server)
        await asked.complete(model="gpt-x", messages=CONVERSATION, tools=[SCHEMA])
        await by_the_sdk_method(asked, server.seen[0].body, "sk-test-key")
    ours, theirs = server.seen
    assert ours.path == theirs.path == path(kind)
    assert ours.body == theirs.body
    assert _lasting(ours.headers) == _lasting(theirs.headers)
    if kind == "anthropic":
        assert ours.headers["anthropic-version"]  # the API version the SDK speaks


async def test_a_call_makes_no_copy_of_the_sdk_client(
    kind: Kind, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy (``with_options``) builds a whole client: the CPU of a model call, not its work."""
    with serving([DONE]) as server:
        asked = provider(kind, server)

        def copied(**_: object) -> None:
            raise AssertionError("the SDK client was copied for a call")

        monkeypatch.setattr(asked.client, "copy", copied)
        monkeypatch.setattr(asked.client, "with_options", copied)
        reply = await asked.complete(model="m", messages=CONVERSATION, tools=[])
    assert reply.text == "Booked."


class TracedAnthropic(AnthropicMessagesProvider):
    """The provider with its SDK client's spans going to ``exported``, as a traced replica's go to
    the global tracer provider."""

    exported = InMemorySpanExporter()

    def connect(self, **options: Any) -> AsyncAnthropic:
        traces = TracerProvider()
        traces.add_span_processor(SimpleSpanProcessor(self.exported))
        return super().connect(**options, open_telemetry={"tracer_provider": traces})


async def test_a_traced_anthropic_call_has_the_sdks_span_and_sends_its_context() -> None:
    with serving([DONE, DONE]) as server:
        asked = TracedAnthropic(server.anthropic_url, api_key="sk-test-key")
        await asked.complete(model="m", messages=CONVERSATION, tools=[])
        await by_the_sdk_method(asked, server.seen[0].body, "sk-test-key")
    ours, theirs = TracedAnthropic.exported.get_finished_spans()
    assert ours.name == theirs.name == "anthropic.messages.create"
    assert ours.attributes == theirs.attributes
    assert [seen.headers["traceparent"].split("-")[1] for seen in server.seen] == [
        f"{ours.context.trace_id:032x}",
        f"{theirs.context.trace_id:032x}",
    ]


async def test_without_a_key_no_authorization_is_sent(kind: Kind) -> None:
    with serving([DONE]) as server:
        await provider(kind, server, api_key=None).complete(
            model="m", messages=CONVERSATION, tools=[]
        )
    (sent,) = server.seen
    assert "Authorization" not in sent.headers
    assert "X-Api-Key" not in sent.headers
    assert "tools" not in sent.body


async def test_the_key_is_read_from_its_secret_at_each_request(kind: Kind) -> None:
    values = {"model-keys/token": "first-value"}
    reference = SecretReference.to("model-keys", "token")
    with serving([DONE]) as server:
        asked = provider(kind, server, api_key=reference, secrets=MappingSecrets(values))
        await asked.complete(model="m", messages=CONVERSATION, tools=[])
        values["model-keys/token"] = "rotated-value"
        await asked.complete(model="m", messages=CONVERSATION, tools=[])
    assert [sent.headers["Authorization"] for sent in server.seen] == [
        "Bearer first-value",
        "Bearer rotated-value",
    ]


async def test_a_429_is_asked_again_after_the_retry_after_it_gave(kind: Kind) -> None:
    with serving([DONE]) as server:
        server.fail(429, retry_after=1.2)
        reply = await provider(kind, server).complete(model="m", messages=CONVERSATION, tools=[])
    assert reply.text == "Booked."
    first, second = server.seen
    # Without Retry-After the SDKs wait at most 0.5 s before the first retry.
    assert second.at - first.at >= 1.15


async def test_a_dropped_connection_is_asked_again(kind: Kind) -> None:
    with serving([DONE]) as server:
        server.drop()
        reply = await provider(kind, server).complete(model="m", messages=CONVERSATION, tools=[])
    assert reply.text == "Booked."
    assert len(server.seen) == 2


async def test_a_refused_key_is_not_asked_again(kind: Kind) -> None:
    with serving([DONE]) as server:
        server.fail(401, message="invalid key; check it")
        with pytest.raises(ProviderError, match="answered 401: invalid key; check it") as failed:
            await provider(kind, server).complete(model="m", messages=CONVERSATION, tools=[])
    assert len(server.seen) == 1
    assert (failed.value.status, failed.value.attempts) == (401, 1)


@pytest.mark.parametrize(("status", "told"), [(401, True), (403, True), (400, False)])
async def test_a_refused_key_is_read_afresh_next_time(kind: Kind, status: int, told: bool) -> None:
    secrets = KeptSecrets({"model-keys/token": "old-value"})
    reference = SecretReference.to("model-keys", "token")
    with serving([DONE]) as server:
        server.fail(status)
        with pytest.raises(ProviderError, match=f"answered {status}"):
            await provider(kind, server, api_key=reference, secrets=secrets).complete(
                model="m", messages=CONVERSATION, tools=[]
            )
    assert secrets.refusals == (["model-keys/token"] if told else [])


async def test_a_reply_nobody_can_read_is_a_provider_error(kind: Kind) -> None:
    with serving([DONE]) as server:
        server.garble()
        with pytest.raises(ProviderError, match="sent a reply this provider cannot read"):
            await provider(kind, server).complete(model="m", messages=CONVERSATION, tools=[])


async def test_ids_are_passed_on_as_the_endpoint_sent_them_even_reused(kind: Kind) -> None:
    with serving([ACT, ACT], reuse_ids=True) as server:
        asked = provider(kind, server)
        first = await asked.complete(model="m", messages=CONVERSATION, tools=[SCHEMA])
        later = (*CONVERSATION, Message(role="assistant", tool_calls=first.tool_calls))
        second = await asked.complete(model="m", messages=later, tools=[SCHEMA])
    reused = FIRST_ID[kind].replace("_0_0", "_0")
    assert [c.id for c in first.tool_calls] == [c.id for c in second.tool_calls] == [reused]


def _agent() -> tuple[AgentDefinition, Probe, PriceTable]:
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
    return defined, probe, prices


async def test_an_agent_runs_end_to_end_through_the_wire(kind: Kind, memory: MemoryBackend) -> None:
    defined, probe, prices = _agent()
    with serving([ACT, DONE]) as server:
        result = await runner(memory, provider(kind, server), prices=prices).run(
            defined, "book LH1172", tenant="t", run_id="r"
        )

    assert result.status is RunStatus.COMPLETED
    assert result.output == "Booked."
    assert probe.calls == ["LH1172"]
    assert result.usage == Usage(input_tokens=117, output_tokens=12)
    assert result.cost_micros == 57 + 18 + 60 + 6 == await memory.ledger.spent("t", "r")
    call_id = FIRST_ID[kind]
    second = server.seen[1].body["messages"]
    if kind == "openai":
        assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
        assert second[2]["tool_calls"][0]["id"] == call_id
        assert second[2]["tool_calls"][0]["function"] == {
            "name": "act",
            "arguments": '{"item": "LH1172"}',
        }
        assert second[3] == {"role": "tool", "content": "act did LH1172", "tool_call_id": call_id}
    else:
        assert [m["role"] for m in second] == ["user", "assistant", "user"]
        assert second[1]["content"][1] == {
            "type": "tool_use",
            "id": call_id,
            "name": "act",
            "input": {"item": "LH1172"},
        }
        assert second[2]["content"] == [
            {"type": "tool_result", "tool_use_id": call_id, "content": "act did LH1172"}
        ]


async def test_the_results_of_one_turn_go_back_to_anthropic_as_one_user_turn() -> None:
    both = Turn("Two.", (("act", {"item": "a"}), ("act", {"item": "b"})))
    with serving([both, DONE]) as server:
        defined, _, prices = _agent()
        await runner(MemoryBackend(), provider("anthropic", server), prices=prices).run(
            defined, "go", tenant="t", run_id="r"
        )
    second = server.seen[1].body["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert [block["tool_use_id"] for block in second[2]["content"]] == ["toolu_0_0", "toolu_0_1"]


async def test_when_retries_run_out_the_run_stops_with_the_endpoints_message_and_resumes_later(
    kind: Kind, memory: MemoryBackend
) -> None:
    with serving([ACT, DONE]) as server:

        async def then_the_endpoint_is_overloaded(item: str) -> None:
            server.fail(503, times=3, message="overloaded, try later")

        probe = Probe("act", during=then_the_endpoint_is_overloaded)
        defined = AgentDefinition(
            name="wired", instructions="Book it.", model="local-model", tools=(probe.tool(),)
        )
        _, _, prices = _agent()
        asked = provider(kind, server, max_retries=2)
        with pytest.raises(ProviderError) as failed:
            await runner(memory, asked, prices=prices).run(defined, "book", tenant="t", run_id="r")
        error = failed.value
        assert error.retryable  # busy: the operator carries the run on after a pause
        assert (error.status, error.attempts) == (503, 3)
        assert len(server.seen) == 1 + 3
        assert "answered 503: overloaded, try later (after 3 attempts)" in str(error)
        assert "resume it once the endpoint answers" in str(error)
        latest = await runner(memory, asked).checkpoints.latest("t", "r")
        assert latest is not None
        assert latest.boundary is Boundary.AFTER_TOOL_RESULT
        # The endpoint answers again: a resume finishes the run without making the call again.
        result = await runner(memory, asked, prices=prices, holder="worker-b").resume(
            defined, "r", tenant="t"
        )
    assert result.status is RunStatus.COMPLETED
    assert probe.calls == ["LH1172"]
    assert tool_results(result.messages)[FIRST_ID[kind]] == "act did LH1172"


async def test_an_attempt_that_takes_too_long_is_timed_out_and_tried_again(kind: Kind) -> None:
    with serving([DONE], delay=2.0) as server:
        asked = provider(kind, server, timeout_seconds=0.3, max_retries=1)
        with pytest.raises(ProviderError, match=r"could not be asked \(.*Timeout") as failed:
            await asked.complete(model="m", messages=CONVERSATION, tools=[])
    assert failed.value.attempts == 2
    assert len(server.seen) == 2
