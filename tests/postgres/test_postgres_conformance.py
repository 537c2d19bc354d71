"""The PostgreSQL stores against every conformance suite, on a real server and its real clock."""

from __future__ import annotations

from agentrun import testing


class TestPostgresCheckpoints(testing.CheckpointStoreConformance): ...


class TestPostgresLeases(testing.LeaseStoreConformance): ...


class TestPostgresIdempotency(testing.IdempotencyStoreConformance): ...


class TestPostgresHistory(testing.HistoryStoreConformance): ...


class TestPostgresLedger(testing.LedgerConformance): ...
