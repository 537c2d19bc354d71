"""The published DDL, and the start-up check that the database holds the version this kit needs.

The DDL is a file shipped in the package (``stores/schema/postgres.sql``) so that a person can
read it, review it and hand it to their migration tool; ``EXPECTED_CHECKPOINT_SCHEMA`` is that
file's text and ``SCHEMA_VERSION`` is read from the version it inserts, so there is one source.
Nothing here applies it: a kit that creates tables when it connects is a kit whose schema
changes cannot be reviewed before they happen. ``verify`` only reads.
"""

from __future__ import annotations

import re
from importlib.resources import files

import asyncpg

from agentrun._errors import ConfigurationError
from agentrun.stores._postgres._shared import Database, PostgresTables

EXPECTED_CHECKPOINT_SCHEMA: str = (
    files("agentrun.stores").joinpath("schema", "postgres.sql").read_text(encoding="utf-8")
)


def _version_in(ddl: str) -> int:
    found = re.search(r"INSERT INTO adk_schema_version \(version\) VALUES \((\d+)\)", ddl)
    if found is None:
        raise ConfigurationError("stores/schema/postgres.sql does not insert a schema version")
    return int(found.group(1))


SCHEMA_VERSION: int = _version_in(EXPECTED_CHECKPOINT_SCHEMA)

_DEFAULTS = PostgresTables()


def schema_sql(tables: PostgresTables | None = None) -> str:
    """The DDL with ``tables``' names in place of the defaults (the published text for None)."""
    if tables is None or tables == _DEFAULTS:
        return EXPECTED_CHECKPOINT_SCHEMA
    renamed = {getattr(_DEFAULTS, role): f'"{name}"' for role, name in tables.items()}
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, renamed)) + r")\b")
    return pattern.sub(lambda found: renamed[found.group(1)], EXPECTED_CHECKPOINT_SCHEMA)


async def verify(pool: asyncpg.Pool, tables: PostgresTables | None = None) -> None:
    """Refuse, with ``ConfigurationError``, a database without the tables or of another version."""
    database = Database(pool, tables, "PostgreSQL schema check")
    tables = database.tables
    missing = [
        str(row["name"])
        for row in await database.fetch(
            "look for its tables",
            "SELECT name FROM unnest($1::text[]) WITH ORDINALITY AS t(name, n) "
            "WHERE to_regclass(quote_ident(name)) IS NULL ORDER BY n",
            [name for _, name in tables.items()],
        )
    ]
    if missing:
        raise ConfigurationError(
            f"the PostgreSQL database has no table {', '.join(missing)}: the agentrun schema "
            f"(version {SCHEMA_VERSION}) is not applied. The kit never creates tables itself; "
            'apply it with `agentrun schema postgres | psql -v ON_ERROR_STOP=1 "$URL"` '
            "(or through your migration tool)."
        )
    rows = await database.fetch(
        "read the schema version", tables.sql("SELECT version FROM {schema_version}")
    )
    found = sorted(int(row["version"]) for row in rows)
    if found != [SCHEMA_VERSION]:
        said = "no version row" if not found else f"version {', '.join(map(str, found))}"
        raise ConfigurationError(
            f"the PostgreSQL schema table {tables.schema_version!r} holds {said}; this kit "
            f"needs schema version {SCHEMA_VERSION}. Migrate the database to the DDL that "
            "`agentrun schema postgres` prints, or run a kit that matches the database."
        )
