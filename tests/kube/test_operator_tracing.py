"""The operator exports its spans to a collector when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set.

The variables are the ones the chart's ``tracing`` values set. A real replica runs a run to its
end against the real API server; a fake collector on loopback decodes what it is sent with
OpenTelemetry's protobuf types. The spans must carry what an on-call engineer looks a run up by:
its id (the AgentRun's uid), its tenant, the fence of the attempt, each tool call's disposition.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.agentruns import apply_run, get_run, wait_until_completed
from tests.support.kube import Kube
from tests.support.operator import Operators, operator_pool, wait_for
from tests.support.otlp import Collector, attributes, collecting
from tests.support.redis_server import RedisServer


@pytest.fixture(scope="module")
def collector() -> Iterator[Collector]:
    with collecting() as collector:
        yield collector


@pytest.fixture(scope="module")
def traced(
    kube: Kube,
    redis: RedisServer,
    effects: Path,
    collector: Collector,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Operators]:
    """One replica exporting its spans, with the chart's variables (and a short batch delay)."""
    pool = operator_pool(
        kube,
        redis,
        effects,
        tmp_path_factory,
        OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
        OTEL_SERVICE_NAME="agentrun-operator",
        OTEL_TRACES_SAMPLER="parentbased_traceidratio",
        OTEL_TRACES_SAMPLER_ARG="1",
        OTEL_BSP_SCHEDULE_DELAY="200",
    )
    pool.start("replica-a")
    try:
        yield pool
    finally:
        pool.stop_all()


def test_a_runs_spans_reach_the_collector_with_its_id_fence_and_dispositions(
    kube: Kube, traced: Operators, collector: Collector
) -> None:
    apply_run(kube, "traced", "texter")
    wait_until_completed(kube, "traced", traced.logs)
    run = get_run(kube, "traced")
    uid = run["metadata"]["uid"]

    def of_the_run() -> list[dict[str, str | int | bool]]:
        return [
            attributes(span) | {"name": span.name}
            for _, span in collector.spans()
            if attributes(span).get("agentrun.run.id") == uid
        ]

    wait_for("the run's span to be exported", lambda: any(
        s["name"] == "invoke_agent texter" for s in of_the_run()), 30, traced.logs)  # fmt: skip
    spans = of_the_run()
    (invoke,) = [s for s in spans if s["name"] == "invoke_agent texter"]
    assert invoke["agentrun.tenant"] == kube.namespace
    assert invoke["agentrun.fence"] == run["status"]["lease"]["fence"] >= 1
    assert invoke["agentrun.run.status"] == "completed"
    (tool,) = [s for s in spans if s["name"] == "execute_tool send_sms"]
    assert tool["agentrun.tool.disposition"] == "side_effecting"
    assert tool["agentrun.fence"] == invoke["agentrun.fence"]
    assert len([s for s in spans if str(s["name"]).startswith("chat ")]) == 2
    # One trace an attempt: the operator's attempt span (its lease, its status) is the run
    # span's parent, and its trace id is the one the status names, for a person to look up.
    raw = [span for _, span in collector.spans() if attributes(span).get("agentrun.run.id") == uid]
    (attempt,) = [span for span in raw if span.name == f"attempt {kube.namespace}/traced"]
    (run_span,) = [span for span in raw if span.name == "invoke_agent texter"]
    assert run_span.parent_span_id == attempt.span_id
    assert run_span.trace_id == attempt.trace_id
    assert run["status"]["traceId"] == attempt.trace_id.hex()
    services = {attributes(resource).get("service.name") for resource, _ in collector.spans()}
    assert services == {"agentrun-operator"}
