"""The published DDL, ``verify`` at start-up, and configurable table names, on a real server."""

from __future__ import annotations

import json
import subprocess
import uuid
from importlib.resources import files
from pathlib import Path

import asyncpg
import pytest

from agentrun import Backend
from agentrun._errors import ConfigurationError
from agentrun.stores._postgres import (
    EXPECTED_CHECKPOINT_SCHEMA,
    SCHEMA_VERSION,
    PostgresTables,
    open_backend,
    schema_sql,
    verify,
)
from tests.support.cli import COMMAND, cli_env
from tests.support.postgres_server import PostgresServer


def _renamed() -> PostgresTables:
    prefix = f"t{uuid.uuid4().hex[:10]}_"
    return PostgresTables(**{role: prefix + role for role, _ in PostgresTables().items()})


@pytest.fixture
def renamed(postgres: PostgresServer, postgres_url: str) -> PostgresTables:
    """A full set of tables under names of this test's own, applied from ``schema_sql``."""
    tables = _renamed()
    postgres.psql(schema_sql(tables), "agentrun")
    return tables


async def _table_count(url: str) -> int:
    connection = await asyncpg.connect(url)
    try:
        return int(
            await connection.fetchval(
                "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"
            )
        )
    finally:
        await connection.close()


async def _compression(url: str, table: str, column: str) -> str:
    """The column's compression as ``pg_attribute`` has it: ``l`` for lz4, empty for the default."""
    connection = await asyncpg.connect(url)
    try:
        return str(
            await connection.fetchval(
                "SELECT attcompression::text FROM pg_attribute "
                "WHERE attrelid = quote_ident($1)::regclass AND attname = $2",
                table,
                column,
            )
        )
    finally:
        await connection.close()


def _psql_stdin(
    postgres: PostgresServer, database: str, script: str, *options: str
) -> subprocess.CompletedProcess[str]:
    """``script`` piped into psql, as the DDL's header says to apply it."""
    return subprocess.run(
        [
            *postgres.as_user,
            str(postgres.bindir / "psql"),
            "-X",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            "127.0.0.1",
            "-p",
            str(postgres.port),
            "-U",
            "postgres",
            "-d",
            database,
            *options,
        ],
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_published_ddl_is_the_shipped_file() -> None:
    shipped = files("agentrun.stores").joinpath("schema", "postgres.sql").read_text()
    assert shipped == EXPECTED_CHECKPOINT_SCHEMA
    assert schema_sql() == EXPECTED_CHECKPOINT_SCHEMA
    assert f"VALUES ({SCHEMA_VERSION})" in EXPECTED_CHECKPOINT_SCHEMA
    for _, name in PostgresTables().items():
        assert f"CREATE TABLE IF NOT EXISTS {name} (" in EXPECTED_CHECKPOINT_SCHEMA


async def test_verify_accepts_the_applied_schema(postgres_url: str) -> None:
    pool = await asyncpg.create_pool(postgres_url, min_size=1, max_size=2)
    try:
        await verify(pool)
    finally:
        await pool.close()


async def test_frontiers_and_segments_are_compressed_with_lz4(
    backend: Backend, postgres_url: str
) -> None:
    assert await _compression(postgres_url, "adk_checkpoints", "payload") == "l"
    assert await _compression(postgres_url, "adk_history_segments", "segment") == "l"
    tenant = f"tenant-{uuid.uuid4().hex[:8]}"
    large = json.dumps({"format_version": 1, "messages": ["book a seat on LH1172"] * 2_000})
    await backend.checkpoints.put(tenant, "run", large.encode(), fence=1)
    connection = await asyncpg.connect(postgres_url)
    try:
        stored = await connection.fetchval(
            "SELECT pg_column_compression(payload) FROM adk_checkpoints "
            "WHERE tenant = $1 AND run_id = 'run'",
            tenant,
        )
    finally:
        await connection.close()
    assert stored == "lz4"
    read = await backend.checkpoints.latest(tenant, "run")
    assert read is not None
    assert json.loads(read) == json.loads(large)


async def test_applying_the_ddl_twice_changes_nothing(
    postgres: PostgresServer, postgres_url: str
) -> None:
    postgres.psql(EXPECTED_CHECKPOINT_SCHEMA, "agentrun")
    backend = await open_backend(postgres_url)
    await backend.close()


def test_the_printed_ddl_applies_through_psql_twice(postgres: PostgresServer) -> None:
    printed = subprocess.run(
        [*COMMAND, "schema", "postgres"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env=cli_env(),
    ).stdout
    database = f"piped_{uuid.uuid4().hex[:8]}"
    postgres.create_database(database)
    for _ in range(2):
        applied = _psql_stdin(postgres, database, printed)
        assert applied.returncode == 0, applied.stderr
        assert "ERROR" not in applied.stderr
    compression = _psql_stdin(
        postgres,
        database,
        "SELECT string_agg(attcompression::text, ',' ORDER BY attname) FROM pg_attribute "
        "WHERE (attrelid, attname) IN "
        "(('adk_checkpoints'::regclass, 'payload'), ('adk_history_segments'::regclass, 'segment'))",
        "-At",
    )
    assert compression.stdout.strip() == "l,l"
    version = _psql_stdin(postgres, database, "SELECT version FROM adk_schema_version", "-At")
    assert version.stdout.strip() == str(SCHEMA_VERSION)


async def test_reapplying_the_ddl_adopts_lz4_on_an_existing_database(
    postgres: PostgresServer, postgres_url: str, renamed: PostgresTables
) -> None:
    """A database set up before the DDL chose lz4 gets it from the same version-1 DDL."""
    mine = await open_backend(postgres_url, tables=renamed)
    try:
        await mine.checkpoints.put("t", "run", b'{"format_version": 1}', fence=1)
    finally:
        await mine.close()
    postgres.psql(
        f'ALTER TABLE "{renamed.checkpoints}" ALTER COLUMN payload SET COMPRESSION default; '
        f'ALTER TABLE "{renamed.history}" ALTER COLUMN segment SET COMPRESSION default',
        "agentrun",
    )
    assert await _compression(postgres_url, renamed.checkpoints, "payload") == ""
    postgres.psql(schema_sql(renamed), "agentrun")
    assert await _compression(postgres_url, renamed.checkpoints, "payload") == "l"
    assert await _compression(postgres_url, renamed.history, "segment") == "l"
    mine = await open_backend(postgres_url, tables=renamed)
    try:
        assert await mine.checkpoints.latest("t", "run") == b'{"format_version": 1}'
    finally:
        await mine.close()


async def test_a_server_that_cannot_use_lz4_keeps_the_default_and_says_so(
    postgres_url: str,
) -> None:
    """The DDL commits with a NOTICE when SET COMPRESSION is feature_not_supported (0A000).

    That is what a server built without lz4 raises. This server has lz4, so the same SQLSTATE is
    provoked the one way it can be: a checkpoints table already there whose payload column is of
    a type that cannot be compressed at all.
    """
    tables = _renamed()
    connection = await asyncpg.connect(postgres_url)
    notices: list[str] = []
    connection.add_log_listener(lambda _, message: notices.append(message.message))
    try:
        await connection.execute(
            f'CREATE TABLE "{tables.checkpoints}" (tenant text, run_id text, fence bigint, '
            "payload integer, written_at timestamptz, PRIMARY KEY (tenant, run_id))"
        )
        await connection.execute(schema_sql(tables))
        missing = await connection.fetchval(
            "SELECT count(*) FROM unnest($1::text[]) AS t(name) "
            "WHERE to_regclass(quote_ident(name)) IS NULL",
            [name for _, name in tables.items()],
        )
    finally:
        await connection.close()
    assert missing == 0
    assert [notice for notice in notices if "lz4" in notice] == [
        "agentrun: this PostgreSQL server was built without lz4; "
        f'"{tables.checkpoints}".payload and "{tables.history}".segment keep the default (pglz)'
    ]
    assert await _compression(postgres_url, tables.history, "segment") == ""
    pool = await asyncpg.create_pool(postgres_url, min_size=1, max_size=2)
    try:
        await verify(pool, tables)
    finally:
        await pool.close()


async def test_nothing_creates_tables_and_a_missing_schema_says_how_to_apply_it(
    postgres: PostgresServer,
) -> None:
    url = postgres.create_database(f"empty_{uuid.uuid4().hex[:8]}")
    with pytest.raises(ConfigurationError) as caught:
        await open_backend(url)
    message = str(caught.value)
    assert "agentrun schema postgres" in message
    assert "adk_checkpoints" in message
    assert f"version {SCHEMA_VERSION}" in message
    assert await _table_count(url) == 0


async def _refused(url: str, tables: PostgresTables) -> str:
    """What ``open_backend`` says when ``verify`` refuses the schema."""
    with pytest.raises(ConfigurationError) as caught:
        await open_backend(url, tables=tables)
    return str(caught.value)


async def test_verify_names_a_missing_table(
    postgres: PostgresServer, postgres_url: str, renamed: PostgresTables
) -> None:
    postgres.psql(f'DROP TABLE "{renamed.ledger}"', "agentrun")
    message = await _refused(postgres_url, renamed)
    assert renamed.ledger in message
    assert renamed.checkpoints not in message


async def test_verify_refuses_another_version_saying_both(
    postgres: PostgresServer, postgres_url: str, renamed: PostgresTables
) -> None:
    postgres.psql(f'UPDATE "{renamed.schema_version}" SET version = 907', "agentrun")
    message = await _refused(postgres_url, renamed)
    assert "version 907" in message
    assert f"needs schema version {SCHEMA_VERSION}" in message


async def test_verify_refuses_an_empty_version_table(
    postgres: PostgresServer, postgres_url: str, renamed: PostgresTables
) -> None:
    postgres.psql(f'DELETE FROM "{renamed.schema_version}"', "agentrun")
    assert "no version row" in await _refused(postgres_url, renamed)


async def test_renamed_tables_hold_their_own_data(
    postgres_url: str, renamed: PostgresTables
) -> None:
    mine = await open_backend(postgres_url, tables=renamed)
    default = await open_backend(postgres_url)
    try:
        tenant = f"tenant-{uuid.uuid4().hex[:8]}"
        lease = await mine.leases.acquire(tenant, "run", "w1", ttl=30)
        await mine.checkpoints.put(tenant, "run", b'{"format_version": 1}', fence=lease.fence)
        assert await mine.checkpoints.latest(tenant, "run") == b'{"format_version": 1}'
        assert await default.checkpoints.latest(tenant, "run") is None
        assert await default.leases.held(tenant, "run") is None
        assert (await default.leases.acquire(tenant, "run", "w2", ttl=30)).fence == 1
        assert await mine.quotas.admit(tenant, "ns", "run", fence=1, limit=1)
        assert await mine.quotas.admitted(tenant, "ns") == {"run": 1}
        assert await default.quotas.admitted(tenant, "ns") == {}
    finally:
        await mine.close()
        await default.close()
    # the lz4 block in the DDL was renamed too: it set the renamed tables' columns
    assert await _compression(postgres_url, renamed.checkpoints, "payload") == "l"
    assert await _compression(postgres_url, renamed.history, "segment") == "l"


@pytest.mark.parametrize(
    "name",
    ["Checkpoints", "1st", "my-table", 'x"; DROP TABLE adk_ledger; --', "", "a" * 64, "tablé"],
)
def test_a_table_name_must_be_a_plain_identifier(name: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        PostgresTables(history=name)
    assert "for history" in str(caught.value)
    assert repr(name) in str(caught.value)


def test_two_stores_cannot_share_a_table() -> None:
    with pytest.raises(ConfigurationError, match="history and ledger are both named"):
        PostgresTables(ledger="shared", history="shared")


def test_the_longest_plain_identifier_is_accepted() -> None:
    assert PostgresTables(history="_" + "a" * 62).history == "_" + "a" * 62


async def test_a_version_1_database_is_migrated_by_applying_the_ddl(
    postgres: PostgresServer,
) -> None:
    """What runs kept under version 1 reads the same once the DDL of this version is applied
    (twice: it is idempotent), and the kit refuses the database until then."""
    url = postgres.create_database(f"v1_{uuid.uuid4().hex[:8]}")
    database = url.rsplit("/", 1)[1]
    postgres.psql((Path(__file__).parent / "schema_v1.sql").read_text(), database)
    postgres.psql(
        "INSERT INTO adk_run_fences VALUES ('acme', 'run', 3); "
        "INSERT INTO adk_ledger VALUES ('acme', 'run', 'c1', 5); "
        "INSERT INTO adk_checkpoints (tenant, run_id, fence, payload) "
        """VALUES ('acme', 'run', 3, '{"format_version": 1}'); """
        "INSERT INTO adk_idempotency (tenant, run_id, key, state, holder, fence, outcome, claim) "
        "VALUES ('acme', 'run', 'k', 'completed', 'w1', 3, 'booked 12A', gen_random_uuid())",
        database,
    )
    with pytest.raises(ConfigurationError, match="no table adk_ledger_totals"):
        await open_backend(url)
    for _ in range(2):
        postgres.psql(EXPECTED_CHECKPOINT_SCHEMA, database)
    backend = await open_backend(url)
    try:
        assert await backend.ledger.spent("acme", "run") == 5
        assert await backend.ledger.charge("acme", "run", "c2", 2, budget=7, fence=3) == 7
        assert await backend.ledger.spent("acme", "run") == 7
        stored = await backend.checkpoints.latest("acme", "run")
        assert stored is not None
        assert json.loads(stored) == {"format_version": 1}
        record = await backend.idempotency.read("acme", "run", "k")
        assert record is not None
        assert (record.outcome, record.call_id) == ("booked 12A", None)
        assert await backend.quotas.admit("acme", "ns", "run", fence=3, limit=1)  # version 3
    finally:
        await backend.close()
