"""Opening a SQLite backend: the URL, the folder, the schema and its version, a foreign file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentrun import open_backend
from agentrun._errors import ConfigurationError
from agentrun._storecore.checked import CheckedCheckpoints
from agentrun.stores._sqlite import EXPECTED_SQLITE_SCHEMA, SqliteCheckpointStore
from agentrun.stores._sqlite._database import DEFAULT_BUSY_TIMEOUT_MS, parse_url
from agentrun.stores._sqlite.schema import SCHEMA_VERSION, statements, verify

SCHEMA_FILE = (
    Path(__file__).parents[2] / "operator" / "agentrun" / "stores" / "schema" / "sqlite.sql"
)


def test_urls_name_relative_and_absolute_files() -> None:
    assert parse_url("sqlite:///./.agentrun/state.db") == (
        Path(".agentrun/state.db"),
        DEFAULT_BUSY_TIMEOUT_MS,
    )
    assert parse_url("sqlite:////var/lib/agentrun/state.db?busy_timeout=250") == (
        Path("/var/lib/agentrun/state.db"),
        250,
    )
    assert parse_url("sqlite:///with%20space.db")[0] == Path("with space.db")


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://host/state.db",
        "sqlite:///",
        "sqlite:///folder/",
        "sqlite:///state.db?busy_timeout=soon",
        "sqlite:///state.db?busy_timeout=1&busy_timeout=2",
        "sqlite:///state.db?journal=delete",
    ],
)
def test_unusable_urls_are_refused(url: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_url(url)


async def test_a_relative_url_creates_its_folder_under_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    backend = await open_backend("sqlite:///./.agentrun/state.db")
    try:
        assert isinstance(backend.checkpoints, CheckedCheckpoints)
        assert isinstance(backend.checkpoints.inner, SqliteCheckpointStore)
        await backend.checkpoints.put("acme", "run", b"{}", fence=1)
    finally:
        await backend.close()
    with sqlite3.connect(tmp_path / ".agentrun" / "state.db") as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        verify(connection, "the file")


def test_the_published_schema_is_the_file_and_creates_every_table() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == EXPECTED_SQLITE_SCHEMA
    connection = sqlite3.connect(":memory:")
    try:
        for statement in statements(EXPECTED_SQLITE_SCHEMA):
            connection.execute(statement)
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master")}
    finally:
        connection.close()
    assert {
        "agentrun_schema",
        "agentrun_fences",
        "agentrun_checkpoints",
        "agentrun_leases",
        "agentrun_idempotency",
        "agentrun_history",
        "agentrun_charges",
        "agentrun_spent",
        "agentrun_quota_admissions",
        "agentrun_quota_windows",
    } <= tables


async def test_a_version_1_file_is_migrated_keeping_its_data(url: str, database_file: Path) -> None:
    """What a run kept under version 1 reads the same after the kit migrated the file."""
    database_file.parent.mkdir(parents=True)
    with sqlite3.connect(database_file) as connection:
        for statement in statements((Path(__file__).parent / "schema_v1.sql").read_text()):
            connection.execute(statement)
        connection.execute("INSERT INTO agentrun_schema (id, version) VALUES (1, 1)")
        connection.execute("INSERT INTO agentrun_fences VALUES ('acme', 'run', 3)")
        connection.execute("INSERT INTO agentrun_charges VALUES ('acme', 'run', 'c1', 5)")
        connection.execute("INSERT INTO agentrun_checkpoints VALUES ('acme', 'run', 3, X'7B7D')")
        connection.execute(
            "INSERT INTO agentrun_idempotency (tenant, run_id, key, state, holder, fence, "
            "outcome) VALUES ('acme', 'run', 'k', 'completed', 'w1', 3, 'booked 12A')"
        )
    backend = await open_backend(url)
    try:
        assert await backend.ledger.spent("acme", "run") == 5
        assert await backend.ledger.charge("acme", "run", "c2", 2, budget=7, fence=3) == 7
        assert await backend.ledger.spent("acme", "run") == 7
        assert await backend.checkpoints.latest("acme", "run") == b"{}"
        record = await backend.idempotency.read("acme", "run", "k")
        assert record is not None
        assert (record.outcome, record.call_id) == ("booked 12A", None)
        assert await backend.quotas.admit("acme", "ns", "run", fence=3, limit=1)  # version 3
    finally:
        await backend.close()
    with sqlite3.connect(database_file) as connection:
        assert connection.execute("SELECT version FROM agentrun_schema").fetchall() == [
            (SCHEMA_VERSION,)
        ]


async def test_opening_again_keeps_the_data_and_the_version(url: str, database_file: Path) -> None:
    for _ in range(2):
        backend = await open_backend(url)
        try:
            await backend.ledger.charge("acme", "run", "c1", 5, budget=None, fence=1)
            assert await backend.ledger.spent("acme", "run") == 5
        finally:
            await backend.close()
    with sqlite3.connect(database_file) as connection:
        assert connection.execute("SELECT id, version FROM agentrun_schema").fetchall() == [
            (1, SCHEMA_VERSION)
        ]


async def test_a_file_of_another_schema_version_is_refused_untouched(
    url: str, database_file: Path
) -> None:
    backend = await open_backend(url)
    await backend.close()
    with sqlite3.connect(database_file) as connection:
        connection.execute("UPDATE agentrun_schema SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(ConfigurationError) as caught:
        await open_backend(url)
    message = str(caught.value)
    assert f"schema version {SCHEMA_VERSION + 1}" in message
    assert f"needs schema version {SCHEMA_VERSION}" in message
    assert str(database_file) in message
    with sqlite3.connect(database_file) as connection:
        assert connection.execute("SELECT version FROM agentrun_schema").fetchone() == (
            SCHEMA_VERSION + 1,
        )


@pytest.fixture
def foreign_file(database_file: Path) -> Path:
    database_file.parent.mkdir(parents=True)
    database_file.write_bytes(b"these are somebody's notes, not a database" * 100)
    return database_file


async def test_a_file_that_is_not_a_database_is_refused(url: str, foreign_file: Path) -> None:
    with pytest.raises(ConfigurationError, match="is not a SQLite database") as caught:
        await open_backend(url)
    assert str(foreign_file) in str(caught.value)
