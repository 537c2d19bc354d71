"""Spans for a run, its model calls and its tool calls; exported over OTLP only when asked for.

In process, a runner is handed a tracer from an SDK provider with the in-memory exporter. Across
processes, the CLI is run with ``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at a fake collector on
loopback that decodes what it is sent with OpenTelemetry's own protobuf types; and without the
variable, the SDK is not even imported.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import JsonValue

from agentrun._messages import Message
from agentrun.demo.booking import BOOKING, SCRIPT
from agentrun.runner._loop import AgentRunner
from agentrun.runner._providers.base import ModelReply, Provider, ProviderError
from agentrun.runner._providers.scripted import ScriptedProvider
from agentrun.stores._memory import MemoryBackend
from tests.runner.helpers import runner
from tests.support.cli import COMMAND, cli_env
from tests.support.otlp import Collector, collecting


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def _traced(
    memory: MemoryBackend, exporter: InMemorySpanExporter, provider: Provider
) -> AgentRunner:
    spans = TracerProvider()
    spans.add_span_processor(SimpleSpanProcessor(exporter))
    return runner(memory, provider, spans=spans.get_tracer("test"))


def _named(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name.startswith(prefix)]


async def test_a_run_its_model_calls_and_tool_calls_are_spans(
    memory: MemoryBackend, exporter: InMemorySpanExporter
) -> None:
    traced = _traced(memory, exporter, ScriptedProvider(SCRIPT))
    result = await traced.run(BOOKING, "Book Ada", tenant="acme", run_id="run-7")
    spans = exporter.get_finished_spans()

    (run,) = _named(spans, "invoke_agent")
    attributes = dict(run.attributes or {})
    assert run.name == "invoke_agent booking"
    assert attributes["agentrun.run.id"] == "run-7"
    assert attributes["agentrun.tenant"] == "acme"
    assert attributes["agentrun.fence"] == result.fence == 1
    assert attributes["agentrun.agent.revision"] == BOOKING.revision
    assert attributes["agentrun.run.status"] == "completed"
    assert attributes["gen_ai.usage.input_tokens"] == result.usage.input_tokens == 2490
    assert [
        (e.name, dict(e.attributes or {})["agentrun.checkpoint.boundary"]) for e in run.events
    ] == [("agentrun.checkpoint", b) for b in ["after_model_call", "after_tool_result"] * 3] + [
        ("agentrun.checkpoint", "after_model_call")
    ]

    models = _named(spans, "chat ")
    assert [dict(m.attributes or {})["gen_ai.usage.output_tokens"] for m in models] == [
        38,
        41,
        44,
        21,
    ]
    assert [dict(m.attributes or {})["agentrun.iteration"] for m in models] == [1, 2, 3, 4]
    tools = _named(spans, "execute_tool ")
    assert [
        (
            dict(t.attributes or {})["gen_ai.tool.name"],
            dict(t.attributes or {})["agentrun.tool.disposition"],
            dict(t.attributes or {})["agentrun.tool.keyed"],
        )
        for t in tools
    ] == [
        ("search_flights", "read_only", False),
        ("book_flight", "idempotent", True),
        ("notify_passenger", "side_effecting", False),
    ]
    assert all(span.parent is not None and span.parent.span_id == run.context.span_id
               for span in [*models, *tools])  # fmt: skip
    everything = json.dumps([dict(span.attributes or {}) for span in spans])
    assert "Ada" not in everything
    assert "+49" not in everything


async def test_a_model_call_that_fails_is_an_error_span(
    memory: MemoryBackend, exporter: InMemorySpanExporter
) -> None:
    class Failing:
        async def complete(
            self,
            *,
            model: str,
            messages: Sequence[Message],
            tools: Sequence[dict[str, JsonValue]],
        ) -> ModelReply:
            raise ProviderError("http://model", "answered 503: overloaded", status=503)

    traced = _traced(memory, exporter, Failing())
    with pytest.raises(ProviderError):
        await traced.run(BOOKING, "go", tenant="t", run_id="r")
    (model,) = _named(exporter.get_finished_spans(), "chat ")
    (run,) = _named(exporter.get_finished_spans(), "invoke_agent")
    assert model.status.status_code is StatusCode.ERROR
    assert run.status.status_code is StatusCode.ERROR
    assert [event.name for event in model.events] == ["exception"]


@pytest.fixture
def collector() -> Iterator[Collector]:
    with collecting() as collector:
        yield collector


def _run_booking(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, "run", "booking", "--input", "Book Ada", "--tenant", "acme", "--run-id", "r1"],
        env=cli_env(
            {
                **cli_env(),
                "AGENTRUN_STORE": f"sqlite:///{tmp_path / 'state.db'}",
                "AGENTRUN_DEMO_DIR": str(tmp_path),
                **env,
            }
        ),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_cli_exports_its_spans_when_an_otlp_endpoint_is_set(
    tmp_path: Path, collector: Collector
) -> None:
    done = _run_booking(
        tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, OTEL_SERVICE_NAME="agentrun-test"
    )
    assert done.returncode == 0, done.stderr
    spans = collector.spans()
    names = sorted(span.name for _, span in spans)
    assert names.count("chat scripted") == 4
    assert "invoke_agent booking" in names
    assert {"execute_tool search_flights", "execute_tool notify_passenger"} <= set(names)
    service = {
        attribute.value.string_value
        for resource, _ in spans
        for attribute in resource.attributes
        if attribute.key == "service.name"
    }
    assert service == {"agentrun-test"}


def test_without_an_endpoint_nothing_is_exported_and_the_sdk_is_not_loaded(
    tmp_path: Path,
) -> None:
    script = (
        "import sys\n"
        "sys.argv = ['agentrun', 'run', 'booking', '--input', 'Book Ada', '--tenant', 'acme',"
        " '--run-id', 'r1']\n"
        "from agentrun.cli.main import main\n"
        "code = main(sys.argv[1:])\n"
        "from opentelemetry import trace\n"
        "print(code, type(trace.get_tracer_provider()).__name__,"
        " 'opentelemetry.sdk' in sys.modules)\n"
    )
    env = {
        **cli_env(),
        "AGENTRUN_STORE": f"sqlite:///{tmp_path / 'state.db'}",
        "AGENTRUN_DEMO_DIR": str(tmp_path),
    }
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    done = subprocess.run(
        [COMMAND[0], "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0 ProxyTracerProvider False"
