"""The SQLite schema: published as DDL, applied by the kit itself, refused if it is another version.

Why the kit applies this schema when it never applies PostgreSQL's: a PostgreSQL database is
shared infrastructure with an owner, grants and a migration process, and a library that ran DDL
against it on start-up would race other deployments and need rights it should not have. The
embedded SQLite default is a file the kit itself owns, next to the worker, with no owner but the
kit and no migration process to wait for; asking a newcomer to apply DDL to a file before
``agentrun run`` could work would only be a step to forget. So opening the file creates its
folder and applies ``sqlite.sql`` (every statement ``IF NOT EXISTS``) in one transaction, and
records ``SCHEMA_VERSION``.

A file of an older version is migrated forward in that same transaction: the columns a version
added (``ADDED_COLUMNS``), then ``sqlite.sql`` again, which creates the tables it added. Either
all of it commits or none of it does. A file of a newer version is refused, untouched, with a
``ConfigurationError`` naming both versions: an older kit cannot know what a newer one wrote.
Every process sharing a file should run the same kit: one that opened the file before it was
migrated keeps writing as its version did (it neither names its tool calls in their claims nor
keeps a run's running total).

``EXPECTED_SQLITE_SCHEMA`` is the text of ``stores/schema/sqlite.sql``, the one source of truth,
and what ``agentrun schema sqlite`` prints.
"""

from __future__ import annotations

import sqlite3
from importlib.resources import files

from agentrun._errors import ConfigurationError

SCHEMA_VERSION = 3

ADDED_COLUMNS: dict[int, tuple[tuple[str, str], ...]] = {
    2: (("agentrun_idempotency", "call_id TEXT"), ("agentrun_idempotency", "tool TEXT")),
}
"""The columns each version added to a table an older version already had (``sqlite.sql``
creates them in a new file, and creates whole tables a version added in an old one: version 3
added only tables, the quota store's)."""

EXPECTED_SQLITE_SCHEMA: str = (
    files("agentrun.stores").joinpath("schema", "sqlite.sql").read_text(encoding="utf-8")
)


def statements(script: str) -> list[str]:
    """``script`` cut into whole statements (``executescript`` would commit the transaction)."""
    found: list[str] = []
    pending = ""
    for line in script.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            found.append(pending.strip())
            pending = ""
    return found


def found_version(connection: sqlite3.Connection) -> int | None:
    """The schema version the file records, or None if it records none."""
    tables = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'agentrun_schema'"
    ).fetchall()
    if not tables:
        return None
    rows: list[tuple[int]] = connection.execute("SELECT version FROM agentrun_schema").fetchall()
    return rows[0][0] if rows else None


def verify(connection: sqlite3.Connection, where: object) -> None:
    """Raise ``ConfigurationError`` unless the file records the schema this kit needs."""
    found = found_version(connection)
    if found != SCHEMA_VERSION:
        has = "no agentrun schema" if found is None else f"agentrun SQLite schema version {found}"
        raise ConfigurationError(
            f"{where} holds {has}; this kit needs schema version {SCHEMA_VERSION}. The file was "
            "left as it is: open it with the kit version that wrote it, or point the store URL "
            "at a new file."
        )


def install(connection: sqlite3.Connection, where: object) -> None:
    """Apply the schema to a file that records none, or migrate one of an older version, then
    verify it. Run inside a transaction."""
    found = found_version(connection)
    if found is not None:
        for version in range(found + 1, SCHEMA_VERSION + 1):
            for table, column in ADDED_COLUMNS.get(version, ()):
                connection.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
    if found is None or found < SCHEMA_VERSION:
        for statement in statements(EXPECTED_SQLITE_SCHEMA):
            connection.execute(statement)
        connection.execute(
            "INSERT INTO agentrun_schema (id, version) VALUES (1, ?) "
            "ON CONFLICT (id) DO UPDATE SET version = excluded.version",
            (SCHEMA_VERSION,),
        )
    verify(connection, where)
