"""What each run spent, in SQLite: one row per charge, the budget checked in the same transaction.

The total is summed, the charge id looked up, the budget checked and the charge inserted inside
one fenced ``BEGIN IMMEDIATE`` transaction, so two processes charging one run cannot both fit
under a budget that has room for only one of them.
"""

from __future__ import annotations

import sqlite3

from agentrun.errors import BudgetExceededError
from agentrun.stores.sqlite._database import Database, admit, first, one

_SPENT = "SELECT COALESCE(SUM(micros), 0) FROM agentrun_charges WHERE tenant = ? AND run_id = ?"


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
            (spent,) = one(connection, _SPENT, (tenant, run_id))
            if (
                first(
                    connection,
                    "SELECT 1 FROM agentrun_charges "
                    "WHERE tenant = ? AND run_id = ? AND charge_id = ?",
                    (tenant, run_id, charge_id),
                )
                is not None
            ):
                return int(spent)
            if budget is not None and spent + micros > budget:
                raise BudgetExceededError(run_id, spent, micros, budget)
            connection.execute(
                "INSERT INTO agentrun_charges (tenant, run_id, charge_id, micros) "
                "VALUES (?, ?, ?, ?)",
                (tenant, run_id, charge_id, micros),
            )
            return int(spent + micros)

        return await self._database.write(f"charge {charge_id!r} to run {run_id!r}", work)

    async def spent(self, tenant: str, run_id: str) -> int:
        def work(connection: sqlite3.Connection) -> int:
            return int(one(connection, _SPENT, (tenant, run_id))[0])

        return await self._database.read(f"read the spend of run {run_id!r}", work)

    async def forget(self, tenant: str, run_id: str) -> None:
        def work(connection: sqlite3.Connection) -> None:
            connection.execute(
                "DELETE FROM agentrun_charges WHERE tenant = ? AND run_id = ?", (tenant, run_id)
            )

        await self._database.write(f"forget the charges of run {run_id!r}", work)
