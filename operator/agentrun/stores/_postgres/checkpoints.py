"""``PostgresCheckpointStore``: one frontier per run, written under the run's fence.

A write is one statement: the shared fence CTE locks the run's fence row and checks and raises
it, and the upsert of the frontier selects from it only if the writer's fence was admitted. So a
superseded writer can never land a frontier, even racing the acquisition that superseded it.

Payloads are kept as ``bytea``, the very bytes the kit wrote. Not ``jsonb``: that cannot hold a
NUL character, and a frontier may carry one (a tool's output), which every other store keeps.
Reading a payload back is ``_frontier.decode``'s work, as for every store: a row written by hand
that is not a frontier raises ``CheckpointFormatError`` naming the run.

The published DDL has the server compress ``payload`` with lz4 rather than pglz where it can:
at 100 KB and more, TOAST compression is most of what a write costs, for this statement and for
a plain upsert alike. Nothing here depends on which method the column uses.

The runs are listed (``runs``) from the primary key on (tenant, run_id), in its order, which is
the columns' collation (the database's default): code point order under ``C``, a language's
order under another. Each page is one statement that starts at its cursor in the index
(a row comparison, which a B-tree searches) and reads ``limit`` entries, never a row's payload.
Comparing in code point order instead (``COLLATE "C"``) would sort the whole table, or the whole
tenant, for every page, unless the published DDL gave the key that collation.
"""

from __future__ import annotations

from collections.abc import Callable

from agentrun._storecore.checked import DEFAULT_RUNS_PAGE
from agentrun.stores._postgres._shared import (
    FENCE_CTE,
    PostgresStore,
    admit,
)

_PUT = (
    "WITH " + FENCE_CTE + ", written AS ("
    "INSERT INTO {checkpoints} (tenant, run_id, fence, payload, written_at) "
    "SELECT $1, $2, $3, $4::bytea, clock_timestamp() FROM fence WHERE current = $3 "
    "ON CONFLICT (tenant, run_id) DO UPDATE SET fence = EXCLUDED.fence, "
    "payload = EXCLUDED.payload, written_at = EXCLUDED.written_at) "
    "SELECT current FROM fence"
)
_LATEST = "SELECT payload FROM {checkpoints} WHERE tenant = $1 AND run_id = $2"
_FORGET = "DELETE FROM {checkpoints} WHERE tenant = $1 AND run_id = $2"
_RUNS = "SELECT tenant, run_id FROM {checkpoints}{where} ORDER BY tenant, run_id LIMIT $1"
_EVERY, _EVERY_AFTER, _ONE, _ONE_AFTER, _ONE_AFTER_ANOTHER = (
    _RUNS.replace("{where}", where)
    for where in (
        "",
        " WHERE (tenant, run_id) > ($2, $3)",
        " WHERE tenant = $2",
        " WHERE tenant = $2 AND run_id > $3",
        " WHERE tenant = $2 AND (tenant, run_id) > ($3, $4)",
    )
)
"""A page of every tenant's runs or of one tenant's, from the start or after a cursor; the
cursor in the tenant listed by its run id alone, which the index is searched from (with the row
comparison it is searched from the tenant's first entry: whether the cursor's tenant comes
before the one listed is the collation's to say, so it is left to that rarer statement)."""

Run = tuple[str, str]


class PostgresCheckpointStore(PostgresStore):
    name = "PostgreSQL checkpoint store"

    def _prepare(self, sql: Callable[[str], str]) -> None:
        self._put, self._latest, self._forget = sql(_PUT), sql(_LATEST), sql(_FORGET)
        self._every, self._every_after = sql(_EVERY), sql(_EVERY_AFTER)
        self._one, self._one_after = sql(_ONE), sql(_ONE_AFTER)
        self._one_after_another = sql(_ONE_AFTER_ANOTHER)

    async def put(self, tenant: str, run_id: str, payload: bytes, *, fence: int) -> None:
        row = await self._db.fetchrow(
            f"write the checkpoint of run {run_id!r}",
            self._put,
            tenant,
            run_id,
            fence,
            payload,
        )
        admit(tenant, run_id, fence, int(row["current"]), "checkpoint write")

    async def latest(self, tenant: str, run_id: str) -> bytes | None:
        row = await self._db.fetchrow(
            f"read the checkpoint of run {run_id!r}", self._latest, tenant, run_id
        )
        return None if row is None else bytes(row["payload"])

    async def forget(self, tenant: str, run_id: str) -> None:
        await self._db.execute(
            f"forget the checkpoint of run {run_id!r}", self._forget, tenant, run_id
        )

    async def runs(
        self, tenant: str | None = None, *, after: Run | None = None, limit: int = DEFAULT_RUNS_PAGE
    ) -> tuple[Run, ...]:
        """``RunLister.runs``, from the primary key (see the module)."""
        operation = "list the runs with a checkpoint"
        if tenant is None:
            if after is None:
                rows = await self._db.fetch(operation, self._every, limit)
            else:
                rows = await self._db.fetch(operation, self._every_after, limit, *after)
        elif after is None:
            rows = await self._db.fetch(operation, self._one, limit, tenant)
        elif after[0] == tenant:
            rows = await self._db.fetch(operation, self._one_after, limit, tenant, after[1])
        else:
            rows = await self._db.fetch(operation, self._one_after_another, limit, tenant, *after)
        return tuple((str(row["tenant"]), str(row["run_id"])) for row in rows)
