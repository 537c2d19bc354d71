"""The embedded default: every store of a run in one SQLite file the kit owns.

``open_backend("sqlite:///./.agentrun/state.db")`` creates the file's folder, opens the file in
WAL mode, applies the schema if the file has none (refusing one that records another version,
see ``schema``), and returns the stores over one connection. The five stores of a run share one
fence table, so a lease acquisition raises the bar for every later write of the run at once, in
every process that opens the file; the quota store keeps the scopes' admissions and budgets.
How the stores talk to the file (one thread, ``BEGIN IMMEDIATE``, busy timeout,
``synchronous=FULL``, the database's clock) is explained in ``_database``.
"""

from __future__ import annotations

from agentrun._backend import StoreSet, closed_on_failure
from agentrun.stores._sqlite._database import Database, parse_url
from agentrun.stores._sqlite.checkpoints import SqliteCheckpointStore
from agentrun.stores._sqlite.commits import SqliteCommitStore
from agentrun.stores._sqlite.history import SqliteHistoryStore
from agentrun.stores._sqlite.idempotency import SqliteIdempotencyStore
from agentrun.stores._sqlite.leases import SqliteLeaseStore
from agentrun.stores._sqlite.ledger import SqliteLedger
from agentrun.stores._sqlite.quotas import SqliteQuotaStore
from agentrun.stores._sqlite.schema import EXPECTED_SQLITE_SCHEMA, install

__all__ = [
    "EXPECTED_SQLITE_SCHEMA",
    "SqliteCheckpointStore",
    "SqliteCommitStore",
    "SqliteHistoryStore",
    "SqliteIdempotencyStore",
    "SqliteLeaseStore",
    "SqliteLedger",
    "SqliteQuotaStore",
    "open_backend",
]


async def open_backend(url: str, *, create: bool = True) -> StoreSet:
    """The SQLite stores over the file ``url`` names (``sqlite:///relative/path.db`` or
    ``sqlite:////absolute/path.db``, optionally ``?busy_timeout=MS``); with ``create=False`` a
    file that does not exist is refused instead of made (and its folder with it)."""
    path, busy_timeout_ms = parse_url(url)
    database = await Database.open(path, busy_timeout_ms, create)
    async with closed_on_failure(database.close):
        await database.write("apply its schema", lambda connection: install(connection, path))
    return StoreSet(
        checkpoints=SqliteCheckpointStore(database),
        leases=SqliteLeaseStore(database),
        idempotency=SqliteIdempotencyStore(database),
        history=SqliteHistoryStore(database),
        ledger=SqliteLedger(database),
        quotas=SqliteQuotaStore(database),
        url=url,
        closer=database.close,
        commits=SqliteCommitStore(database),
    )
