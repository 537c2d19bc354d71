"""The SQLite stores against every conformance suite, each test on a fresh database file.

Time passes for real here: expiry is decided by the database's own clock, which no test moves.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentrun import Backend, QuotaStore, open_backend, testing
from agentrun.testing.quotas import quota_stores_on


class TestSqliteCheckpoints(testing.CheckpointStoreConformance): ...


class TestSqliteRunListing(testing.RunListerConformance): ...


class TestSqliteLeases(testing.LeaseStoreConformance): ...


class TestSqliteIdempotency(testing.IdempotencyStoreConformance): ...


class TestSqliteHistory(testing.HistoryStoreConformance): ...


class TestSqliteCommits(testing.CommitStoreConformance): ...


class TestSqliteRunReader(testing.RunReaderConformance): ...


class TestSqliteSegmentListing(testing.SegmentListerConformance): ...


class TestSqliteLedger(testing.LedgerConformance):
    @pytest.fixture
    def store(self, backend: Backend, database_file: Path) -> object:
        self.database_file = database_file
        return backend.ledger

    async def preload_charges(self, store: object, tenant: str, run_id: str, count: int) -> None:
        with sqlite3.connect(self.database_file) as connection:
            connection.executemany(
                "INSERT INTO agentrun_charges (tenant, run_id, charge_id, micros) "
                "VALUES (?, ?, ?, 1)",
                ((tenant, run_id, f"preloaded-{index}") for index in range(count)),
            )


class TestSqliteChargeListing(testing.ChargeListerConformance): ...


class TestSqliteQuotas(testing.QuotaStoreConformance):
    @pytest.fixture
    async def racers(self, url: str) -> AsyncIterator[list[QuotaStore]]:
        """Backends of their own on the file: each its own connection, as separate processes."""
        async with quota_stores_on(lambda: open_backend(url)) as stores:
            yield stores
