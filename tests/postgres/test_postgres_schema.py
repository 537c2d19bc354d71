"""The published DDL, ``verify`` at start-up, and configurable table names, on a real server."""

from __future__ import annotations

import uuid
from importlib.resources import files

import asyncpg
import pytest

from agentrun.errors import ConfigurationError
from agentrun.stores.postgres import (
    EXPECTED_CHECKPOINT_SCHEMA,
    SCHEMA_VERSION,
    PostgresTables,
    open_backend,
    schema_sql,
    verify,
)
from tests.support.postgres_server import PostgresServer

pytestmark = pytest.mark.postgres


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


async def test_applying_the_ddl_twice_changes_nothing(
    postgres: PostgresServer, postgres_url: str
) -> None:
    postgres.psql(EXPECTED_CHECKPOINT_SCHEMA, "agentrun")
    backend = await open_backend(postgres_url)
    await backend.close()


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


async def test_verify_names_a_missing_table(
    postgres: PostgresServer, postgres_url: str, renamed: PostgresTables
) -> None:
    postgres.psql(f'DROP TABLE "{renamed.ledger}"', "agentrun")
    with pytest.raises(ConfigurationError) as caught:
        await open_backend(postgres_url, tables=renamed)
    assert renamed.ledger in str(caught.value)
    assert renamed.checkpoints not in str(caught.value)


async def test_verify_refuses_another_version_saying_both(
    postgres: PostgresServer, postgres_url: str, renamed: PostgresTables
) -> None:
    postgres.psql(f'UPDATE "{renamed.schema_version}" SET version = 907', "agentrun")
    with pytest.raises(ConfigurationError) as caught:
        await open_backend(postgres_url, tables=renamed)
    message = str(caught.value)
    assert "version 907" in message
    assert f"needs schema version {SCHEMA_VERSION}" in message


async def test_verify_refuses_an_empty_version_table(
    postgres: PostgresServer, postgres_url: str, renamed: PostgresTables
) -> None:
    postgres.psql(f'DELETE FROM "{renamed.schema_version}"', "agentrun")
    with pytest.raises(ConfigurationError, match="no version row"):
        await open_backend(postgres_url, tables=renamed)


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
    finally:
        await mine.close()
        await default.close()


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
