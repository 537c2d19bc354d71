"""Run leases in SQLite: expiry on the database's clock, fences from the shared fence table.

An acquisition reads the live lease, raises the run's fence high-water mark by one and writes the
new lease in one ``BEGIN IMMEDIATE`` transaction: two processes racing for a run are serialised
by the file lock, and the second one sees the first one's live lease and is refused with its
name. Whether a lease is live is decided in the statement, against ``NOW_US``.
"""

from __future__ import annotations

import sqlite3

from agentrun._leases import RunLease, renewal_refused
from agentrun._storecore.fences import held_elsewhere
from agentrun.stores._sqlite._database import NOW_US, Database, Row, first, micros, one, seconds

_LIVE = (
    f"SELECT holder, fence, expires_us - {NOW_US} FROM agentrun_leases "
    f"WHERE tenant = ? AND run_id = ? AND expires_us > {NOW_US}"
)


def _lease(tenant: str, run_id: str, holder: str, fence: int, left_us: int) -> RunLease:
    return RunLease(
        tenant=tenant, run_id=run_id, holder=holder, fence=fence, remaining=seconds(left_us)
    )


class SqliteLeaseStore:
    def __init__(self, database: Database) -> None:
        self._database = database

    async def acquire(self, tenant: str, run_id: str, holder: str, *, ttl: float) -> RunLease:
        def work(connection: sqlite3.Connection) -> RunLease:
            live = first(connection, _LIVE, (tenant, run_id))
            if live is not None and live[0] != holder:
                raise held_elsewhere(
                    tenant=tenant, run_id=run_id, requested_by=holder, holder=live[0], fence=live[1]
                )
            (fence,) = one(
                connection,
                "INSERT INTO agentrun_fences (tenant, run_id, highest) VALUES (?, ?, 1) "
                "ON CONFLICT (tenant, run_id) DO UPDATE SET highest = MAX(highest, 0) + 1 "
                "RETURNING highest",
                (tenant, run_id),
            )
            (left_us,) = one(
                connection,
                "INSERT INTO agentrun_leases (tenant, run_id, holder, fence, expires_us) "
                f"VALUES (?, ?, ?, ?, {NOW_US} + ?) ON CONFLICT (tenant, run_id) DO UPDATE "
                "SET holder = excluded.holder, fence = excluded.fence, "
                f"expires_us = excluded.expires_us RETURNING expires_us - {NOW_US}",
                (tenant, run_id, holder, fence, micros(ttl)),
            )
            return _lease(tenant, run_id, holder, fence, left_us)

        return await self._database.write(f"acquire the lease on run {run_id!r}", work)

    async def renew(self, lease: RunLease, *, ttl: float) -> RunLease:
        tenant, run_id = lease.tenant, lease.run_id

        def work(connection: sqlite3.Connection) -> RunLease:
            renewed = first(
                connection,
                f"UPDATE agentrun_leases SET expires_us = {NOW_US} + ? "
                "WHERE tenant = ? AND run_id = ? AND holder = ? AND fence = ? "
                f"AND expires_us > {NOW_US} RETURNING expires_us - {NOW_US}",
                (micros(ttl), tenant, run_id, lease.holder, lease.fence),
            )
            if renewed is not None:
                return _lease(tenant, run_id, lease.holder, lease.fence, renewed[0])
            live = first(connection, _LIVE, (tenant, run_id))
            raise renewal_refused(lease, None if live is None else (str(live[0]), int(live[1])))

        return await self._database.write(f"renew the lease on run {run_id!r}", work)

    async def release(self, lease: RunLease) -> None:
        def work(connection: sqlite3.Connection) -> None:
            connection.execute(
                "DELETE FROM agentrun_leases "
                "WHERE tenant = ? AND run_id = ? AND holder = ? AND fence = ?",
                (lease.tenant, lease.run_id, lease.holder, lease.fence),
            )

        await self._database.write(f"release the lease on run {lease.run_id!r}", work)

    async def held(self, tenant: str, run_id: str) -> RunLease | None:
        def work(connection: sqlite3.Connection) -> Row | None:
            return first(connection, _LIVE, (tenant, run_id))

        live = await self._database.read(f"read the lease on run {run_id!r}", work)
        return None if live is None else _lease(tenant, run_id, *live)
