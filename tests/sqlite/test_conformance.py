"""The SQLite stores against every conformance suite, each test on a fresh database file.

Time passes for real here: expiry is decided by the database's own clock, which no test moves.
"""

from __future__ import annotations

from agentrun import testing


class TestSqliteCheckpoints(testing.CheckpointStoreConformance): ...


class TestSqliteLeases(testing.LeaseStoreConformance): ...


class TestSqliteIdempotency(testing.IdempotencyStoreConformance): ...


class TestSqliteHistory(testing.HistoryStoreConformance): ...


class TestSqliteLedger(testing.LedgerConformance): ...
