"""``PostgresCommitStore``: a whole boundary in one statement, so one round trip and one commit.

The statement is the stores' own writes as data-modifying CTEs behind one fence check-and-raise
(``FENCE_CTE``): the segment, the frontier, the charge and the deletion of the segments a
compacted one replaces, each only if the writer's fence was admitted, and each left out of the
statement when the boundary has none (``_commit_statement``: eight shapes, each prepared once
per connection). A stale fence so writes none of them, and a failure in any aborts the
statement and with it all of them.

The charge is the ledger's without a budget (the runner refuses over budget from the run's
total itself): the charge row is inserted once per charge id by its primary key, and the total
is raised by ``micros`` in the conflict branch of its upsert, which reads the row as committed
after the fence lock rather than as the statement's snapshot saw it; so the total stays right
without the ledger's separate fence statement. A run with no total row yet (charged under schema
version 1) starts from the sum of its charges, as the ledger does. A boundary without a charge
(every other one) has no ledger CTE, so reads no ledger row.

``read_run`` is one statement too: the frontier's row (no handle) and the run's segments' rows,
``UNION ALL``, in the statement's one snapshot (``RunReader``); ``read_run_and_records`` adds
the run's idempotency records' rows (no handle, a key) to it (``RunAndRecordsReader``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import asyncpg

from agentrun._commits import BoundaryCommit
from agentrun._history import committed_handle
from agentrun._idempotency import IdempotencyStore, ListedRecord
from agentrun.stores._postgres._shared import FENCE_CTE, PostgresStore, admit
from agentrun.stores._postgres.idempotency import LIST, PostgresIdempotencyStore, listed_record
from agentrun.stores._postgres.ledger import SPENT_SO_FAR


def _commit_statement(*, segment: bool, dropped: bool, charge: bool) -> str:
    """The boundary statement for one shape of boundary: only the writes it has.

    Every boundary upserts the frontier behind the fence; a segment, the deletion of the
    segments a compacted one replaces and a charge are each a CTE of their own, left out of the
    statement when the boundary has none. A CTE that writes nothing still costs the server its
    planning and execution: replaying the 200-turn booking run's commits, a boundary with only
    its shape's CTEs was faster than one with every CTE, and than a bare two-row upsert of the
    same bytes (``bench/README.md``). Parameters: $1 tenant, $2 run
    id, $3 fence, $4 frontier, then the segment's handle and bytes, the charge's id and micros
    and the dropped handles, numbered on in that order for the parts present.
    """
    numbers = iter(range(5, 10))
    ctes = [FENCE_CTE]
    if segment:
        handle, stored = next(numbers), next(numbers)
        ctes.append(
            "segment AS (INSERT INTO {history} (tenant, run_id, handle, segment) "
            f"SELECT $1, $2, ${handle}::text, ${stored}::bytea FROM fence WHERE current = $3 "
            "ON CONFLICT (tenant, run_id, handle) DO NOTHING)"
        )
    ctes.append(
        "frontier AS (INSERT INTO {checkpoints} (tenant, run_id, fence, payload, written_at) "
        "SELECT $1, $2, $3, $4::bytea, clock_timestamp() FROM fence WHERE current = $3 "
        "ON CONFLICT (tenant, run_id) DO UPDATE SET fence = EXCLUDED.fence, "
        "payload = EXCLUDED.payload, written_at = EXCLUDED.written_at)"
    )
    answer = "SELECT (SELECT current FROM fence) AS current"
    if charge:
        charge_id, micros = next(numbers), next(numbers)
        ctes += [
            "prior AS (SELECT " + SPENT_SO_FAR + " AS spent)",
            "added AS (INSERT INTO {ledger} (tenant, run_id, charge_id, micros) "
            f"SELECT $1, $2, ${charge_id}::text, ${micros}::bigint FROM fence "
            "WHERE current = $3 "
            "ON CONFLICT (tenant, run_id, charge_id) DO NOTHING RETURNING 1)",
            "total AS (INSERT INTO {ledger_totals} AS t (tenant, run_id, spent) "
            f"SELECT $1, $2, spent + ${micros}::bigint FROM prior "
            "WHERE EXISTS (SELECT 1 FROM added) "
            f"ON CONFLICT (tenant, run_id) DO UPDATE SET spent = t.spent + ${micros}::bigint "
            "RETURNING t.spent)",
        ]
        answer += ", (SELECT spent FROM total) AS raised, (SELECT spent FROM prior) AS spent"
    if dropped:
        ctes.append(
            "dropped AS (DELETE FROM {history} WHERE tenant = $1 AND run_id = $2 "
            f"AND handle = ANY(${next(numbers)}::text[]) "
            "AND EXISTS (SELECT 1 FROM fence WHERE current = $3))"
        )
    return "WITH " + ", ".join(ctes) + " " + answer


_SHAPES = tuple(
    (segment, dropped, charge)
    for segment in (False, True)
    for dropped in (False, True)
    for charge in (False, True)
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


class PostgresCommitStore(PostgresStore):
    name = "PostgreSQL commit store"

    def _prepare(self, sql: Callable[[str], str]) -> None:
        self._commits = {
            shape: sql(_commit_statement(segment=shape[0], dropped=shape[1], charge=shape[2]))
            for shape in _SHAPES
        }
        self._read_run = sql(_READ_RUN)
        self._read_run_and_records = sql(_READ_RUN_AND_RECORDS)

    async def commit(self, boundary: BoundaryCommit) -> int | None:
        tenant, run_id, fence = boundary.tenant, boundary.run_id, boundary.fence
        charge = boundary.charge
        segment, dropped = boundary.segment, boundary.dropped
        arguments: list[object] = [tenant, run_id, fence, boundary.frontier]
        if segment is not None:
            arguments += [committed_handle(boundary), bytes(segment)]
        if charge is not None:
            arguments += [charge.charge_id, charge.micros]
        if dropped:
            arguments.append(list(dropped))
        statement = self._commits[segment is not None, bool(dropped), charge is not None]
        row = await self._db.fetchrow(f"commit a boundary of run {run_id!r}", statement, *arguments)
        admit(tenant, run_id, fence, int(row["current"]), "boundary commit")
        if charge is None:
            return None
        # Not raised: the charge id was counted before (a retried commit), the total stands.
        return int(row["spent"] if row["raised"] is None else row["raised"])

    async def read_run(self, tenant: str, run_id: str) -> tuple[bytes | None, Mapping[str, bytes]]:
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
