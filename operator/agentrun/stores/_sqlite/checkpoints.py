"""Checkpoints in SQLite: one frontier row per run, written under the run's fence.

The fence check and the write are one ``BEGIN IMMEDIATE`` transaction, so a superseded worker
can never slip a frontier in between a new holder's acquisition and its first write.
"""

from __future__ import annotations

import sqlite3

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
