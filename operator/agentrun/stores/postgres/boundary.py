"""``PostgresBoundaryStore``: a whole boundary in one statement, so one round trip and one commit.

The statement is the stores' own writes as data-modifying CTEs behind one fence check-and-raise
(``FENCE_CTE``): the segment (when there is one), the deletion of the segments a compacted one
replaces, the frontier, and the charge (when there is one), each only if the writer's fence was
admitted. A stale fence so
writes none of them, and a failure in any aborts the statement and with it all of them.

The charge is the ledger's without a budget (the runner refuses over budget from the run's
total itself): the charge row is inserted once per charge id by its primary key, and the total
is raised by ``micros`` in the conflict branch of its upsert, which reads the row as committed
after the fence lock rather than as the statement's snapshot saw it; so the total stays right
without the ledger's separate fence statement. A run with no total row yet (charged under schema
version 1) starts from the sum of its charges, as the ledger does. A boundary without a charge
(every other one) reads no ledger row: ``prior`` is read only under a ``CASE`` on the charge id,
a subquery the server runs only when its branch is taken.

``read_run`` is one statement too: the frontier's row (no handle) and the run's segments' rows,
``UNION ALL``, in the statement's one snapshot (``RunReader``); ``read_run_and_records`` adds
the run's idempotency records' rows (no handle, a key) to it (``RunAndRecordsReader``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import asyncpg

from agentrun.boundary import BoundaryCommit
from agentrun.history import handle_for
from agentrun.idempotency import IdempotencyStore, ListedRecord
from agentrun.identifiers import check_key, check_run
from agentrun.stores.postgres._shared import FENCE_CTE, PostgresStore, admit
from agentrun.stores.postgres.idempotency import LIST, PostgresIdempotencyStore, listed_record
from agentrun.stores.postgres.ledger import SPENT_SO_FAR

_COMMIT = (
    "WITH " + FENCE_CTE + ", "
    "segment AS (INSERT INTO {history} (tenant, run_id, handle, segment) "
    "SELECT $1, $2, $5::text, $6::bytea FROM fence WHERE current = $3 AND $6::bytea IS NOT NULL "
    "ON CONFLICT (tenant, run_id, handle) DO NOTHING), "
    "dropped AS (DELETE FROM {history} WHERE tenant = $1 AND run_id = $2 "
    "AND handle = ANY($9::text[]) AND EXISTS (SELECT 1 FROM fence WHERE current = $3)), "
    "frontier AS (INSERT INTO {checkpoints} (tenant, run_id, fence, payload, written_at) "
    "SELECT $1, $2, $3, $4::bytea, clock_timestamp() FROM fence WHERE current = $3 "
    "ON CONFLICT (tenant, run_id) DO UPDATE SET fence = EXCLUDED.fence, "
    "payload = EXCLUDED.payload, written_at = EXCLUDED.written_at), "
    "prior AS (SELECT " + SPENT_SO_FAR + " AS spent), "
    "added AS (INSERT INTO {ledger} (tenant, run_id, charge_id, micros) "
    "SELECT $1, $2, $7::text, $8::bigint FROM fence WHERE current = $3 AND $7::text IS NOT NULL "
    "ON CONFLICT (tenant, run_id, charge_id) DO NOTHING RETURNING 1), "
    "total AS (INSERT INTO {ledger_totals} AS t (tenant, run_id, spent) "
    "SELECT $1, $2, spent + $8::bigint FROM prior WHERE EXISTS (SELECT 1 FROM added) "
    "ON CONFLICT (tenant, run_id) DO UPDATE SET spent = t.spent + $8::bigint RETURNING t.spent) "
    "SELECT (SELECT current FROM fence) AS current, (SELECT spent FROM total) AS raised, "
    "CASE WHEN $7::text IS NOT NULL THEN (SELECT spent FROM prior) END AS spent"
)

_READ_RUN = (
    "SELECT NULL::text AS handle, payload AS stored FROM {checkpoints} "
    "WHERE tenant = $1 AND run_id = $2 "
    "UNION ALL SELECT handle, segment FROM {history} WHERE tenant = $1 AND run_id = $2"
)
_READ_RUN_AND_RECORDS = (
    "SELECT NULL::text AS handle, payload AS stored, NULL::text AS key, NULL::text AS state, "
    "NULL::text AS holder, NULL::bigint AS fence, NULL::text AS call_id, NULL::text AS tool "
    "FROM {checkpoints} WHERE tenant = $1 AND run_id = $2 "
    "UNION ALL SELECT handle, segment, NULL, NULL, NULL, NULL, NULL, NULL FROM {history} "
    "WHERE tenant = $1 AND run_id = $2 "
    "UNION ALL SELECT NULL, NULL, records.* FROM (" + LIST + ") AS records"
)


class PostgresBoundaryStore(PostgresStore):
    name = "PostgreSQL boundary store"

    def _prepare(self, sql: Callable[[str], str]) -> None:
        self._commit, self._read_run = sql(_COMMIT), sql(_READ_RUN)
        self._read_run_and_records = sql(_READ_RUN_AND_RECORDS)

    async def commit(self, boundary: BoundaryCommit) -> int | None:
        tenant, run_id, fence = boundary.tenant, boundary.run_id, boundary.fence
        check_run(tenant, run_id)
        charge = boundary.charge
        if charge is not None:
            check_key("charge id", charge.charge_id)
        segment = boundary.segment
        row = await self._db.fetchrow(
            f"commit a boundary of run {run_id!r}",
            self._commit,
            tenant,
            run_id,
            fence,
            boundary.frontier,
            None if segment is None else boundary.handle or handle_for(segment),
            None if segment is None else bytes(segment),
            None if charge is None else charge.charge_id,
            None if charge is None else charge.micros,
            list(boundary.dropped),
        )
        admit(tenant, run_id, fence, int(row["current"]), "boundary commit")
        if charge is None:
            return None
        # Not raised: the charge id was counted before (a retried commit), the total stands.
        return int(row["spent"] if row["raised"] is None else row["raised"])

    async def read_run(self, tenant: str, run_id: str) -> tuple[bytes | None, Mapping[str, bytes]]:
        check_run(tenant, run_id)
        rows = await self._db.fetch(
            f"read the checkpoint and transcript of run {run_id!r}", self._read_run, tenant, run_id
        )
        return _frontier_and_segments(rows)

    def lists_records_of(self, idempotency: IdempotencyStore) -> bool:
        return isinstance(idempotency, PostgresIdempotencyStore) and self.shares_tables_with(
            idempotency
        )

    async def read_run_and_records(
        self, tenant: str, run_id: str
    ) -> tuple[bytes | None, Mapping[str, bytes], tuple[ListedRecord, ...]]:
        check_run(tenant, run_id)
        rows = await self._db.fetch(
            f"read the checkpoint, transcript and records of run {run_id!r}",
            self._read_run_and_records,
            tenant,
            run_id,
        )
        records = tuple(listed_record(row) for row in rows if row["key"] is not None)
        frontier, segments = _frontier_and_segments([row for row in rows if row["key"] is None])
        return frontier, segments, records if frontier is not None else ()


def _frontier_and_segments(
    rows: Sequence[asyncpg.Record],
) -> tuple[bytes | None, Mapping[str, bytes]]:
    """The frontier (the row without a handle; None when there is none) and the segments."""
    frontier = next((bytes(row["stored"]) for row in rows if row["handle"] is None), None)
    if frontier is None:
        return None, {}
    return frontier, {
        str(row["handle"]): bytes(row["stored"]) for row in rows if row["handle"] is not None
    }
