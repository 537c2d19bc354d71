"""Spans for a run, each model call and each tool call, through the OpenTelemetry API.

The loop only ever talks to the API. Until an SDK is installed as the global tracer provider the
API's tracer does nothing, so a run that nobody traces pays a few function calls per step.
``export_if_configured`` installs the SDK with an OTLP exporter when
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or its traces-only twin) is set — the standard variables, so a
collector is pointed at the usual way — and does nothing otherwise; the SDK and exporter are the
``otlp`` extra and are not imported unless it is asked for.

What spans carry: identities (run id, tenant, fence, agent and revision), the boundary of every
checkpoint (an event on the run's span), each tool call's name, id and disposition, and token
usage. Never arguments, results, messages or headers: they may hold what a user or a secret
wrote, and a trace backend is not a place that masks.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager

from opentelemetry import trace
from opentelemetry.trace import Span, Tracer

from agentrun._errors import ConfigurationError
from agentrun._frontier import Boundary
from agentrun._messages import Usage

TRACER_NAME = "agentrun"
SERVICE_NAME = "agentrun"

# Attribute names: the GenAI semantic conventions where they have one, ours under agentrun.*.
RUN_ID = "agentrun.run.id"
TENANT = "agentrun.tenant"
FENCE = "agentrun.fence"
RESUMED = "agentrun.run.resumed"
STATUS = "agentrun.run.status"
REVISION = "agentrun.agent.revision"
ITERATION = "agentrun.iteration"
BOUNDARY = "agentrun.checkpoint.boundary"
WRITTEN = "agentrun.checkpoint.written"
DISPOSITION = "agentrun.tool.disposition"
KEYED = "agentrun.tool.keyed"
OPERATION = "gen_ai.operation.name"
AGENT = "gen_ai.agent.name"
MODEL = "gen_ai.request.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL = "gen_ai.tool.name"
CALL_ID = "gen_ai.tool.call.id"
CHECKPOINT_EVENT = "agentrun.checkpoint"


Attributes = dict[str, str | int | bool]


def tracer() -> Tracer:
    """The kit's tracer from the global provider (a no-op one until an SDK is installed)."""
    return trace.get_tracer(TRACER_NAME)


def attempt_span(
    spans: Tracer, *, name: str, run_id: str, tenant: str
) -> AbstractContextManager[Span]:
    """A front end's attempt at a run (the operator's worker taking its lease, writing its
    status, then the runner's ``run_span`` inside it), so everything the attempt does is one
    trace, whose id the front end can show before the run's own span starts."""
    # An exception's message can carry what a tool or a person wrote: not recorded, as no
    # message is (see the module's docstring); how the run stopped is its own span's to say.
    return spans.start_as_current_span(
        f"attempt {name}",
        attributes={RUN_ID: run_id, TENANT: tenant},
        record_exception=False,
        set_status_on_exception=False,
    )


def current_trace_id() -> str | None:
    """The id of the trace being recorded now (32 hex digits, as trace backends show it), or
    None when nothing is traced or the trace is not sampled (it would be found nowhere)."""
    context = trace.get_current_span().get_span_context()
    if not context.is_valid or not context.trace_flags.sampled:
        return None
    return format(context.trace_id, "032x")


def run_span(
    spans: Tracer, *, agent: str, revision: str, run_id: str, tenant: str, fence: int,
    resumed: bool,
) -> AbstractContextManager[Span]:  # fmt: skip
    attributes: Attributes = {AGENT: agent, REVISION: revision, RESUMED: resumed}
    return _span(spans, f"invoke_agent {agent}", "invoke_agent", run_id, tenant, fence, attributes)


def model_span(
    spans: Tracer, *, model: str, run_id: str, tenant: str, fence: int, iteration: int
) -> AbstractContextManager[Span]:
    attributes: Attributes = {MODEL: model, ITERATION: iteration}
    return _span(spans, f"chat {model}", "chat", run_id, tenant, fence, attributes)


def tool_span(
    spans: Tracer, *, tool: str, call_id: str, disposition: str, keyed: bool, run_id: str,
    tenant: str, fence: int,
) -> AbstractContextManager[Span]:  # fmt: skip
    attributes: Attributes = {TOOL: tool, CALL_ID: call_id, DISPOSITION: disposition, KEYED: keyed}
    return _span(spans, f"execute_tool {tool}", "execute_tool", run_id, tenant, fence, attributes)


def _span(
    spans: Tracer, name: str, operation: str, run_id: str, tenant: str, fence: int,
    attributes: Attributes,
) -> AbstractContextManager[Span]:  # fmt: skip
    """A span in progress while the block runs; an exception leaving it is recorded on it."""
    return spans.start_as_current_span(
        name,
        attributes={
            OPERATION: operation,
            RUN_ID: run_id,
            TENANT: tenant,
            FENCE: fence,
            **attributes,
        },
    )


def record_usage(span: Span, usage: Usage) -> None:
    span.set_attribute(INPUT_TOKENS, usage.input_tokens)
    span.set_attribute(OUTPUT_TOKENS, usage.output_tokens)


def checkpoint_event(boundary: Boundary, *, written: bool, fence: int) -> None:
    """Mark a checkpoint on the span in progress (the run's)."""
    trace.get_current_span().add_event(
        CHECKPOINT_EVENT, {BOUNDARY: boundary.value, WRITTEN: written, FENCE: fence}
    )


ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def export_if_configured() -> bool:
    """Export spans over OTLP/HTTP when an endpoint is configured; whether it now does.

    The exporter reads the rest of its configuration (headers, timeout, protocol details) from
    the standard ``OTEL_EXPORTER_OTLP_*`` variables; ``OTEL_SERVICE_NAME`` names the service
    (``agentrun`` when unset).
    """
    if not any(os.environ.get(variable) for variable in ENDPOINT_VARIABLES):
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as error:
        raise ConfigurationError(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set, but the OpenTelemetry SDK and OTLP exporter are "
            f"not installed ({error}); install agentrun[otlp], or unset the variable"
        ) from error
    named = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": SERVICE_NAME}
    provider = TracerProvider(resource=Resource.create(named))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    return True
