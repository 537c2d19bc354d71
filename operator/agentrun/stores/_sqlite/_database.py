"""One SQLite file, one connection, one thread: how every SQLite store talks to its database.

**Off the event loop, on one thread.** ``sqlite3`` blocks, so it must not run on the event loop,
and a ``sqlite3.Connection`` belongs to the thread that opened it. A single-thread executor that
opens the connection and runs every statement of the backend is correct by construction, and it
serialises the backend's own calls: twenty concurrent acquisitions in one process are twenty
transactions in a row. A call whose awaiting task is cancelled still runs to its end (commit or
rollback) on that thread; it is never left half-done.

**Between processes, ``BEGIN IMMEDIATE``.** Every write runs in a transaction that takes the
database's write lock before its first read, so a check and the write that depends on it (is the
lease live? is this fence still the highest?) never interleave with another process's. A
deferred transaction would not do: in WAL mode its upgrade from reader to writer fails at once
with SQLITE_BUSY instead of waiting its turn. Reads are single statements in autocommit mode and,
in WAL mode, never wait for a writer.

**Waiting is bounded.** ``busy_timeout`` (five seconds unless the URL says
``?busy_timeout=MS``, in milliseconds)
bounds how long a write waits for another process's lock. Past it SQLite answers SQLITE_BUSY,
which surfaces as a retryable ``StoreUnavailableError``, never as a hang. Every ``sqlite3``
error is translated here, in ``Database._run``, and nowhere else, by the policy every driver
shares (``agentrun._storecore.classify.SQLITE``): a busy or locked file, an I/O error, is
retryable; a constraint or trigger that refuses the row is a ``StoreRefusedError``.

**Durability: WAL with ``synchronous=FULL``.** WAL with NORMAL already survives a crash of the
process (kill -9 included): a committed transaction is in the WAL file, in the kernel's hands.
What NORMAL can lose is the last transactions before a power loss or kernel crash, because it
fsyncs the WAL only at checkpoints. The kit writes a tool call's intent before the tool is handed
the call, and that record must outlive whatever the tool did: a seat booked with an airline
survives this machine losing power, so the record that says "this was dispatched" must too.
FULL fsyncs the WAL at every commit; that is the price of the promise: a checkpoint ``put``
costs several times what it does with NORMAL for a small frontier, less so for a large one
(``bench/README.md``).

**The database's clock.** ``NOW_US`` is the database's own ``julianday('now')`` as integer
microseconds since the Unix epoch. SQLite's 'now' has millisecond resolution and is the same for
every use within one statement, so an expiry written and a remaining time read in one statement
agree exactly. (``unixepoch('subsec')`` would read better but needs SQLite 3.42.) Integers, not
floats, so ``expires - now`` is exact and a remaining time never exceeds the TTL it came from.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, unquote, urlsplit

from agentrun._errors import ConfigurationError
from agentrun._storecore.classify import SQLITE, classified
from agentrun._storecore.fences import refuse_stale

T = TypeVar("T")
Row = tuple[Any, ...]
Work = Callable[[sqlite3.Connection], T]

MINIMUM_SQLITE = (3, 37, 0)
"""STRICT tables (3.37) and ``RETURNING`` (3.35)."""

DEFAULT_BUSY_TIMEOUT_MS = 5000

NOW_US = "(CAST(ROUND((julianday('now') - 2440587.5) * 86400000.0) AS INTEGER) * 1000)"
"""The database's clock, in microseconds since the Unix epoch (2440587.5 is its Julian day)."""


def parse_url(url: str) -> tuple[Path, int]:
    """The file and busy timeout (ms) that a ``sqlite:///path.db[?busy_timeout=MS]`` URL names.

    As elsewhere (SQLAlchemy), three slashes start a relative path and a fourth an absolute one:
    ``sqlite:///./.agentrun/state.db`` is relative to the working directory,
    ``sqlite:////var/lib/agentrun/state.db`` is absolute.
    """
    parts = urlsplit(url)
    if parts.scheme != "sqlite" or parts.netloc or not parts.path.startswith("/"):
        raise ConfigurationError(
            f"store URL {url!r} is not a SQLite URL; write sqlite:///relative/path.db or "
            "sqlite:////absolute/path.db"
        )
    path = unquote(parts.path[1:])
    if not path or path.endswith("/"):
        raise ConfigurationError(f"store URL {url!r} names no file; end it with a file name")
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - {"busy_timeout"})
    if unknown:
        raise ConfigurationError(
            f"store URL {url!r} has unknown parameters {unknown}; the only one is busy_timeout=MS"
        )
    timeouts = query.get("busy_timeout", [str(DEFAULT_BUSY_TIMEOUT_MS)])
    if len(timeouts) != 1 or not timeouts[0].isdigit():
        raise ConfigurationError(
            f"store URL {url!r} has busy_timeout={timeouts}; give one whole number of "
            "milliseconds, e.g. busy_timeout=5000"
        )
    return Path(path), int(timeouts[0])


def micros(seconds: float) -> int:
    """A duration in whole microseconds, rounded down so it never exceeds what was asked."""
    return int(seconds * 1_000_000)


def seconds(micros: int) -> float:
    return max(0, micros) / 1_000_000


def first(connection: sqlite3.Connection, sql: str, parameters: tuple[object, ...]) -> Row | None:
    """The first row of a statement run to completion (``RETURNING`` included), or None."""
    rows: list[Row] = connection.execute(sql, parameters).fetchall()
    return rows[0] if rows else None


def one(connection: sqlite3.Connection, sql: str, parameters: tuple[object, ...]) -> Row:
    """The row a statement always yields (an aggregate, an upsert's ``RETURNING``)."""
    row = first(connection, sql, parameters)
    if row is None:
        raise sqlite3.DatabaseError(f"expected a row from: {sql}")
    return row


def admit(connection: sqlite3.Connection, tenant: str, run_id: str, fence: int, what: str) -> None:
    """Check ``fence`` against the run's high-water mark and raise the mark to it.

    Runs inside the caller's write transaction, so the check, the raise and the write it guards
    commit together or not at all.
    """
    raised = first(
        connection,
        "INSERT INTO agentrun_fences (tenant, run_id, highest) VALUES (?, ?, ?) "
        "ON CONFLICT (tenant, run_id) DO UPDATE SET highest = excluded.highest "
        "WHERE excluded.highest >= agentrun_fences.highest RETURNING highest",
        (tenant, run_id, fence),
    )
    if raised is None:
        (current,) = one(
            connection,
            "SELECT highest FROM agentrun_fences WHERE tenant = ? AND run_id = ?",
            (tenant, run_id),
        )
        refuse_stale(tenant=tenant, run_id=run_id, fence=fence, current=current, what=what)


def transaction(connection: sqlite3.Connection, work: Work[T]) -> T:
    """Run ``work`` in ``BEGIN IMMEDIATE``; commit what it did, or roll all of it back."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        result = work(connection)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
        raise
    return result


def _connect(path: Path, busy_timeout_ms: int, create: bool) -> sqlite3.Connection:
    if sqlite3.sqlite_version_info < MINIMUM_SQLITE:
        raise ConfigurationError(
            f"the SQLite store needs SQLite {'.'.join(map(str, MINIMUM_SQLITE))} or newer "
            f"(STRICT tables, RETURNING); this Python is linked with {sqlite3.sqlite_version}"
        )
    if not create and not path.is_file():
        raise ConfigurationError(
            f"there is no SQLite store at {path} (the file does not exist); check the store URL. "
            "Only a new run creates a store"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigurationError(
            f"cannot create the folder of the SQLite store {path}: {error}"
        ) from error
    connection = sqlite3.connect(path, timeout=busy_timeout_ms / 1000, isolation_level=None)
    try:
        (mode,) = one(connection, "PRAGMA journal_mode = WAL", ())
        if mode != "wal":
            raise ConfigurationError(
                f"SQLite store {path} cannot use WAL mode (it is in "
                f"{mode!r} mode); put it on a local file system"
            )
        connection.execute("PRAGMA synchronous = FULL")
    except sqlite3.OperationalError:
        connection.close()
        raise
    except sqlite3.DatabaseError as error:
        connection.close()
        raise ConfigurationError(
            f"{path} is not a SQLite database ({error}); point the store "
            "URL at a new file or at an agentrun store"
        ) from error
    except BaseException:
        connection.close()
        raise
    return connection


class Database:
    """The one connection of a backend, the thread that owns it, and the error translation."""

    def __init__(
        self, path: Path, connection: sqlite3.Connection, executor: ThreadPoolExecutor
    ) -> None:
        self.path = path
        self._connection = connection
        self._executor = executor
        self._name = f"the SQLite store {path}"

    @classmethod
    async def open(cls, path: Path, busy_timeout_ms: int, create: bool = True) -> Database:
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentrun-sqlite")
        try:
            connection = await cls._run(
                executor,
                f"the SQLite store {path}",
                "open the file",
                lambda: _connect(path, busy_timeout_ms, create),
            )
        except BaseException:
            executor.shutdown(wait=False)
            raise
        return cls(path, connection, executor)

    async def read(self, operation: str, work: Work[T]) -> T:
        """Run ``work`` (single statements, no transaction) on the database's thread."""
        return await self._run(
            self._executor, self._name, operation, lambda: work(self._connection)
        )

    async def write(self, operation: str, work: Work[T]) -> T:
        """Run ``work`` in one ``BEGIN IMMEDIATE`` transaction on the database's thread."""
        return await self._run(
            self._executor, self._name, operation, lambda: transaction(self._connection, work)
        )

    async def close(self) -> None:
        try:
            await self._run(self._executor, self._name, "close", self._connection.close)
        finally:
            self._executor.shutdown(wait=False)

    @staticmethod
    async def _run(
        executor: ThreadPoolExecutor, name: str, operation: str, call: Callable[[], T]
    ) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(executor, call)
        except sqlite3.Error as error:
            # The primary result code: Python names only the extended codes its SQLite knew.
            code = getattr(error, "sqlite_errorcode", None)
            primary = None if code is None else code & 0xFF
            raise classified(SQLITE, name, operation, error, primary) from error
