"""``PostgresHistoryStore``: content-addressed transcript segments as ``bytea``, fenced writes.

A segment is written once under its handle (the digest of its bytes); writing it again is a
no-op, so a retried boundary costs nothing. The write is one statement with the shared fence
CTE, and every fetch is checked against its handle by ``verified``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from agentrun._history import handle_for, verified
from agentrun.stores._postgres._shared import (
    FENCE_CTE,
    PostgresStore,
    admit,
)

_PUT = (
    "WITH " + FENCE_CTE + ", stored AS ("
    "INSERT INTO {history} (tenant, run_id, handle, segment) "
    "SELECT $1, $2, $4::text, $5::bytea FROM fence WHERE current = $3 "
    "ON CONFLICT (tenant, run_id, handle) DO NOTHING) "
    "SELECT current FROM fence"
)
_FETCH = "SELECT segment FROM {history} WHERE tenant = $1 AND run_id = $2 AND handle = $3"
_SEGMENTS = "SELECT handle, segment FROM {history} WHERE tenant = $1 AND run_id = $2"
_FORGET = "DELETE FROM {history} WHERE tenant = $1 AND run_id = $2"


class PostgresHistoryStore(PostgresStore):
    name = "PostgreSQL history store"

    def _prepare(self, sql: Callable[[str], str]) -> None:
        self._put, self._fetch, self._forget = sql(_PUT), sql(_FETCH), sql(_FORGET)
        self._segments = sql(_SEGMENTS)

    async def put(self, tenant: str, run_id: str, segment: bytes, *, fence: int) -> str:
        handle = handle_for(segment)
        row = await self._db.fetchrow(
            f"write a transcript segment of run {run_id!r}",
            self._put,
            tenant,
            run_id,
            fence,
            handle,
            bytes(segment),
        )
        admit(tenant, run_id, fence, int(row["current"]), "history write")
        return handle

    async def fetch(self, tenant: str, run_id: str, handle: str) -> bytes:
        row = await self._db.fetchrow(
            f"read a transcript segment of run {run_id!r}", self._fetch, tenant, run_id, handle
        )
        return verified(run_id, handle, None if row is None else bytes(row["segment"]))

    async def fetch_all(self, tenant: str, run_id: str) -> Mapping[str, bytes]:
        """Every segment of the run in one statement (``SegmentLister``)."""
        rows = await self._db.fetch(
            f"read the transcript of run {run_id!r}", self._segments, tenant, run_id
        )
        return {str(row["handle"]): bytes(row["segment"]) for row in rows}

    async def forget(self, tenant: str, run_id: str) -> None:
        await self._db.execute(
            f"forget the transcript of run {run_id!r}", self._forget, tenant, run_id
        )
