"""A secret the model (or a tool) repeats is masked in everything the run writes and reports.

The model's key and an HTTP tool's token are values no redaction pattern recognises, one with a
quote and a backslash (so JSON writes it escaped). The model, an OpenAI-compatible server on
loopback driven by the real ``openai`` SDK, repeats them in its reply, in a tool call's
arguments and in its final answer; the tool's service sends the token back inside its JSON. Every
row of every table of the store, the result's output and every log record are searched for the
values as they are and as JSON writes them.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentrun import open_backend
from agentrun._checkpointing import Checkpointer
from agentrun._frontier import Boundary
from agentrun._leases import LeasePolicy
from agentrun._redaction import MASK, Redactor
from agentrun.runner._declared import DeclaredAgent
from agentrun.runner._loop import AgentRunner
from agentrun.runner._results import RunResult, RunStatus
from agentrun.runner._secrets import MappingSecrets
from agentrun.runner._spec import AgentSpec
from tests.runner.helpers import Boundaries, Crash
from tests.runner.wire import Endpoint, chat_reply, endpoint

KEY = "loopback-model-key-5521"
TOKEN = 'tool"token\\for-loopback-8830'
ROTATED = "rotated-tool-token-6604"


def _escaped(value: str) -> str:
    return json.dumps(value)[1:-1]


def _spec(model: Endpoint, service: Endpoint) -> AgentSpec:
    secret = {"valueFrom": {"secretKeyRef": {"name": "tool", "key": "token"}}}
    return AgentSpec.model_validate(
        {
            "model": {
                "provider": "openai",
                "name": "echo-model",
                "baseURL": f"{model.url}/v1",
                "apiKey": {"valueFrom": {"secretKeyRef": {"name": "model", "key": "key"}}},
                "maxRetries": 0,
                "price": {"inputMicrosPerMillion": 0, "outputMicrosPerMillion": 0},
            },
            "instructions": "Say what you were given.",
            "tools": {
                "http": [
                    {
                        "name": "note",
                        "url": f"{service.url}/notes",
                        "parameters": {
                            "type": "object",
                            "properties": {"text": {"type": "string"}},
                        },
                        "disposition": "side_effecting",
                        "headers": {"X-Token": secret},
                    }
                ]
            },
        }
    )


@pytest.fixture
def model() -> Iterator[Endpoint]:
    with endpoint() as server:
        yield server


@pytest.fixture
def service() -> Iterator[Endpoint]:
    with endpoint() as server:
        yield server


def _script(model: Endpoint, service: Endpoint, token: str) -> None:
    """The model repeats the key and the token; the service sends the token back in JSON."""
    model.answer(
        200,
        chat_reply(f"I was called with {KEY}.", [("call-1", "note", {"text": f"key {KEY}"})]),
    )
    service.answer(200, {"stored": True, "token": token, "key": KEY})
    model.answer(200, chat_reply(f"Done: the key is {KEY} and the token is {token}."))


async def _run(
    spec: AgentSpec,
    database: Path,
    values: dict[str, str],
    *,
    then: dict[str, str] | None = None,
    crash_at: tuple[Boundary, int] | None = None,
    resume: bool = False,
) -> RunResult:
    """A run of the agent, by a process of its own (the agent built afresh): ``then``, the
    values the secrets have once it is built; ``crash_at``, where the process dies; ``resume``,
    carry the run on rather than start it."""
    backend = await open_backend(f"sqlite:///{database}")
    declared = await DeclaredAgent.build("echo", spec, secrets=MappingSecrets(values))
    values.update(then or {})
    try:
        runner = AgentRunner.on_backend(
            backend,
            declared.registered(),
            lease_policy=LeasePolicy(ttl=10.0, renew_within=3.0),
            holder="worker-b" if resume else "worker-a",
            on_boundary=Boundaries(crash_at=crash_at),
        )
        if resume:
            return await runner.resume(declared.definition, "run-1", tenant="acme")
        return await runner.run(declared.definition, "Go", tenant="acme", run_id="run-1")
    finally:
        await declared.aclose()
        await backend.close()


async def _stored(database: Path) -> list[str]:
    """Every row of every table of the store as it is, and the run's transcript as it reads
    back (a segment may be compressed, which a search of the rows would not see into)."""
    backend = await open_backend(f"sqlite:///{database}")
    try:
        checkpoints = Checkpointer(backend.checkpoints, history=backend.history)
        checkpoint = await checkpoints.latest("acme", "run-1")
        assert checkpoint is not None
        messages = await checkpoints.transcript(checkpoint, backend.history)
    finally:
        await backend.close()
    return [*_rows(database), *(message.model_dump_json() for message in messages)]


def _rows(database: Path) -> list[str]:
    with sqlite3.connect(database) as connection:
        tables = [
            row[0]
            for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        ]
        return [
            " ".join(
                value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
                for value in row
            )
            for table in tables
            for row in connection.execute(f'SELECT * FROM "{table}"')
        ]


def _assert_nowhere(values: tuple[str, ...], **places: list[str]) -> None:
    for value in values:
        for form in {value, _escaped(value)}:
            for where, texts in places.items():
                assert not [text for text in texts if form in text], f"{form!r} in the {where}"


def test_the_values_are_ones_no_pattern_would_mask() -> None:
    redactor = Redactor.build()
    for value in (KEY, TOKEN, ROTATED, _escaped(TOKEN)):
        assert redactor.mask(value) == value


async def test_a_secret_the_model_echoes_is_masked_in_the_store_and_the_result(
    model: Endpoint, service: Endpoint, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    _script(model, service, TOKEN)
    values = {"model/key": KEY, "tool/token": TOKEN}

    result = await _run(_spec(model, service), tmp_path / "state.db", values)

    assert result.status is RunStatus.COMPLETED
    # The secrets went where they were meant to, and the model did repeat them ...
    assert [sent.headers["Authorization"] for sent in model.received] == [f"Bearer {KEY}"] * 2
    assert service.received[0].headers["X-Token"] == TOKEN
    assert service.received[0].json() == {"text": f"key {KEY}"}
    # ... and nothing the run wrote or reported holds them.
    rows = await _stored(tmp_path / "state.db")
    assert len(rows) > 3
    logged = [record.getMessage() for record in caplog.records]
    _assert_nowhere((KEY, TOKEN), store=rows, result=[result.output], log=logged)
    assert any(f"I was called with {MASK}." in row for row in rows)
    assert result.output == f"Done: the key is {MASK} and the token is {MASK}."


async def test_a_value_first_read_at_a_dispatch_is_masked_from_its_result_on(
    model: Endpoint, service: Endpoint, tmp_path: Path
) -> None:
    """The token is rotated after the agent was built (and read ahead): the new value is first
    read when the tool is called, and masked in its result and in the model's answer after."""
    _script(model, service, ROTATED)
    values = {"model/key": KEY, "tool/token": TOKEN}
    database = tmp_path / "state.db"

    result = await _run(_spec(model, service), database, values, then={"tool/token": ROTATED})

    assert result.status is RunStatus.COMPLETED
    assert service.received[0].headers["X-Token"] == ROTATED
    _assert_nowhere((KEY, ROTATED), store=await _stored(database), result=[result.output])
    assert result.output == f"Done: the key is {MASK} and the token is {MASK}."


async def test_a_resumed_run_masks_a_value_before_any_request_of_its_own_read_it(
    model: Endpoint, service: Endpoint, tmp_path: Path
) -> None:
    """The model's server is the tool's service too, and saw the token in the tool's request.
    The process dies after the tool's result; a fresh one builds the agent and carries the run
    on, and the model's first reply there says the token, before anything in that process
    called the tool: the agent read its secrets as it was built."""
    model.answer(200, chat_reply("Noting.", [("call-1", "note", {"text": "hello"})]))
    service.answer(200, {"stored": True})
    model.answer(200, chat_reply(f"The note tool's token is {TOKEN}."))
    values = {"model/key": KEY, "tool/token": TOKEN}
    spec, database = _spec(model, service), tmp_path / "state.db"
    with pytest.raises(Crash):
        await _run(spec, database, values, crash_at=(Boundary.AFTER_TOOL_RESULT, 1))

    result = await _run(spec, database, values, resume=True)

    assert result.status is RunStatus.COMPLETED
    assert len(service.received) == 1
    _assert_nowhere((TOKEN,), store=await _stored(database), result=[result.output])
    assert result.output == f"The note tool's token is {MASK}."
