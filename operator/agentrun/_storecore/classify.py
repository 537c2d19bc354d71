"""One policy for every driver: which errors may be retried, which are refusals, which records
are unreadable.

A caller decides on ``retryable``; an error reported retryable that can never succeed is retried
for ever. So a driver error becomes one of two kit errors, by the same rule for every driver:

* ``StoreUnavailableError`` (retryable): the server could not be reached, timed out, was busy
  or locked, or is failing over. The same call may succeed later.
* ``StoreRefusedError`` (not retryable): the server refused the call itself, because of what it
  is or of how the server is set up: a constraint or trigger, a value of the wrong type or size,
  a missing permission, a memory limit it will not exceed, a damaged file. The same call is
  refused again until a person changes something.

Each driver's table (``SQLITE``, ``REDIS``, ``POSTGRES``) lists the codes that refuse; any
other error, known or not, is unavailable, as every error was before the tables: a code left
out can make a caller wait, never give up on a call that would have worked. The codes are
plain values, so nothing here imports a driver: each adapter reads the code off its driver's
error (SQLite's primary result code, Redis's error reply's first word, PostgreSQL's SQLSTATE
class) and hands it to ``classified``.

A record a store holds that does not decode is neither: ``reading`` turns the decoding error
into ``UnreadableRecordError`` naming the run and the store, the same from every store.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from agentrun._errors import (
    StoreError,
    StoreRefusedError,
    StoreUnavailableError,
    UnreadableRecordError,
)

Code = str | int


@dataclass(frozen=True)
class Policy:
    """One driver's table: the codes whose errors refuse the call."""

    driver: str
    refused: frozenset[Code]

    def refuses(self, code: Code | None) -> bool:
        return code in self.refused


SQLITE = Policy(
    "SQLite",
    refused=frozenset(
        {
            3,  # SQLITE_PERM: an access mode the file refuses
            8,  # SQLITE_READONLY: a file the process may not write
            11,  # SQLITE_CORRUPT: a damaged database file
            18,  # SQLITE_TOOBIG: a value over SQLITE_MAX_LENGTH
            19,  # SQLITE_CONSTRAINT: a CHECK, a UNIQUE, a STRICT type, a trigger's RAISE(ABORT)
            20,  # SQLITE_MISMATCH: a datatype mismatch
            23,  # SQLITE_AUTH: an authorizer that denies the statement
            26,  # SQLITE_NOTADB: a file that is not a database
        }
    ),
)
"""SQLite, by primary result code (the low byte of ``sqlite3.Error.sqlite_errorcode``: every
extended code of a constraint, ``SQLITE_CONSTRAINT_DATATYPE`` among them, is a 19). Retried:
``SQLITE_BUSY`` (5) and ``SQLITE_LOCKED`` (6), another process's lock past the busy timeout;
``SQLITE_IOERR`` (10), ``SQLITE_FULL`` (13), ``SQLITE_CANTOPEN`` (14), ``SQLITE_NOMEM`` (7),
``SQLITE_INTERRUPT`` (9), ``SQLITE_PROTOCOL`` (15); and an error with no code."""

REDIS = Policy(
    "Redis",
    refused=frozenset(
        {
            "WRONGTYPE",  # a key of the run holding another type than the store keeps there
            "NOPERM",  # an ACL user without the command or the key
            "NOAUTH",  # a server that wants a password the URL does not give
            "WRONGPASS",  # a user or password the server refuses
            "OOM",  # maxmemory reached under noeviction: writes refused until memory is freed
            "CROSSSLOT",  # keys of one call in two Cluster slots (a kit bug, not a server state)
        }
    ),
)
"""Redis, by error reply code (the reply's first word, also when a script's command failed).
Retried: ``LOADING``, ``BUSY``, ``MASTERDOWN``, ``READONLY`` (a replica answering a write: a
failover in progress, after which the same write reaches the new primary), ``TRYAGAIN``,
``CLUSTERDOWN``, ``ERR`` replies, and connection errors and timeouts."""

POSTGRES = Policy(
    "PostgreSQL",
    refused=frozenset(
        {
            "22",  # data exception: a value the column cannot hold
            "23",  # integrity constraint violation: a CHECK, a UNIQUE, a foreign key
            "28",  # invalid authorization: a user or password the server refuses
            "42",  # syntax or access rule: no privilege on a table, a table that does not exist
            "54",  # program limit exceeded: an index row or a statement too large
            "P0",  # PL/pgSQL: a trigger's RAISE EXCEPTION refusing the row
        }
    ),
)
"""PostgreSQL, by SQLSTATE class (its first two characters). Retried: ``08`` connection,
``40`` rollback (serialization failure, deadlock), ``53`` insufficient resources, ``55P03`` lock
not available, ``57`` operator intervention (a statement timeout, a shutdown), ``58`` system
error, ``25006`` read-only transaction (a standby answering during a failover), and driver
errors with no SQLSTATE (a refused connection, a dead socket, a timeout)."""


def classified(
    policy: Policy, store: str, operation: str, error: BaseException, code: Code | None
) -> StoreError:
    """The kit's error for ``error``, a driver error whose code is ``code`` (None: it has none),
    raised while ``store`` tried to ``operation``."""
    if policy.refuses(code):
        return StoreRefusedError(store, operation, error)
    return StoreUnavailableError(store, operation, error)


@contextlib.contextmanager
def reading(store: str, tenant: str, run_id: str, what: str) -> Iterator[None]:
    """Decode ``what`` (a record of the run, as ``store`` holds it) inside the block: a value
    that does not decode (``ValueError``, pydantic's ``ValidationError`` included) leaves as
    ``UnreadableRecordError`` naming the run, never as a parsing error."""
    try:
        yield
    except ValueError as error:
        raise UnreadableRecordError(
            run_id=run_id, tenant=tenant, store=store, detail=f"{what} ({error})"
        ) from None
