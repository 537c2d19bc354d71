"""Quotas in SQLite: admissions counted and budgets checked inside one ``BEGIN IMMEDIATE``
transaction each, on the database's clock.

The write lock is taken before the first read, so a count and the admission that depends on it
(or a window's sums and the reservation that fits under them) never interleave with another
process's: twenty processes admitting into a scope of five are twenty transactions in a row, and
five of them find room. A window's row counts as absent once its ``expires_us`` has passed on
``NOW_US``; each reservation or settlement first deletes the scope's expired rows, so a window
that expired starts from zero and old windows do not pile up.
"""

from __future__ import annotations

import sqlite3

from agentrun._quotas import NO_SPENDING, Allowance, Spend, Spending, refuse_superseded
from agentrun.stores._sqlite._database import NOW_US, Database, first, micros, one

_RECORDED = (
    "SELECT fence FROM agentrun_quota_admissions WHERE tenant = ? AND scope = ? AND run_id = ?"
)
_SPENDING = (
    "SELECT spent_micros, spent_tokens, reserved_micros, reserved_tokens "
    "FROM agentrun_quota_windows WHERE tenant = ? AND scope = ? AND window_key = ? "
    f"AND expires_us > {NOW_US}"
)
_WRITE_WINDOW = (
    "INSERT INTO agentrun_quota_windows (tenant, scope, window_key, spent_micros, spent_tokens, "
    f"reserved_micros, reserved_tokens, expires_us) VALUES (?, ?, ?, ?, ?, ?, ?, {NOW_US} + ?) "
    "ON CONFLICT (tenant, scope, window_key) DO UPDATE SET spent_micros = excluded.spent_micros, "
    "spent_tokens = excluded.spent_tokens, reserved_micros = excluded.reserved_micros, "
    "reserved_tokens = excluded.reserved_tokens, expires_us = excluded.expires_us"
)


def _live(connection: sqlite3.Connection, tenant: str, scope: str, window: str) -> Spending:
    """The window's sums, after the scope's expired windows were deleted (in a write)."""
    connection.execute(
        f"DELETE FROM agentrun_quota_windows WHERE tenant = ? AND scope = ? "
        f"AND expires_us <= {NOW_US}",
        (tenant, scope),
    )
    return _read(connection, tenant, scope, window)


def _read(connection: sqlite3.Connection, tenant: str, scope: str, window: str) -> Spending:
    row = first(connection, _SPENDING, (tenant, scope, window))
    if row is None:
        return NO_SPENDING
    return Spending(
        spent=Spend(micros=row[0], tokens=row[1]), reserved=Spend(micros=row[2], tokens=row[3])
    )


def _write(
    connection: sqlite3.Connection,
    at: tuple[str, str, str],
    spending: Spending,
    ttl: float,
) -> None:
    spent, reserved = spending.spent, spending.reserved
    connection.execute(
        _WRITE_WINDOW,
        (*at, spent.micros, spent.tokens, reserved.micros, reserved.tokens, micros(ttl)),
    )


class SqliteQuotaStore:
    def __init__(self, database: Database) -> None:
        self._database = database

    async def admit(self, tenant: str, scope: str, run_id: str, *, fence: int, limit: int) -> bool:
        def work(connection: sqlite3.Connection) -> bool:
            recorded = first(connection, _RECORDED, (tenant, scope, run_id))
            if recorded is not None:
                refuse_superseded(
                    tenant=tenant,
                    scope=scope,
                    run_id=run_id,
                    fence=fence,
                    recorded=recorded[0],
                    leaving=False,
                )
            else:
                (count,) = one(
                    connection,
                    "SELECT count(*) FROM agentrun_quota_admissions WHERE tenant = ? AND scope = ?",
                    (tenant, scope),
                )
                if count >= limit:
                    return False
            connection.execute(
                "INSERT INTO agentrun_quota_admissions (tenant, scope, run_id, fence) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (tenant, scope, run_id) "
                "DO UPDATE SET fence = excluded.fence",
                (tenant, scope, run_id, fence),
            )
            return True

        return await self._database.write(f"admit run {run_id!r} into {scope!r}", work)

    async def leave(self, tenant: str, scope: str, run_id: str, *, fence: int) -> None:
        def work(connection: sqlite3.Connection) -> None:
            recorded = first(connection, _RECORDED, (tenant, scope, run_id))
            if recorded is None:
                return
            refuse_superseded(
                tenant=tenant,
                scope=scope,
                run_id=run_id,
                fence=fence,
                recorded=recorded[0],
                leaving=True,
            )
            connection.execute(
                "DELETE FROM agentrun_quota_admissions "
                "WHERE tenant = ? AND scope = ? AND run_id = ?",
                (tenant, scope, run_id),
            )

        await self._database.write(f"let run {run_id!r} leave {scope!r}", work)

    async def admitted(self, tenant: str, scope: str) -> dict[str, int]:
        def work(connection: sqlite3.Connection) -> dict[str, int]:
            rows = connection.execute(
                "SELECT run_id, fence FROM agentrun_quota_admissions "
                "WHERE tenant = ? AND scope = ?",
                (tenant, scope),
            ).fetchall()
            return {str(run_id): int(fence) for run_id, fence in rows}

        return await self._database.read(f"read the runs admitted into {scope!r}", work)

    async def reserve(
        self, tenant: str, scope: str, window: str, *, ask: Spend, limit: Allowance, ttl: float
    ) -> bool:
        def work(connection: sqlite3.Connection) -> bool:
            spending = _live(connection, tenant, scope, window)
            if not limit.leaves_room(spending, ask):
                return False
            reserved = Spending(spent=spending.spent, reserved=spending.reserved.plus(ask))
            _write(connection, (tenant, scope, window), reserved, ttl)
            return True

        return await self._database.write(f"reserve in window {window!r} of {scope!r}", work)

    async def settle(
        self, tenant: str, scope: str, window: str, *, reserved: Spend, used: Spend, ttl: float
    ) -> None:
        def work(connection: sqlite3.Connection) -> None:
            spending = _live(connection, tenant, scope, window)
            settled = Spending(
                spent=spending.spent.plus(used), reserved=spending.reserved.less(reserved)
            )
            _write(connection, (tenant, scope, window), settled, ttl)

        await self._database.write(f"settle in window {window!r} of {scope!r}", work)

    async def spending(self, tenant: str, scope: str, window: str) -> Spending:
        def work(connection: sqlite3.Connection) -> Spending:
            return _read(connection, tenant, scope, window)

        return await self._database.read(f"read window {window!r} of {scope!r}", work)

    async def forget(self, tenant: str, scope: str) -> None:
        def work(connection: sqlite3.Connection) -> None:
            for table in ("agentrun_quota_admissions", "agentrun_quota_windows"):
                connection.execute(
                    f"DELETE FROM {table} WHERE tenant = ? AND scope = ?", (tenant, scope)
                )

        await self._database.write(f"forget the quotas of {scope!r}", work)
