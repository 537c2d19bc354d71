"""A fake OpenTelemetry collector on loopback: OTLP/HTTP ``POST /v1/traces``, decoded with
OpenTelemetry's own protobuf types, so a test sees the spans exactly as a collector would."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from agentrun.testing.model_server import run_in_thread


@dataclass
class Collector:
    url: str = ""
    received: list[ExportTraceServiceRequest] = field(default_factory=list)

    def spans(self) -> list[tuple[Resource, Span]]:
        """Every span received so far, with the resource (the service) it came from."""
        return [
            (resource.resource, span)
            for request in list(self.received)
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]


def attributes(span: Span | Resource) -> dict[str, str | int | bool]:
    """A span's (or resource's) attributes as plain values."""
    return {attribute.key: _plain(attribute.value) for attribute in span.attributes}


def _plain(value: AnyValue) -> str | int | bool:
    kind = value.WhichOneof("value")
    if kind == "int_value":
        return value.int_value
    if kind == "bool_value":
        return value.bool_value
    return value.string_value


@contextmanager
def collecting() -> Iterator[Collector]:
    """A collector answering on a free loopback port (``url``) until the block ends."""
    collector = Collector()

    async def traces(request: web.Request) -> web.Response:
        collector.received.append(ExportTraceServiceRequest.FromString(await request.read()))
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/v1/traces", traces)
    with run_in_thread(app, "collector") as url:
        collector.url = url
        yield collector
