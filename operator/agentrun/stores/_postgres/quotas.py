"""``PostgresQuotaStore``: admissions counted under the scope's row lock, budgets in one upsert.

An admission must count every admission before it, or two replicas could each find the last
place free. A single statement cannot promise that: its snapshot is taken before it waits for a
lock (see ``ledger``). So ``admit`` and ``leave`` are short transactions: first an upsert of the
scope's row in ``quota_scopes``, which locks it until commit and so takes the scope's admissions
one at a time, then the statement that counts and writes, which starts after the lock and
therefore sees every admission committed before it.

A reservation or a settlement is one upsert of the window's row. ``ON CONFLICT DO UPDATE`` locks
the row and computes the update from its newest version, whoever wrote it last, so the check
``spent + reserved + ask <= limit`` and the addition are one atomic step with no transaction
around them. Whether the row is live is decided against one ``clock_timestamp()`` reading; an
expired row counts as zeros and is overwritten, and the statement deletes the scope's other
expired windows as it goes.
"""

from __future__ import annotations

from collections.abc import Callable

from agentrun._quotas import NO_SPENDING, Allowance, Spend, Spending, refuse_superseded
from agentrun.stores._postgres._shared import PostgresStore

_LOCK_SCOPE = (
    "INSERT INTO {quota_scopes} (tenant, scope) VALUES ($1, $2) "
    "ON CONFLICT (tenant, scope) DO UPDATE SET scope = EXCLUDED.scope"
)
_ADMIT = (
    "WITH mine AS (SELECT fence FROM {quota_admissions} "
    "WHERE tenant = $1 AND scope = $2 AND run_id = $3), "
    "taken AS (SELECT count(*) AS n FROM {quota_admissions} WHERE tenant = $1 AND scope = $2), "
    "written AS ("
    "INSERT INTO {quota_admissions} (tenant, scope, run_id, fence) "
    "SELECT $1, $2, $3, $4::bigint FROM taken WHERE CASE WHEN EXISTS (SELECT 1 FROM mine) "
    "THEN (SELECT fence FROM mine) <= $4::bigint ELSE n < $5::bigint END "
    "ON CONFLICT (tenant, scope, run_id) DO UPDATE SET fence = EXCLUDED.fence RETURNING 1) "
    "SELECT (SELECT fence FROM mine) AS recorded, EXISTS (SELECT 1 FROM written) AS admitted"
)
_LEAVE = (
    "WITH gone AS (DELETE FROM {quota_admissions} "
    "WHERE tenant = $1 AND scope = $2 AND run_id = $3 AND fence <= $4::bigint RETURNING 1) "
    "SELECT fence FROM {quota_admissions} WHERE tenant = $1 AND scope = $2 AND run_id = $3 "
    "AND NOT EXISTS (SELECT 1 FROM gone)"
)
_ADMITTED = "SELECT run_id, fence FROM {quota_admissions} WHERE tenant = $1 AND scope = $2"

_WINDOW_UPSERT = (
    "WITH clock AS (SELECT clock_timestamp() AS now), "
    "expired AS (DELETE FROM {quota_windows} WHERE tenant = $1 AND scope = $2 "
    "AND window_key <> $3 AND expires_at <= (SELECT now FROM clock)), "
    "written AS ("
    "INSERT INTO {quota_windows} AS w (tenant, scope, window_key, spent_micros, spent_tokens, "
    "reserved_micros, reserved_tokens, expires_at) "
)
_LIVE = "w.expires_at > (SELECT now FROM clock)"


def _kept(column: str) -> str:
    """The row's ``column`` if the row is live, else 0 (an expired window starts from zero)."""
    return f"(CASE WHEN {_LIVE} THEN w.{column} ELSE 0 END)"


_EXPIRES = "(SELECT now FROM clock) + $8::float8 * interval '1 second'"
_RESERVE = (
    _WINDOW_UPSERT + f"SELECT $1, $2, $3, 0, 0, $4::bigint, $5::bigint, {_EXPIRES} "
    "WHERE ($6::bigint IS NULL OR $4::bigint <= $6::bigint) "
    "AND ($7::bigint IS NULL OR $5::bigint <= $7::bigint) "
    "ON CONFLICT (tenant, scope, window_key) DO UPDATE SET "
    f"spent_micros = {_kept('spent_micros')}, spent_tokens = {_kept('spent_tokens')}, "
    f"reserved_micros = {_kept('reserved_micros')} + EXCLUDED.reserved_micros, "
    f"reserved_tokens = {_kept('reserved_tokens')} + EXCLUDED.reserved_tokens, "
    "expires_at = EXCLUDED.expires_at "
    f"WHERE ($6::bigint IS NULL OR {_kept('spent_micros')} + {_kept('reserved_micros')} "
    "+ EXCLUDED.reserved_micros <= $6::bigint) "
    f"AND ($7::bigint IS NULL OR {_kept('spent_tokens')} + {_kept('reserved_tokens')} "
    "+ EXCLUDED.reserved_tokens <= $7::bigint) "
    "RETURNING 1) "
    "SELECT EXISTS (SELECT 1 FROM written) AS reserved"
)
_SETTLE = (
    _WINDOW_UPSERT + f"SELECT $1, $2, $3, $6::bigint, $7::bigint, 0, 0, {_EXPIRES} "
    "ON CONFLICT (tenant, scope, window_key) DO UPDATE SET "
    f"spent_micros = {_kept('spent_micros')} + EXCLUDED.spent_micros, "
    f"spent_tokens = {_kept('spent_tokens')} + EXCLUDED.spent_tokens, "
    f"reserved_micros = GREATEST({_kept('reserved_micros')} - $4::bigint, 0), "
    f"reserved_tokens = GREATEST({_kept('reserved_tokens')} - $5::bigint, 0), "
    "expires_at = EXCLUDED.expires_at RETURNING 1) "
    "SELECT count(*) FROM written"
)
_SPENDING = (
    "SELECT spent_micros, spent_tokens, reserved_micros, reserved_tokens FROM {quota_windows} "
    "WHERE tenant = $1 AND scope = $2 AND window_key = $3 AND expires_at > clock_timestamp()"
)
_FORGET = (
    "WITH admissions AS (DELETE FROM {quota_admissions} WHERE tenant = $1 AND scope = $2), "
    "windows AS (DELETE FROM {quota_windows} WHERE tenant = $1 AND scope = $2) "
    "DELETE FROM {quota_scopes} WHERE tenant = $1 AND scope = $2"
)


class PostgresQuotaStore(PostgresStore):
    name = "PostgreSQL quota store"

    def _prepare(self, sql: Callable[[str], str]) -> None:
        self._lock_scope, self._admit = sql(_LOCK_SCOPE), sql(_ADMIT)
        self._leave, self._admitted = sql(_LEAVE), sql(_ADMITTED)
        self._reserve, self._settle = sql(_RESERVE), sql(_SETTLE)
        self._spending, self._forget = sql(_SPENDING), sql(_FORGET)

    async def admit(self, tenant: str, scope: str, run_id: str, *, fence: int, limit: int) -> bool:
        timeout = self._db.timeout
        async with (
            self._db.connection(f"admit run {run_id!r} into {scope!r}") as connection,
            connection.transaction(),
        ):
            await connection.execute(self._lock_scope, tenant, scope, timeout=timeout)
            row = await connection.fetchrow(
                self._admit, tenant, scope, run_id, fence, limit, timeout=timeout
            )
        if row["recorded"] is not None:
            refuse_superseded(
                tenant=tenant,
                scope=scope,
                run_id=run_id,
                fence=fence,
                recorded=int(row["recorded"]),
                leaving=False,
            )
        return bool(row["admitted"])

    async def leave(self, tenant: str, scope: str, run_id: str, *, fence: int) -> None:
        timeout = self._db.timeout
        async with (
            self._db.connection(f"let run {run_id!r} leave {scope!r}") as connection,
            connection.transaction(),
        ):
            await connection.execute(self._lock_scope, tenant, scope, timeout=timeout)
            recorded = await connection.fetchval(
                self._leave, tenant, scope, run_id, fence, timeout=timeout
            )
        if recorded is not None:
            refuse_superseded(
                tenant=tenant,
                scope=scope,
                run_id=run_id,
                fence=fence,
                recorded=int(recorded),
                leaving=True,
            )

    async def admitted(self, tenant: str, scope: str) -> dict[str, int]:
        rows = await self._db.fetch(
            f"read the runs admitted into {scope!r}", self._admitted, tenant, scope
        )
        return {str(row["run_id"]): int(row["fence"]) for row in rows}

    async def reserve(
        self, tenant: str, scope: str, window: str, *, ask: Spend, limit: Allowance, ttl: float
    ) -> bool:
        row = await self._db.fetchrow(
            f"reserve in window {window!r} of {scope!r}",
            self._reserve,
            tenant,
            scope,
            window,
            ask.micros,
            ask.tokens,
            limit.micros,
            limit.tokens,
            ttl,
        )
        return bool(row["reserved"])

    async def settle(
        self, tenant: str, scope: str, window: str, *, reserved: Spend, used: Spend, ttl: float
    ) -> None:
        await self._db.execute(
            f"settle in window {window!r} of {scope!r}",
            self._settle,
            tenant,
            scope,
            window,
            reserved.micros,
            reserved.tokens,
            used.micros,
            used.tokens,
            ttl,
        )

    async def spending(self, tenant: str, scope: str, window: str) -> Spending:
        row = await self._db.fetchrow(
            f"read window {window!r} of {scope!r}", self._spending, tenant, scope, window
        )
        if row is None:
            return NO_SPENDING
        return Spending(
            spent=Spend(micros=row["spent_micros"], tokens=row["spent_tokens"]),
            reserved=Spend(micros=row["reserved_micros"], tokens=row["reserved_tokens"]),
        )

    async def forget(self, tenant: str, scope: str) -> None:
        await self._db.execute(f"forget the quotas of {scope!r}", self._forget, tenant, scope)
