"""What every PostgreSQL store shares: table names, the pool, driver errors, and the fence.

Driver errors become kit errors in exactly one place (``translated``), by the policy every
driver shares (``agentrun._storecore.classify.POSTGRES``, on the SQLSTATE's class): a refused
connection, a dead socket, a timeout or a server error is a retryable ``StoreUnavailableError``;
a call the server refuses (data it cannot hold, a constraint, a privilege) is a
``StoreRefusedError``, because sending it again would be refused again. (Data it could not hold
used to be a NUL in a frontier or an outcome and an id past the index's row size; neither
reaches the server now: payloads are ``bytea`` and the kit refuses such ids itself, see
``agentrun._identifiers``.) Every
call carries a timeout of its own, so a server that stops answering fails the call in seconds
even on a pool the caller built without a ``command_timeout``.

Table names are configurable for deployments that share a database, and are the one thing put
into SQL text rather than bound as parameters, so each is checked as a plain lower-case
identifier before any statement is built, and quoted anyway.

The fence lives in one row per (tenant, run) shared by all five stores. ``FENCE_CTE`` is the
check-and-raise every fenced write embeds in its own statement: an upsert that locks that row,
raises it to the writer's fence if that is higher, and returns the high-water mark as it stands
after the lock (not as the statement's snapshot saw it). The write proper selects from it only
when the mark equals the writer's fence, so check, raise and write are one atomic statement.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

from agentrun.stores._drivers import driver
from agentrun.stores._postgres._lane import Lane

with driver("asyncpg", extra="postgres"):
    import asyncpg

from agentrun._errors import ConfigurationError
from agentrun._storecore.classify import POSTGRES, classified
from agentrun._storecore.fences import refuse_stale

DEFAULT_TIMEOUT = 10.0
"""Seconds any one call may take: acquiring a connection, then the statement."""

_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]{0,62}")

_DRIVER_ERRORS = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
    TimeoutError,
)


@dataclass(frozen=True)
class PostgresTables:
    """The table each store uses; the defaults are the names in the published DDL."""

    schema_version: str = "adk_schema_version"
    fences: str = "adk_run_fences"
    checkpoints: str = "adk_checkpoints"
    leases: str = "adk_run_leases"
    idempotency: str = "adk_idempotency"
    history: str = "adk_history_segments"
    ledger: str = "adk_ledger"
    ledger_totals: str = "adk_ledger_totals"
    quota_scopes: str = "adk_quota_scopes"
    quota_admissions: str = "adk_quota_admissions"
    quota_windows: str = "adk_quota_windows"

    def __post_init__(self) -> None:
        for role, name in self.items():
            if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name):
                raise ConfigurationError(
                    f"PostgreSQL table name for {role} is {name!r}; use a plain lower-case "
                    "identifier: a letter or underscore, then letters, digits or underscores, "
                    "63 characters at most"
                )
        seen: dict[str, str] = {}
        for role, name in self.items():
            if name in seen:
                raise ConfigurationError(
                    f"PostgreSQL tables for {seen[name]} and {role} are both named {name!r}; "
                    "each store needs a table of its own"
                )
            seen[name] = role

    def items(self) -> Iterator[tuple[str, str]]:
        for field in dataclasses.fields(self):
            yield field.name, getattr(self, field.name)

    def sql(self, template: str) -> str:
        """``template`` with ``{role}`` replaced by that role's quoted table name."""
        return template.format(**{role: f'"{name}"' for role, name in self.items()})


def redacted(url: str) -> str:
    """``url`` without its password, for messages and reprs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rpartition("@")
    user = netloc[0].partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[2]}"))


@contextlib.contextmanager
def translated(store: str, operation: str) -> Iterator[None]:
    """Turn a driver error raised inside the block into the kit's error for it."""
    try:
        yield
    except _DRIVER_ERRORS as error:
        sqlstate: str | None = getattr(error, "sqlstate", None)
        sqlclass = None if sqlstate is None else sqlstate[:2]
        raise classified(POSTGRES, store, operation, error, sqlclass) from error


async def _session_untouched(connection: asyncpg.Connection) -> None:
    """What a released connection needs beyond asyncpg's own rollback of an open transaction:
    nothing. asyncpg's default sends ``RESET ALL``, ``CLOSE ALL``, ``UNLISTEN *`` and an advisory
    unlock on every release, a round trip of its own that the caller waits for: half of a
    boundary's round trips. The stores set no session state, open no cursors, listen to nothing
    and take no advisory locks, so there is nothing for it to reset."""


async def create_pool(url: str) -> asyncpg.Pool:
    """A small pool for ``url`` whose connections time out statements after ``DEFAULT_TIMEOUT``."""
    try:
        with translated("PostgreSQL", f"connect to {redacted(url)}"):
            return await asyncpg.create_pool(
                url,
                min_size=1,
                max_size=10,
                timeout=DEFAULT_TIMEOUT,
                command_timeout=DEFAULT_TIMEOUT,
                reset=_session_untouched,
            )
    except ValueError as error:
        message = f"PostgreSQL URL {redacted(url)!r} is not usable: {error}"
        raise ConfigurationError(message) from error


class PostgresStore:
    """What every PostgreSQL store shares: one ``Database`` over a pool and the table names.

    A store names itself (``name``, for its errors) and turns its SQL templates into statements
    for the configured tables in ``_prepare``.
    """

    name: ClassVar[str]

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        tables: PostgresTables | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        lane: Lane | None = None,
    ) -> None:
        """``lane``: the connection kept between calls by whoever owns ``pool`` and closes the
        lane before it (``open_backend``); None keeps nothing."""
        self._db = Database(pool, tables, self.name, timeout, lane)
        self._prepare(self._db.tables.sql)

    def _prepare(self, sql: Callable[[str], str]) -> None:
        raise NotImplementedError

    def shares_tables_with(self, other: PostgresStore) -> bool:
        """Whether ``other`` reads and writes the same tables through the same pool: one
        statement may then read both stores' rows."""
        return other._db.pool is self._db.pool and other._db.tables == self._db.tables


class Database:
    """A pool and the table names, with every call timed and its driver errors translated."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        tables: PostgresTables | None,
        store: str,
        timeout: float = DEFAULT_TIMEOUT,
        lane: Lane | None = None,
    ) -> None:
        self.pool = pool
        self.tables = tables or PostgresTables()
        self.store = store
        self.timeout = timeout
        self._lane = lane

    @contextlib.asynccontextmanager
    async def connection(self, operation: str) -> AsyncIterator[Any]:
        """The pool's kept connection if it has one free (``_lane``), else a pooled one; a driver
        error in the block leaves as a kit error."""
        lane = self._lane
        with translated(self.store, operation):
            connection = None if lane is None else await lane.take()
            if connection is None:
                # A pool with an idle connection hands it over without waiting, so the
                # acquisition needs no timeout then; asyncpg's costs a timer task a call (a few
                # hundredths of a small checkpoint write). Nothing runs between the check and the
                # acquisition on this loop.
                timeout = None if self.pool.get_idle_size() else self.timeout
                connection = await self.pool.acquire(timeout=timeout)
            succeeded = False
            try:
                yield connection
                succeeded = True
            finally:
                if lane is None:
                    await self.pool.release(connection)
                else:
                    await lane.done(connection, succeeded=succeeded)

    async def fetchrow(self, operation: str, sql: str, *args: object) -> Any:
        async with self.connection(operation) as connection:
            return await connection.fetchrow(sql, *args, timeout=self.timeout)

    async def fetch(self, operation: str, sql: str, *args: object) -> list[Any]:
        async with self.connection(operation) as connection:
            return list(await connection.fetch(sql, *args, timeout=self.timeout))

    async def execute(self, operation: str, sql: str, *args: object) -> None:
        async with self.connection(operation) as connection:
            await connection.execute(sql, *args, timeout=self.timeout)


FENCE_CTE = (
    "fence AS ("
    "INSERT INTO {fences} AS f (tenant, run_id, fence) VALUES ($1, $2, $3) "
    "ON CONFLICT (tenant, run_id) DO UPDATE SET fence = GREATEST(f.fence, EXCLUDED.fence) "
    "RETURNING f.fence AS current)"
)
"""Check-and-raise of the run's fence; binds tenant $1, run id $2, the writer's fence $3.

It rewrites the fence row on every write, also when the mark does not move. Only locking it then
(``SELECT ... FOR UPDATE``, upserting only to insert or raise) was measured and is no cheaper:
the lock writes the row and the WAL too, and the extra CTEs cost what the update saved."""


def admit(tenant: str, run_id: str, fence: int, current: int, what: str) -> None:
    """Raise ``StaleFenceError`` unless ``FENCE_CTE`` admitted ``fence``: ``current`` is the
    mark after the CTE raised it, so above ``fence`` only when the fence was stale."""
    refuse_stale(tenant=tenant, run_id=run_id, fence=fence, current=current, what=what)
