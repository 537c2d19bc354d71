"""``PostgresIdempotencyStore``: fenced claims and outcomes per key, on the database clock.

``begin`` is one statement: the shared fence CTE, then an upsert that inserts the claim or, on
conflict, rewrites the existing row to the new claim if it has expired and to itself otherwise,
returning the row as it stands under its lock. Every caller of a 20-way race on one key thus
reads the winner's claim, not a snapshot taken before the winner committed. Each claim carries a
random ``claim`` id, which is how a caller tells that the row returned is its own new claim: the
same holder beginning the same key twice under one fence gets ``won=False`` the second time.

``record`` and ``abandon`` change the row only for the claim's own holder and fence, in the same
statement as the fence check; anything else is ``StaleFenceError``. ``settle`` is a person's
answer and is not fenced. Expiry (``ttl``) is measured by ``clock_timestamp()`` only; a claim
without one never expires, and an expired claim reads as None.

Outcomes are kept as UTF-8 ``bytea``: ``text`` cannot hold a NUL character, and a tool's output
may carry one, which every other store keeps.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import asyncpg

from agentrun._idempotency import (
    Claim,
    ClaimState,
    IdempotencyRecord,
    ListedRecord,
    not_holder,
)
from agentrun.stores._postgres._shared import (
    FENCE_CTE,
    PostgresStore,
    admit,
)

_LIVE = "(expires_at IS NULL OR expires_at > clock_timestamp())"
_REMAINING = "EXTRACT(EPOCH FROM expires_at - clock_timestamp())::float8 AS remaining"

_BEGIN = (
    "WITH " + FENCE_CTE + ", claimed AS ("
    "INSERT INTO {idempotency} AS i "
    "(tenant, run_id, key, state, holder, fence, outcome, expires_at, claim, call_id, tool) "
    "SELECT $1, $2, $4, 'in_flight', $5, $3, NULL, "
    "clock_timestamp() + $6::float8 * interval '1 second', $7, $8, $9 "
    "FROM fence WHERE current = $3 "
    "ON CONFLICT (tenant, run_id, key) DO UPDATE SET "
    "(state, holder, fence, outcome, expires_at, claim, call_id, tool) = ("
    "SELECT CASE WHEN d.lapsed THEN 'in_flight' ELSE i.state END,"
    " CASE WHEN d.lapsed THEN EXCLUDED.holder ELSE i.holder END,"
    " CASE WHEN d.lapsed THEN EXCLUDED.fence ELSE i.fence END,"
    " CASE WHEN d.lapsed THEN NULL ELSE i.outcome END,"
    " CASE WHEN d.lapsed THEN d.now + $6::float8 * interval '1 second' ELSE i.expires_at END,"
    " CASE WHEN d.lapsed THEN EXCLUDED.claim ELSE i.claim END,"
    " CASE WHEN d.lapsed THEN EXCLUDED.call_id ELSE i.call_id END,"
    " CASE WHEN d.lapsed THEN EXCLUDED.tool ELSE i.tool END "
    "FROM (SELECT now, i.expires_at IS NOT NULL AND i.expires_at <= now AS lapsed "
    "FROM (SELECT clock_timestamp() AS now) AS c) AS d) "
    "RETURNING i.state, i.holder, i.fence, i.outcome, i.claim, i.call_id, i.tool, "
    "EXTRACT(EPOCH FROM i.expires_at - clock_timestamp())::float8 AS remaining) "
    "SELECT current, claimed.* FROM fence LEFT JOIN claimed ON true"
)
_OWNED = (
    "tenant = $1 AND run_id = $2 AND key = $4 AND state = 'in_flight' AND holder = $5 "
    "AND fence = $3 AND " + _LIVE + " AND EXISTS (SELECT 1 FROM fence WHERE current = $3)"
)
_CURRENT = (
    "SELECT current, (SELECT count(*) FROM changed) AS changed, "
    "(SELECT fence FROM {idempotency} WHERE tenant = $1 AND run_id = $2 AND key = $4) "
    "AS claim_fence FROM fence"
)
_RECORD = (
    "WITH " + FENCE_CTE + ", changed AS ("
    "UPDATE {idempotency} SET state = 'completed', outcome = $6, expires_at = NULL "
    "WHERE " + _OWNED + " RETURNING 1) " + _CURRENT
)
_ABANDON = (
    "WITH " + FENCE_CTE + ", changed AS ("
    "DELETE FROM {idempotency} WHERE " + _OWNED + " RETURNING 1) " + _CURRENT
)
_READ = (
    "SELECT state, holder, fence, outcome, call_id, tool, " + _REMAINING + " FROM {idempotency} "
    "WHERE tenant = $1 AND run_id = $2 AND key = $3 AND " + _LIVE
)
LIST = (
    "SELECT key, state, holder, fence, call_id, tool FROM {idempotency} "
    "WHERE tenant = $1 AND run_id = $2 AND " + _LIVE
)
"""The run's unexpired records, as ``records`` lists them (``listed_record`` reads a row); also
a part of ``PostgresCommitStore.read_run_and_records``'s statement."""
_SETTLE = (
    "INSERT INTO {idempotency} AS i "
    "(tenant, run_id, key, state, holder, fence, outcome, expires_at, claim) "
    "VALUES ($1, $2, $3, 'completed', $4, 0, $5, NULL, $6) "
    "ON CONFLICT (tenant, run_id, key) DO UPDATE SET state = 'completed', "
    "holder = EXCLUDED.holder, outcome = EXCLUDED.outcome, expires_at = NULL, "
    "call_id = NULL, tool = NULL"
)
_UNSETTLE = "DELETE FROM {idempotency} WHERE tenant = $1 AND run_id = $2 AND key = $3"
_CLAIM_IS = (
    "tenant = $1 AND run_id = $2 AND key = $3 AND state = 'in_flight' AND holder = $4 "
    "AND fence = $5"
)
_SETTLE_CLAIM = (
    "UPDATE {idempotency} SET state = 'completed', holder = $6, outcome = $7, expires_at = NULL, "
    "call_id = NULL, tool = NULL WHERE " + _CLAIM_IS + " RETURNING 1"
)
_UNSETTLE_CLAIM = "DELETE FROM {idempotency} WHERE " + _CLAIM_IS + " RETURNING 1"
_FORGET = "DELETE FROM {idempotency} WHERE tenant = $1 AND run_id = $2"


class PostgresIdempotencyStore(PostgresStore):
    name = "PostgreSQL idempotency store"

    def _prepare(self, sql: Callable[[str], str]) -> None:
        self._begin, self._record, self._abandon = sql(_BEGIN), sql(_RECORD), sql(_ABANDON)
        self._read, self._list, self._settle = sql(_READ), sql(LIST), sql(_SETTLE)
        self._unsettle, self._forget = sql(_UNSETTLE), sql(_FORGET)
        self._settle_claim, self._unsettle_claim = sql(_SETTLE_CLAIM), sql(_UNSETTLE_CLAIM)

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
        claim = uuid.uuid4()
        row = await self._db.fetchrow(
            f"claim {key!r} for run {run_id!r}",
            self._begin,
            tenant,
            run_id,
            fence,
            key,
            holder,
            ttl,
            claim,
            call_id,
            tool,
        )
        admit(tenant, run_id, fence, int(row["current"]), f"claim of {key}")
        return Claim(won=row["claim"] == claim, record=_record(key, row))

    async def _end_own(
        self,
        sql: str,
        what: str,
        tenant: str,
        run_id: str,
        key: str,
        holder: str,
        fence: int,
        *extra: object,
    ) -> None:
        row = await self._db.fetchrow(
            f"{what} for run {run_id!r}", sql, tenant, run_id, fence, key, holder, *extra
        )
        admit(tenant, run_id, fence, int(row["current"]), what)
        if not row["changed"]:
            current = row["claim_fence"]
            raise not_holder(
                tenant,
                run_id,
                what,
                holder=holder,
                fence=fence,
                claim_fence=None if current is None else int(current),
            )

    async def record(
        self, tenant: str, run_id: str, key: str, outcome: str, *, holder: str, fence: int
    ) -> None:
        await self._end_own(
            self._record,
            f"outcome of {key}",
            tenant,
            run_id,
            key,
            holder,
            fence,
            outcome.encode(),
        )

    async def abandon(self, tenant: str, run_id: str, key: str, *, holder: str, fence: int) -> None:
        await self._end_own(self._abandon, f"abandoning {key}", tenant, run_id, key, holder, fence)

    async def read(self, tenant: str, run_id: str, key: str) -> IdempotencyRecord | None:
        row = await self._db.fetchrow(
            f"read {key!r} of run {run_id!r}", self._read, tenant, run_id, key
        )
        return None if row is None else _record(key, row)

    async def records(self, tenant: str, run_id: str) -> tuple[ListedRecord, ...]:
        rows = await self._db.fetch(
            f"list the claims of run {run_id!r}", self._list, tenant, run_id
        )
        return tuple(listed_record(row) for row in rows)

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
        operation = f"settle {key!r} of run {run_id!r}"
        if claimed_by is not None:
            # One statement, so the check and the write see the same row version.
            claim = (tenant, run_id, key, *claimed_by)
            if outcome is None:
                row = await self._db.fetchrow(operation, self._unsettle_claim, *claim)
            else:
                row = await self._db.fetchrow(
                    operation, self._settle_claim, *claim, by, outcome.encode()
                )
            return row is not None
        if outcome is None:
            await self._db.execute(operation, self._unsettle, tenant, run_id, key)
        else:
            await self._db.execute(
                operation, self._settle, tenant, run_id, key, by, outcome.encode(), uuid.uuid4()
            )
        return True

    async def forget(self, tenant: str, run_id: str) -> None:
        await self._db.execute(f"forget the claims of run {run_id!r}", self._forget, tenant, run_id)


def _record(key: str, row: asyncpg.Record) -> IdempotencyRecord:
    remaining = row["remaining"]
    return IdempotencyRecord(
        key=key,
        state=ClaimState(row["state"]),
        holder=str(row["holder"]),
        fence=int(row["fence"]),
        outcome=None if row["outcome"] is None else bytes(row["outcome"]).decode(),
        remaining=None if remaining is None else max(0.0, float(remaining)),
        call_id=row["call_id"],
        tool=row["tool"],
    )


def listed_record(row: asyncpg.Record) -> ListedRecord:
    """A row of ``LIST`` as ``records`` lists it."""
    return ListedRecord(
        key=str(row["key"]),
        state=ClaimState(row["state"]),
        holder=str(row["holder"]),
        fence=int(row["fence"]),
        call_id=row["call_id"],
        tool=row["tool"],
    )
