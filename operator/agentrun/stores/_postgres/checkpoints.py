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
"""

from __future__ import annotations

from collections.abc import Callable

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


class PostgresCheckpointStore(PostgresStore):
    name = "PostgreSQL checkpoint store"

    def _prepare(self, sql: Callable[[str], str]) -> None:
        self._put, self._latest, self._forget = sql(_PUT), sql(_LATEST), sql(_FORGET)

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
