"""Transcript segments in SQLite, content-addressed per run and verified on every fetch."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

from agentrun._history import handle_for, verified
from agentrun.stores._sqlite._database import Database, admit, first


def store_segment(
    connection: sqlite3.Connection, tenant: str, run_id: str, segment: bytes, handle: str
) -> None:
    """Insert the segment under its handle (a second time is a no-op), in a transaction that
    has admitted the writer's fence."""
    connection.execute(
        "INSERT INTO agentrun_history (tenant, run_id, handle, segment) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (tenant, run_id, handle) DO NOTHING",
        (tenant, run_id, handle, bytes(segment)),
    )


class SqliteHistoryStore:
    def __init__(self, database: Database) -> None:
        self._database = database

    async def put(self, tenant: str, run_id: str, segment: bytes, *, fence: int) -> str:
        def work(connection: sqlite3.Connection) -> str:
            admit(connection, tenant, run_id, fence, "history write")
            handle = handle_for(segment)
            store_segment(connection, tenant, run_id, segment, handle)
            return handle

        return await self._database.write(f"write a transcript segment of run {run_id!r}", work)

    async def fetch(self, tenant: str, run_id: str, handle: str) -> bytes:
        def work(connection: sqlite3.Connection) -> bytes | None:
            row = first(
                connection,
                "SELECT segment FROM agentrun_history "
                "WHERE tenant = ? AND run_id = ? AND handle = ?",
                (tenant, run_id, handle),
            )
            return None if row is None else bytes(row[0])

        segment = await self._database.read(
            f"read transcript segment {handle} of run {run_id!r}", work
        )
        return verified(run_id, handle, segment)

    async def fetch_all(self, tenant: str, run_id: str) -> Mapping[str, bytes]:
        """Every segment of the run in one read (``SegmentLister``)."""

        def work(connection: sqlite3.Connection) -> dict[str, bytes]:
            rows = connection.execute(
                "SELECT handle, segment FROM agentrun_history WHERE tenant = ? AND run_id = ?",
                (tenant, run_id),
            )
            return {str(handle): bytes(segment) for handle, segment in rows}

        return await self._database.read(f"read the transcript of run {run_id!r}", work)

    async def forget(self, tenant: str, run_id: str) -> None:
        def work(connection: sqlite3.Connection) -> None:
            connection.execute(
                "DELETE FROM agentrun_history WHERE tenant = ? AND run_id = ?", (tenant, run_id)
            )

        await self._database.write(f"forget the transcript of run {run_id!r}", work)
