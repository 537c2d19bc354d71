"""PostgreSQL stores (``asyncpg``): every store of a run in one database, fenced by one row.

``open_backend("postgresql://user@host:port/db")`` builds a small pool, runs ``verify`` (the
schema must already be applied, at the version this kit needs; nothing here creates a table) and
returns the stores sharing that pool, which keep one of its connections between calls
(``_lane``: a run's calls come one after another) until the backend is closed. To share a pool
the application already has, build the stores from it directly: each takes the pool, and
optional ``PostgresTables`` for deployments that rename the tables (``schema_sql(tables)`` is
the DDL under those names).

Clocks are the database's: every expiry is ``clock_timestamp()`` on the server, never the
caller's time. Every fenced write checks and raises the run's shared fence row in the same
statement (the ledger: the same transaction) as the write itself.
"""

from __future__ import annotations

from agentrun._backend import StoreSet, closed_on_failure
from agentrun.stores._postgres._lane import Lane
from agentrun.stores._postgres._shared import PostgresTables, create_pool, redacted
from agentrun.stores._postgres.checkpoints import PostgresCheckpointStore
from agentrun.stores._postgres.commits import PostgresCommitStore
from agentrun.stores._postgres.history import PostgresHistoryStore
from agentrun.stores._postgres.idempotency import PostgresIdempotencyStore
from agentrun.stores._postgres.leases import PostgresLeaseStore
from agentrun.stores._postgres.ledger import PostgresLedger
from agentrun.stores._postgres.quotas import PostgresQuotaStore
from agentrun.stores._postgres.schema import (
    EXPECTED_CHECKPOINT_SCHEMA,
    SCHEMA_VERSION,
    schema_sql,
    verify,
)

__all__ = [
    "EXPECTED_CHECKPOINT_SCHEMA",
    "SCHEMA_VERSION",
    "PostgresCheckpointStore",
    "PostgresCommitStore",
    "PostgresHistoryStore",
    "PostgresIdempotencyStore",
    "PostgresLeaseStore",
    "PostgresLedger",
    "PostgresQuotaStore",
    "PostgresTables",
    "open_backend",
    "schema_sql",
    "verify",
]


async def open_backend(url: str, *, tables: PostgresTables | None = None) -> StoreSet:
    """The stores on a new pool for ``url``, after ``verify`` accepted the schema; closing
    the backend hands the kept connection back, then closes the pool."""
    pool = await create_pool(url)
    async with closed_on_failure(pool.close):
        await verify(pool, tables)
    lane = Lane(pool)

    async def close() -> None:
        try:
            await lane.close()
        finally:
            await pool.close()

    return StoreSet(
        checkpoints=PostgresCheckpointStore(pool, tables=tables, lane=lane),
        leases=PostgresLeaseStore(pool, tables=tables, lane=lane),
        idempotency=PostgresIdempotencyStore(pool, tables=tables, lane=lane),
        history=PostgresHistoryStore(pool, tables=tables, lane=lane),
        ledger=PostgresLedger(pool, tables=tables, lane=lane),
        quotas=PostgresQuotaStore(pool, tables=tables, lane=lane),
        url=redacted(url),
        closer=close,
        commits=PostgresCommitStore(pool, tables=tables, lane=lane),
    )
