"""Tool-call intents and outcomes in SQLite: one row per (tenant, run, key).

A claim is an ``INSERT ... ON CONFLICT DO NOTHING`` inside the run's fenced ``BEGIN IMMEDIATE``
transaction, so among any number of processes claiming one key exactly one inserts the row and
every other one reads it back. A claim given a TTL expires on the database's clock: it reads as
absent from then on and is deleted by the next claim of its key.
"""

from __future__ import annotations

import sqlite3

from agentrun._idempotency import (
    Claim,
    ClaimState,
    IdempotencyRecord,
    ListedRecord,
    not_holder,
)
from agentrun.stores._sqlite._database import (
    NOW_US,
    Database,
    Row,
    admit,
    first,
    micros,
    one,
    seconds,
)

_WHERE = "WHERE tenant = ? AND run_id = ? AND key = ?"
_UNEXPIRED = f"(expires_us IS NULL OR expires_us > {NOW_US})"
_RECORD = (
    f"SELECT state, holder, fence, outcome, expires_us - {NOW_US}, call_id, tool "
    f"FROM agentrun_idempotency {_WHERE}"
)
_LIVE = f"{_RECORD} AND {_UNEXPIRED}"
_LIST = (
    "SELECT key, state, holder, fence, call_id, tool FROM agentrun_idempotency "
    f"WHERE tenant = ? AND run_id = ? AND {_UNEXPIRED}"
)


def listed_records(
    connection: sqlite3.Connection, tenant: str, run_id: str
) -> tuple[ListedRecord, ...]:
    """The run's unexpired records as ``records`` lists them, on ``connection`` (so within a
    caller's transaction: ``SqliteCommitStore.read_run_and_records``)."""
    rows: list[Row] = connection.execute(_LIST, (tenant, run_id)).fetchall()
    return tuple(
        ListedRecord(
            key=key, state=ClaimState(state), holder=holder, fence=fence, call_id=call, tool=tool
        )
        for key, state, holder, fence, call, tool in rows
    )


def _record(key: str, row: Row) -> IdempotencyRecord:
    state, holder, fence, outcome, left_us, call_id, tool = row
    return IdempotencyRecord(
        key=key,
        state=ClaimState(state),
        holder=holder,
        fence=fence,
        outcome=outcome,
        remaining=None if left_us is None else seconds(left_us),
        call_id=call_id,
        tool=tool,
    )


def _own(
    connection: sqlite3.Connection, at: tuple[str, str, str], holder: str, fence: int, what: str
) -> None:
    """Admit ``fence`` and check that ``holder`` holds the in-flight claim under it."""
    tenant, run_id, _ = at
    admit(connection, tenant, run_id, fence, what)
    live = first(connection, _LIVE, at)
    if live is None or (live[0], live[1], live[2]) != (ClaimState.IN_FLIGHT, holder, fence):
        raise not_holder(
            tenant,
            run_id,
            what,
            holder=holder,
            fence=fence,
            claim_fence=None if live is None else int(live[2]),
        )


class SqliteIdempotencyStore:
    def __init__(self, database: Database) -> None:
        self._database = database

    async def begin(
        self,
        tenant: str,
        run_id: str,
        key: str,
        *,
        holder: str,
        fence: int,
        ttl: float | None = None,
        call_id: str | None = None,
        tool: str | None = None,
    ) -> Claim:
        at = (tenant, run_id, key)

        def work(connection: sqlite3.Connection) -> Claim:
            admit(connection, tenant, run_id, fence, f"claim of {key}")
            connection.execute(
                f"DELETE FROM agentrun_idempotency {_WHERE} AND expires_us <= {NOW_US}", at
            )
            inserted = connection.execute(
                "INSERT INTO agentrun_idempotency (tenant, run_id, key, state, holder, fence, "
                f"expires_us, call_id, tool) VALUES (?, ?, ?, 'in_flight', ?, ?, {NOW_US} + ?, "
                "?, ?) ON CONFLICT (tenant, run_id, key) DO NOTHING",
                (*at, holder, fence, None if ttl is None else micros(ttl), call_id, tool),
            ).rowcount
            # The row is the one just inserted or the one that was live at the DELETE; it is read
            # unfiltered so a claim lapsing between two statements is still reported as found.
            return Claim(won=inserted == 1, record=_record(key, one(connection, _RECORD, at)))

        return await self._database.write(f"claim {key} for run {run_id!r}", work)

    async def record(
        self, tenant: str, run_id: str, key: str, outcome: str, *, holder: str, fence: int
    ) -> None:
        at = (tenant, run_id, key)

        def work(connection: sqlite3.Connection) -> None:
            _own(connection, at, holder, fence, f"outcome of {key}")
            connection.execute(
                "UPDATE agentrun_idempotency SET state = 'completed', outcome = ?, "
                f"expires_us = NULL {_WHERE}",
                (outcome, *at),
            )

        await self._database.write(f"record the outcome of {key} for run {run_id!r}", work)

    async def abandon(self, tenant: str, run_id: str, key: str, *, holder: str, fence: int) -> None:
        at = (tenant, run_id, key)

        def work(connection: sqlite3.Connection) -> None:
            _own(connection, at, holder, fence, f"abandoning {key}")
            connection.execute(f"DELETE FROM agentrun_idempotency {_WHERE}", at)

        await self._database.write(f"abandon the claim of {key} for run {run_id!r}", work)

    async def read(self, tenant: str, run_id: str, key: str) -> IdempotencyRecord | None:
        def work(connection: sqlite3.Connection) -> Row | None:
            return first(connection, _LIVE, (tenant, run_id, key))

        live = await self._database.read(f"read the claim of {key} for run {run_id!r}", work)
        return None if live is None else _record(key, live)

    async def records(self, tenant: str, run_id: str) -> tuple[ListedRecord, ...]:
        return await self._database.read(
            f"list the claims of run {run_id!r}",
            lambda connection: listed_records(connection, tenant, run_id),
        )

    def keeps_its_records_in(self, database: Database) -> bool:
        """Whether this store's records are those of ``database`` (a ``SqliteCommitStore``
        reads them with the frontier when they are)."""
        return database is self._database

    async def settle(
        self,
        tenant: str,
        run_id: str,
        key: str,
        outcome: str | None,
        *,
        by: str,
        claimed_by: tuple[str, int] | None = None,
    ) -> bool:
        at = (tenant, run_id, key)

        def work(connection: sqlite3.Connection) -> bool:
            if claimed_by is not None:
                row = connection.execute(
                    f"SELECT state, holder, fence FROM agentrun_idempotency {_WHERE}", at
                ).fetchone()
                if row is None or (row[0], row[1], row[2]) != ("in_flight", *claimed_by):
                    return False
            if outcome is None:
                connection.execute(f"DELETE FROM agentrun_idempotency {_WHERE}", at)
                return True
            connection.execute(
                "INSERT INTO agentrun_idempotency (tenant, run_id, key, state, holder, fence, "
                "outcome, expires_us) VALUES (?, ?, ?, 'completed', ?, 0, ?, NULL) "
                "ON CONFLICT (tenant, run_id, key) DO UPDATE SET state = 'completed', "
                "holder = excluded.holder, outcome = excluded.outcome, expires_us = NULL, "
                "call_id = NULL, tool = NULL",
                (*at, by, outcome),
            )
            return True

        return await self._database.write(f"settle {key} for run {run_id!r}", work)

    async def forget(self, tenant: str, run_id: str) -> None:
        def work(connection: sqlite3.Connection) -> None:
            connection.execute(
                "DELETE FROM agentrun_idempotency WHERE tenant = ? AND run_id = ?", (tenant, run_id)
            )

        await self._database.write(f"forget the claims of run {run_id!r}", work)
