"""Checkpoints in SQLite: one frontier row per run, written under the run's fence.

The fence check and the write are one ``BEGIN IMMEDIATE`` transaction, so a superseded worker
can never slip a frontier in between a new holder's acquisition and its first write.

The runs are listed (``runs``) from the primary key's index on (tenant, run_id), in its order:
the ``BINARY`` collation compares UTF-8 bytes, which is code point order. Each page is one
statement that starts at its cursor in the index and reads ``limit`` entries, never a row's
payload, whatever the table holds.
"""

from __future__ import annotations

import sqlite3

from agentrun._storecore.checked import DEFAULT_RUNS_PAGE
from agentrun.stores._sqlite._database import Database, admit, first


def store_frontier(
    connection: sqlite3.Connection, tenant: str, run_id: str, fence: int, payload: bytes
) -> None:
    """Upsert the run's frontier, in a transaction that has admitted ``fence``."""
    connection.execute(
        "INSERT INTO agentrun_checkpoints (tenant, run_id, fence, payload) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (tenant, run_id) "
        "DO UPDATE SET fence = excluded.fence, payload = excluded.payload",
        (tenant, run_id, fence, bytes(payload)),
    )


Run = tuple[str, str]

_RUNS = "SELECT tenant, run_id FROM agentrun_checkpoints{where} ORDER BY tenant, run_id LIMIT ?"


def _listing(tenant: str | None, after: Run | None) -> tuple[str, tuple[str, ...]] | None:
    """The statement of a page of ``runs`` and its parameters but the limit; None when the page
    is empty whatever the table holds (``tenant`` is before ``after``'s). Within a tenant the cursor
    is its run id alone, so the index is searched from the cursor on, not from the tenant's
    first entry."""
    if tenant is None:
        if after is None:
            return _RUNS.format(where=""), ()
        return _RUNS.format(where=" WHERE (tenant, run_id) > (?, ?)"), after
    if after is None or after[0] < tenant:
        return _RUNS.format(where=" WHERE tenant = ?"), (tenant,)
    if after[0] > tenant:
        return None
    return _RUNS.format(where=" WHERE tenant = ? AND run_id > ?"), after


class SqliteCheckpointStore:
    def __init__(self, database: Database) -> None:
        self._database = database

    async def put(self, tenant: str, run_id: str, payload: bytes, *, fence: int) -> None:
        def work(connection: sqlite3.Connection) -> None:
            admit(connection, tenant, run_id, fence, "checkpoint write")
            store_frontier(connection, tenant, run_id, fence, payload)

        await self._database.write(f"write the checkpoint of run {run_id!r}", work)

    async def latest(self, tenant: str, run_id: str) -> bytes | None:
        def work(connection: sqlite3.Connection) -> bytes | None:
            row = first(
                connection,
                "SELECT payload FROM agentrun_checkpoints WHERE tenant = ? AND run_id = ?",
                (tenant, run_id),
            )
            return None if row is None else bytes(row[0])

        return await self._database.read(f"read the checkpoint of run {run_id!r}", work)

    async def forget(self, tenant: str, run_id: str) -> None:
        def work(connection: sqlite3.Connection) -> None:
            connection.execute(
                "DELETE FROM agentrun_checkpoints WHERE tenant = ? AND run_id = ?", (tenant, run_id)
            )

        await self._database.write(f"forget the checkpoint of run {run_id!r}", work)

    async def runs(
        self, tenant: str | None = None, *, after: Run | None = None, limit: int = DEFAULT_RUNS_PAGE
    ) -> tuple[Run, ...]:
        """``RunLister.runs``, from the primary key (see the module)."""
        listing = _listing(tenant, after)
        if listing is None:
            return ()
        sql, parameters = listing

        def work(connection: sqlite3.Connection) -> tuple[Run, ...]:
            rows = connection.execute(sql, (*parameters, limit)).fetchall()
            return tuple((str(row[0]), str(row[1])) for row in rows)

        return await self._database.read("list the runs with a checkpoint", work)
