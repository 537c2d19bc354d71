"""``PostgresLedger``: a run's charges, each counted once, refused whole past the budget.

A charge must see every charge before it, or two concurrent charges could each fit the budget
and together exceed it. A single statement cannot promise that: its snapshot is taken before it
waits for the run's fence row. So a charge is a short transaction: the fence check-and-raise
first (which locks the run's fence row until commit, and so orders every charge of the run),
then the charge, whose statement starts after the lock and therefore sees all earlier charges.

The run's total is kept in ``ledger_totals`` and raised by the statement that inserts the
charge, so a charge reads one row however many came before it (summing them made a run's
charges cost the square of their number). A run charged before the schema kept totals has no
row; its next charge sums its charges once (``COALESCE`` evaluates the sum only then).

A run's charges are listed (``charges``) by one statement that finds them on the primary key's
index on (tenant, run_id, charge_id) and orders them by code point (``COLLATE "C"``), the order
every ledger lists in; the index's own order is the database's collation, so unless that is
``C`` the run's charges (and only those) are sorted. A boundary commit inserts its charge into
the same table, so it is listed alike.
"""

from __future__ import annotations

from collections.abc import Callable

from agentrun._errors import BudgetExceededError
from agentrun.stores._postgres._shared import (
    FENCE_CTE,
    PostgresStore,
    admit,
)

_FENCE = "WITH " + FENCE_CTE + " SELECT current FROM fence"
SPENT_SO_FAR = (
    "COALESCE((SELECT spent FROM {ledger_totals} WHERE tenant = $1 AND run_id = $2), "
    "(SELECT COALESCE(sum(micros), 0) FROM {ledger} WHERE tenant = $1 AND run_id = $2))::bigint"
)
_CHARGE = (
    "WITH prior AS (SELECT " + SPENT_SO_FAR + " AS spent, EXISTS (SELECT 1 FROM {ledger} "
    "WHERE tenant = $1 AND run_id = $2 AND charge_id = $3) AS seen), "
    "added AS ("
    "INSERT INTO {ledger} (tenant, run_id, charge_id, micros) "
    "SELECT $1, $2, $3, $4::bigint FROM prior "
    "WHERE NOT seen AND ($5::bigint IS NULL OR spent + $4::bigint <= $5::bigint) RETURNING 1), "
    "total AS ("
    "INSERT INTO {ledger_totals} (tenant, run_id, spent) "
    "SELECT $1, $2, spent + $4::bigint FROM prior WHERE EXISTS (SELECT 1 FROM added) "
    "ON CONFLICT (tenant, run_id) DO UPDATE SET spent = EXCLUDED.spent) "
    "SELECT spent, seen, (SELECT count(*) FROM added) AS added FROM prior"
)
_SPENT = "SELECT " + SPENT_SO_FAR + " AS spent"
_CHARGES = (
    "SELECT charge_id, micros FROM {ledger} WHERE tenant = $1 AND run_id = $2 "
    'ORDER BY charge_id COLLATE "C"'
)
_FORGET = (
    "WITH charges AS (DELETE FROM {ledger} WHERE tenant = $1 AND run_id = $2) "
    "DELETE FROM {ledger_totals} WHERE tenant = $1 AND run_id = $2"
)


class PostgresLedger(PostgresStore):
    name = "PostgreSQL ledger"

    def _prepare(self, sql: Callable[[str], str]) -> None:
        self._fence, self._charge = sql(_FENCE), sql(_CHARGE)
        self._spent, self._forget = sql(_SPENT), sql(_FORGET)
        self._charges = sql(_CHARGES)

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
            raise BudgetExceededError(run_id=run_id, spent=spent, charge=micros, budget=budget or 0)
        return spent + micros

    async def spent(self, tenant: str, run_id: str) -> int:
        row = await self._db.fetchrow(
            f"read the spend of run {run_id!r}", self._spent, tenant, run_id
        )
        return int(row["spent"])

    async def charges(self, tenant: str, run_id: str) -> tuple[tuple[str, int], ...]:
        """``ChargeLister.charges``, from the primary key (see the module)."""
        rows = await self._db.fetch(
            f"list the charges of run {run_id!r}", self._charges, tenant, run_id
        )
        return tuple((str(row["charge_id"]), int(row["micros"])) for row in rows)

    async def forget(self, tenant: str, run_id: str) -> None:
        await self._db.execute(
            f"forget the charges of run {run_id!r}", self._forget, tenant, run_id
        )
