"""A whole boundary in one SQLite transaction: one ``BEGIN IMMEDIATE … COMMIT``, one fsync.

The fence is admitted once, then the segment, the frontier and the charge are written with the very
statements their stores use (and the segments a compacted one replaces deleted); a stale fence
raises before any of them, and an error in any rolls all of them back. ``read_run`` reads the
frontier and the run's segments back in one call on the database's thread (``RunReader``), in one
read transaction, so no commit (a compaction deleting segments) lands between the two;
``read_run_and_records`` adds the run's idempotency records to that transaction
(``RunAndRecordsReader``), so a resume is one call.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

from agentrun._commits import BoundaryCommit
from agentrun._history import committed_handle
from agentrun._idempotency import IdempotencyStore, ListedRecord
from agentrun.stores._sqlite._database import Database, admit, first
from agentrun.stores._sqlite.checkpoints import store_frontier
from agentrun.stores._sqlite.history import store_segment
from agentrun.stores._sqlite.idempotency import SqliteIdempotencyStore, listed_records
from agentrun.stores._sqlite.ledger import charged


class SqliteCommitStore:
    def __init__(self, database: Database) -> None:
        self._database = database

    async def commit(self, boundary: BoundaryCommit) -> int | None:
        tenant, run_id, fence = boundary.tenant, boundary.run_id, boundary.fence
        charge = boundary.charge
        handle = committed_handle(boundary)

        def work(connection: sqlite3.Connection) -> int | None:
            admit(connection, tenant, run_id, fence, "boundary commit")
            if boundary.segment is not None and handle is not None:
                store_segment(connection, tenant, run_id, boundary.segment, handle)
            connection.executemany(
                "DELETE FROM agentrun_history WHERE tenant = ? AND run_id = ? AND handle = ?",
                [(tenant, run_id, gone) for gone in boundary.dropped],
            )
            store_frontier(connection, tenant, run_id, fence, boundary.frontier)
            if charge is None:
                return None
            return charged(connection, tenant, run_id, charge.charge_id, charge.micros, None)

        return await self._database.write(f"commit a boundary of run {run_id!r}", work)

    async def read_run(self, tenant: str, run_id: str) -> tuple[bytes | None, Mapping[str, bytes]]:
        frontier, segments, _ = await self._read(tenant, run_id, records=False)
        return frontier, segments

    def lists_records_of(self, idempotency: IdempotencyStore) -> bool:
        return isinstance(idempotency, SqliteIdempotencyStore) and (
            idempotency.keeps_its_records_in(self._database)
        )

    async def read_run_and_records(
        self, tenant: str, run_id: str
    ) -> tuple[bytes | None, Mapping[str, bytes], tuple[ListedRecord, ...]]:
        return await self._read(tenant, run_id, records=True)

    async def _read(
        self, tenant: str, run_id: str, *, records: bool
    ) -> tuple[bytes | None, dict[str, bytes], tuple[ListedRecord, ...]]:
        def work(
            connection: sqlite3.Connection,
        ) -> tuple[bytes | None, dict[str, bytes], tuple[ListedRecord, ...]]:
            connection.execute("BEGIN")  # one snapshot: no commit lands between the reads
            try:
                return everything(connection)
            finally:
                connection.execute("COMMIT")

        def everything(
            connection: sqlite3.Connection,
        ) -> tuple[bytes | None, dict[str, bytes], tuple[ListedRecord, ...]]:
            row = first(
                connection,
                "SELECT payload FROM agentrun_checkpoints WHERE tenant = ? AND run_id = ?",
                (tenant, run_id),
            )
            if row is None:
                return None, {}, ()
            segments = connection.execute(
                "SELECT handle, segment FROM agentrun_history WHERE tenant = ? AND run_id = ?",
                (tenant, run_id),
            )
            return (
                bytes(row[0]),
                {str(handle): bytes(segment) for handle, segment in segments},
                listed_records(connection, tenant, run_id) if records else (),
            )

        return await self._database.read(f"read the checkpoint and transcript of {run_id!r}", work)
