"""A declared agent end to end: the booking run against the fake model server (OpenAI's format,
then Anthropic's) and the real MCP server, on an SQLite store, as the CLI and the operator run
one (``AgentRunner.on_backend``).

And the promise about secrets, tested the hostile way: after a whole run, every row of every
table of the store, every log record and every span attribute is searched for the model's key
and the MCP server's token. The values are chosen so that no redaction pattern recognises them:
what keeps them out is construction (they are read at each request and never handed to anything
that persists), not the masking behind it.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentrun import Backend, open_backend
from agentrun._leases import LeasePolicy
from agentrun._redaction import Redactor
from agentrun.demo.declared import AIRLINE_TOKEN, MODEL_KEY, TURNS, booking_spec
from agentrun.runner._declared import DeclaredAgent
from agentrun.runner._loop import AgentRunner
from agentrun.runner._results import RunStatus
from agentrun.runner._secrets import MappingSecrets
from agentrun.runner._tools import Disposition
from agentrun.testing.mcp_server import McpBooks
from agentrun.testing.model_server import ModelServer, serving
from tests.runner.models import Kind

KEY_VALUE = "model-key-for-loopback-7781"
TOKEN_VALUE = "airline-token-for-loopback-3392"
SECRETS = MappingSecrets({"/".join(MODEL_KEY): KEY_VALUE, "/".join(AIRLINE_TOKEN): TOKEN_VALUE})


@pytest.fixture
def models() -> Iterator[ModelServer]:
    with serving(TURNS) as server:
        yield server


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Backend]:
    backend = await open_backend(f"sqlite:///{tmp_path / 'state.db'}")
    yield backend
    await backend.close()


async def _declared(kind: Kind, models: ModelServer, airline: McpBooks) -> DeclaredAgent:
    url = models.openai_url if kind == "openai" else models.anthropic_url
    spec = booking_spec(provider=kind, model_url=url, mcp_url=airline.url)
    return await DeclaredAgent.build("booking-declared", spec, secrets=SECRETS)


def _runner(store: Backend, declared: DeclaredAgent, spans: TracerProvider) -> AgentRunner:
    return AgentRunner.on_backend(
        store,
        declared.registered(),
        lease_policy=LeasePolicy(ttl=10.0, renew_within=3.0),
        holder="worker-a",
        spans=spans.get_tracer("test"),
    )


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def test_the_secret_values_are_ones_no_pattern_would_mask() -> None:
    redactor = Redactor.build()
    assert redactor.mask(KEY_VALUE) == KEY_VALUE
    assert redactor.mask(TOKEN_VALUE) == TOKEN_VALUE


async def test_the_booking_run_end_to_end_and_no_secret_anywhere(
    kind: Kind,
    models: ModelServer,
    airline: McpBooks,
    store: Backend,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    exporter = InMemorySpanExporter()
    spans = TracerProvider()
    spans.add_span_processor(SimpleSpanProcessor(exporter))
    declared = await _declared(kind, models, airline)
    try:
        assert {found.name: found.disposition for found in declared.discovered} == {
            "search_flights": Disposition.READ_ONLY,
            "book_flight": Disposition.IDEMPOTENT,
            "charge_card": Disposition.SIDE_EFFECTING,
            "send_sms": Disposition.SIDE_EFFECTING,
        }
        result = await _runner(store, declared, spans).run(
            declared.definition, "Book Ada to Lisbon", tenant="acme", run_id="run-1"
        )
    finally:
        await declared.aclose()

    assert result.status is RunStatus.COMPLETED
    assert result.output == TURNS[-1].text
    assert [call.tool for call in airline.calls] == [
        "search_flights",
        "book_flight",
        "charge_card",
        "send_sms",
    ]
    assert airline.charges == [("o-1", 42000)]
    assert result.cost_micros == 5 * (100 + 40) == await store.ledger.spent("acme", "run-1")
    # The secrets did go where they were meant to ...
    assert {sent.headers["Authorization"] for sent in models.seen} == {f"Bearer {KEY_VALUE}"}
    assert {call.headers["authorization"] for call in airline.calls} == {f"Bearer {TOKEN_VALUE}"}
    # ... and nowhere else: not in any row of any table of the store,
    with sqlite3.connect(tmp_path / "state.db") as database:
        tables = [
            row[0] for row in database.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        assert {"agentrun_checkpoints", "agentrun_idempotency", "agentrun_history"} <= set(tables)
        rows = [
            " ".join(_text(value) for value in row)
            for table in tables
            for row in database.execute(f'SELECT * FROM "{table}"')
        ]
    assert len(rows) > 10
    # not in any log record (at every level),
    logged = [record.getMessage() for record in caplog.records]
    # nor in any span's name, attributes or events.
    traced = [
        repr(
            (
                span.name,
                dict(span.attributes or {}),
                [dict(e.attributes or {}) for e in span.events],
            )
        )
        for span in exporter.get_finished_spans()
    ]
    assert len(traced) == 1 + 5 + 4
    for secret in (KEY_VALUE, TOKEN_VALUE):
        for where, found in (("store", rows), ("log", logged), ("trace", traced)):
            assert not [text for text in found if secret in text], f"{secret} in the {where}"
