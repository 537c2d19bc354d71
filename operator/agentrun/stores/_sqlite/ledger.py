"""What each run spent, in SQLite: one row per charge and the run's running total, written
together, the budget checked in the same transaction.

The charge id is looked up, the budget checked against the total, the charge inserted and the
total raised inside one fenced ``BEGIN IMMEDIATE`` transaction, so two processes charging one run
cannot both fit under a budget that has room for only one of them, and a charge costs the same
however many came before it. A run charged before the schema kept totals has no total row; its
next charge sums its charges once and writes the row.

A run's charges are listed (``charges``) off the primary key's index on (tenant, run_id,
charge_id), in its order: the ``BINARY`` collation compares UTF-8 bytes, which is code point
order. A boundary commit counts its charge with ``charged`` too, so it is listed alike.
"""

from __future__ import annotations

import sqlite3

from agentrun._errors import BudgetExceededError
from agentrun.stores._sqlite._database import Database, admit, first, one

_CHARGES = (
    "SELECT charge_id, micros FROM agentrun_charges WHERE tenant = ? AND run_id = ? "
    "ORDER BY charge_id"
)
_SPENT = (
    "SELECT COALESCE("
    "(SELECT micros FROM agentrun_spent WHERE tenant = ?1 AND run_id = ?2), "
    "(SELECT COALESCE(SUM(micros), 0) FROM agentrun_charges WHERE tenant = ?1 AND run_id = ?2))"
)


def charged(
    connection: sqlite3.Connection,
    tenant: str,
    run_id: str,
    charge_id: str,
    micros: int,
    budget: int | None,
) -> int:
    """Count the charge once, in a transaction that has admitted the writer's fence; return
    the run's total after it. Refuses (``BudgetExceededError``) a charge past ``budget``."""
    (spent,) = one(connection, _SPENT, (tenant, run_id))
    if (
        first(
            connection,
            "SELECT 1 FROM agentrun_charges WHERE tenant = ? AND run_id = ? AND charge_id = ?",
            (tenant, run_id, charge_id),
        )
        is not None
    ):
        return int(spent)
    if budget is not None and spent + micros > budget:
        raise BudgetExceededError(run_id=run_id, spent=spent, charge=micros, budget=budget)
    connection.execute(
        "INSERT INTO agentrun_charges (tenant, run_id, charge_id, micros) VALUES (?, ?, ?, ?)",
        (tenant, run_id, charge_id, micros),
    )
    connection.execute(
        "INSERT INTO agentrun_spent (tenant, run_id, micros) VALUES (?, ?, ?) "
        "ON CONFLICT (tenant, run_id) DO UPDATE SET micros = excluded.micros",
        (tenant, run_id, spent + micros),
    )
    return int(spent + micros)


class SqliteLedger:
    def __init__(self, database: Database) -> None:
        self._database = database

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
        def work(connection: sqlite3.Connection) -> int:
            admit(connection, tenant, run_id, fence, "ledger charge")
            return charged(connection, tenant, run_id, charge_id, micros, budget)

        return await self._database.write(f"charge {charge_id!r} to run {run_id!r}", work)

    async def spent(self, tenant: str, run_id: str) -> int:
        def work(connection: sqlite3.Connection) -> int:
            return int(one(connection, _SPENT, (tenant, run_id))[0])

        return await self._database.read(f"read the spend of run {run_id!r}", work)

    async def charges(self, tenant: str, run_id: str) -> tuple[tuple[str, int], ...]:
        """``ChargeLister.charges``, from the primary key (see the module)."""

        def work(connection: sqlite3.Connection) -> tuple[tuple[str, int], ...]:
            rows = connection.execute(_CHARGES, (tenant, run_id)).fetchall()
            return tuple((str(row[0]), int(row[1])) for row in rows)

        return await self._database.read(f"list the charges of run {run_id!r}", work)

    async def forget(self, tenant: str, run_id: str) -> None:
        def work(connection: sqlite3.Connection) -> None:
            for table in ("agentrun_charges", "agentrun_spent"):
                connection.execute(
                    f"DELETE FROM {table} WHERE tenant = ? AND run_id = ?", (tenant, run_id)
                )

        await self._database.write(f"forget the charges of run {run_id!r}", work)
