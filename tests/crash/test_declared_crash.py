"""SIGKILL a worker while the MCP server holds one of its calls, then resume in a new process.

The declared booking agent talks to the fake model server and the real MCP server, both in this
test process; the worker is a real process on a real SQLite store. The MCP server lets the held
call act and then waits, which is the moment the worker dies: the call reached the tool, its
answer never reached the worker. What the resume does with it depends on what the server's
annotations say the tool is:

* ``charge_card`` (destructiveHint): indeterminate, naming the call; the card is not charged
  again;
* ``search_flights`` (readOnlyHint): simply made again, and the run finishes;
* ``book_flight`` (idempotentHint, keyed): made again with the same key, so the airline keeps one
  booking.

Each test drives the demo's own ``scenario`` and searches all it printed (the new worker's report
among it, an undecidable call's message included), the new worker's stderr and every file of the
store for the model's key and the airline's token, which the workers did send to the servers.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentrun._redaction import Redactor
from agentrun.demo.declared import MODEL_KEY, TURNS
from agentrun.demo.declared_crash import scenario
from agentrun.demo.declared_worker import SECRET_VALUES
from agentrun.testing.mcp_server import McpBooks
from agentrun.testing.mcp_server import serving as mcp_serving
from agentrun.testing.model_server import ModelServer, serving


@pytest.fixture
def servers() -> Iterator[tuple[ModelServer, McpBooks]]:
    with serving(TURNS) as models, mcp_serving() as airline:
        yield models, airline


def _scenario_keeping_secrets(
    tmp_path: Path,
    servers: tuple[ModelServer, McpBooks],
    capsys: pytest.CaptureFixture[str],
    tool: str,
) -> subprocess.CompletedProcess[str]:
    """The demo's scenario killed in ``tool``; fails if a secret is in anything it left."""
    models, airline = servers
    resumed = scenario(f"sqlite:///{tmp_path}/state.db", models, airline, tool)
    printed = capsys.readouterr().out
    assert resumed.stdout.strip() in printed  # the worker's report is part of the demo's output
    sent = {seen.headers.get("Authorization") for seen in models.seen}
    assert sent == {f"Bearer {SECRET_VALUES['/'.join(MODEL_KEY)]}"}  # the key was in use
    left = {"the demo's stdout": printed, "the worker's stderr": resumed.stderr}
    for path in tmp_path.iterdir():
        left[f"the store's {path.name}"] = path.read_bytes().decode("utf-8", "replace")
    for secret in SECRET_VALUES.values():
        assert [where for where, text in left.items() if secret in text] == []
    return resumed


def test_the_secret_values_are_ones_no_pattern_would_mask() -> None:
    redactor = Redactor.build()
    assert all(redactor.mask(value) == value for value in SECRET_VALUES.values())


def test_killed_in_a_destructive_call_the_resume_is_indeterminate_naming_it(
    tmp_path: Path, servers: tuple[ModelServer, McpBooks], capsys: pytest.CaptureFixture[str]
) -> None:
    _, airline = servers
    resumed = _scenario_keeping_secrets(tmp_path, servers, capsys, "charge_card")
    assert resumed.returncode == 4, resumed.stdout + resumed.stderr
    said = json.loads(resumed.stdout)
    assert said["indeterminate"] == ["call_2_0"]
    assert "charge_card (call call_2_0)" in said["message"]
    assert len(airline.made("charge_card")) == 1
    assert airline.charges == [("o-1", 42000)]


def test_killed_in_a_read_only_call_the_resume_simply_makes_it_again(
    tmp_path: Path, servers: tuple[ModelServer, McpBooks], capsys: pytest.CaptureFixture[str]
) -> None:
    _, airline = servers
    resumed = _scenario_keeping_secrets(tmp_path, servers, capsys, "search_flights")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "completed"
    assert [len(airline.made(tool)) for tool in ("search_flights", "book_flight")] == [2, 1]
    assert airline.charges == [("o-1", 42000)]
    assert len(airline.texts) == 1


def test_killed_in_an_idempotent_call_the_resume_makes_it_again_with_the_same_key(
    tmp_path: Path, servers: tuple[ModelServer, McpBooks], capsys: pytest.CaptureFixture[str]
) -> None:
    _, airline = servers
    resumed = _scenario_keeping_secrets(tmp_path, servers, capsys, "book_flight")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    first, second = airline.made("book_flight")
    assert first.key is not None
    assert first.key == second.key
    assert len(airline.bookings) == 1
    assert airline.charges == [("o-1", 42000)]
