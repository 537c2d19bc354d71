"""``PostgresLeaseStore``: one upsert decides an acquisition, on the database's clock.

``acquire`` is a single statement. Its upsert inserts the run's lease row, or, on conflict,
updates the existing row in place: to the new holder when that lease has lapsed (or is the same
holder's), and to itself otherwise. Either way it returns the row as it stands after the row
lock was taken, so a refusal names the holder that is actually live, never one read from an
older snapshot; the 19 losers of a 20-way race all name the winner. Whether the lease is free is
decided once per row, in a sub-select with one ``clock_timestamp()`` reading, so the holder, the
fence and the expiry can never be decided on two different instants.

The new fence is one more than the highest of the lease row's last fence and the run's shared
fence mark; a second CTE raises the shared mark to it in the same statement, and only when the
lease was taken: a refused acquisition leaves the live holder's fence alone.

The lease row outlives ``release`` (it is marked lapsed), so the fences it issued stay on
record and the next acquisition still rises above them.
"""

from __future__ import annotations

from collections.abc import Callable

import asyncpg

from agentrun._leases import RunLease, renewal_refused
from agentrun._storecore.fences import held_elsewhere
from agentrun.stores._postgres._shared import PostgresStore

_ACQUIRE = (
    "WITH taken AS ("
    "INSERT INTO {leases} AS l (tenant, run_id, holder, fence, expires_at) "
    "VALUES ($1, $2, $3, COALESCE((SELECT fence FROM {fences} WHERE tenant = $1 AND run_id = $2),"
    " 0) + 1, clock_timestamp() + $4::float8 * interval '1 second') "
    "ON CONFLICT (tenant, run_id) DO UPDATE SET (holder, fence, expires_at) = ("
    "SELECT CASE WHEN d.free THEN EXCLUDED.holder ELSE l.holder END,"
    " CASE WHEN d.free THEN GREATEST(l.fence + 1, EXCLUDED.fence) ELSE l.fence END,"
    " CASE WHEN d.free THEN d.now + $4::float8 * interval '1 second' ELSE l.expires_at END "
    "FROM (SELECT now, l.expires_at <= now OR l.holder = EXCLUDED.holder AS free "
    "FROM (SELECT clock_timestamp() AS now) AS c) AS d) "
    "RETURNING l.holder, l.fence, l.expires_at), "
    "raised AS ("
    "INSERT INTO {fences} AS f (tenant, run_id, fence) "
    "SELECT $1, $2, fence FROM taken WHERE holder = $3 "
    "ON CONFLICT (tenant, run_id) DO UPDATE SET fence = GREATEST(f.fence, EXCLUDED.fence)) "
    "SELECT holder, fence, "
    "EXTRACT(EPOCH FROM expires_at - clock_timestamp())::float8 AS remaining FROM taken"
)
_RENEW = (
    "UPDATE {leases} SET expires_at = clock_timestamp() + $5::float8 * interval '1 second' "
    "WHERE tenant = $1 AND run_id = $2 AND holder = $3 AND fence = $4 "
    "AND expires_at > clock_timestamp() "
    "RETURNING holder, fence, EXTRACT(EPOCH FROM expires_at - clock_timestamp())::float8 "
    "AS remaining"
)
_RELEASE = (
    "UPDATE {leases} SET expires_at = LEAST(expires_at, clock_timestamp()) "
    "WHERE tenant = $1 AND run_id = $2 AND holder = $3 AND fence = $4"
)
_HELD = (
    "SELECT holder, fence, remaining FROM ("
    "SELECT holder, fence, EXTRACT(EPOCH FROM expires_at - clock_timestamp())::float8 "
    "AS remaining FROM {leases} WHERE tenant = $1 AND run_id = $2) AS lease "
    "WHERE remaining > 0"
)


class PostgresLeaseStore(PostgresStore):
    name = "PostgreSQL lease store"

    def _prepare(self, sql: Callable[[str], str]) -> None:
        self._acquire, self._renew = sql(_ACQUIRE), sql(_RENEW)
        self._release, self._held = sql(_RELEASE), sql(_HELD)

    async def acquire(self, tenant: str, run_id: str, holder: str, *, ttl: float) -> RunLease:
        row = await self._db.fetchrow(
            f"acquire the lease on run {run_id!r}", self._acquire, tenant, run_id, holder, ttl
        )
        if row["holder"] != holder:
            raise held_elsewhere(
                tenant=tenant,
                run_id=run_id,
                requested_by=holder,
                holder=str(row["holder"]),
                fence=int(row["fence"]),
            )
        return _lease(tenant, run_id, row)

    async def renew(self, lease: RunLease, *, ttl: float) -> RunLease:
        row = await self._db.fetchrow(
            f"renew the lease on run {lease.run_id!r}",
            self._renew,
            lease.tenant,
            lease.run_id,
            lease.holder,
            lease.fence,
            ttl,
        )
        if row is not None:
            return _lease(lease.tenant, lease.run_id, row)
        live = await self.held(lease.tenant, lease.run_id)
        raise renewal_refused(lease, None if live is None else (live.holder, live.fence))

    async def release(self, lease: RunLease) -> None:
        await self._db.execute(
            f"release the lease on run {lease.run_id!r}",
            self._release,
            lease.tenant,
            lease.run_id,
            lease.holder,
            lease.fence,
        )

    async def held(self, tenant: str, run_id: str) -> RunLease | None:
        row = await self._db.fetchrow(
            f"read the lease on run {run_id!r}", self._held, tenant, run_id
        )
        return None if row is None else _lease(tenant, run_id, row)


def _lease(tenant: str, run_id: str, row: asyncpg.Record) -> RunLease:
    return RunLease(
        tenant=tenant,
        run_id=run_id,
        holder=str(row["holder"]),
        fence=int(row["fence"]),
        remaining=max(0.0, float(row["remaining"])),
    )
