"""``PostgresLedger``: a run's charges, each counted once, refused whole past the budget.

A charge must see every charge before it, or two concurrent charges could each fit the budget
and together exceed it. A single statement cannot promise that: its snapshot is taken before it
waits for the run's fence row. So a charge is a short transaction: the fence check-and-raise
first (which locks the run's fence row until commit, and so orders every charge of the run),
then the charge, whose statement starts after the lock and therefore sees all earlier charges.
"""

from __future__ import annotations

from collections.abc import Callable

from agentrun.errors import BudgetExceededError
from agentrun.stores.postgres._shared import (
    FENCE_CTE,
    PostgresStore,
    admit,
)

_FENCE = "WITH " + FENCE_CTE + " SELECT current FROM fence"
_CHARGE = (
    "WITH prior AS ("
    "SELECT COALESCE(sum(micros), 0)::bigint AS spent, COALESCE(bool_or(charge_id = $3), false) "
    "AS seen FROM {ledger} WHERE tenant = $1 AND run_id = $2), "
    "added AS ("
    "INSERT INTO {ledger} (tenant, run_id, charge_id, micros) "
    "SELECT $1, $2, $3, $4::bigint FROM prior "
    "WHERE NOT seen AND ($5::bigint IS NULL OR spent + $4::bigint <= $5::bigint) RETURNING 1) "
    "SELECT spent, seen, (SELECT count(*) FROM added) AS added FROM prior"
)
_SPENT = (
    "SELECT COALESCE(sum(micros), 0)::bigint AS spent FROM {ledger} "
    "WHERE tenant = $1 AND run_id = $2"
)
_FORGET = "DELETE FROM {ledger} WHERE tenant = $1 AND run_id = $2"


class PostgresLedger(PostgresStore):
    name = "PostgreSQL ledger"

    def _prepare(self, sql: Callable[[str], str]) -> None:
        self._fence, self._charge = sql(_FENCE), sql(_CHARGE)
        self._spent, self._forget = sql(_SPENT), sql(_FORGET)

    async def charge(
        self,
        tenant: str,
        run_id: str,
        charge_id: str,
        micros: int,
        *,
        budget: int | None,
        fence: int,
    ) -> int:
        timeout = self._db.timeout
        async with (
            self._db.connection(f"charge run {run_id!r}") as connection,
            connection.transaction(),
        ):
            current = await connection.fetchval(self._fence, tenant, run_id, fence, timeout=timeout)
            admit(tenant, run_id, fence, int(current), "ledger charge")
            row = await connection.fetchrow(
                self._charge, tenant, run_id, charge_id, micros, budget, timeout=timeout
            )
        spent = int(row["spent"])
        if row["seen"]:
            return spent
        if not row["added"]:
            raise BudgetExceededError(run_id, spent, micros, budget or 0)
        return spent + micros

    async def spent(self, tenant: str, run_id: str) -> int:
        row = await self._db.fetchrow(
            f"read the spend of run {run_id!r}", self._spent, tenant, run_id
        )
        return int(row["spent"])

    async def forget(self, tenant: str, run_id: str) -> None:
        await self._db.execute(
            f"forget the charges of run {run_id!r}", self._forget, tenant, run_id
        )
