"""The PostgreSQL stores against every conformance suite, on a real server and its real clock."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from agentrun import Backend, QuotaStore, open_backend, testing
from agentrun.testing.quotas import quota_stores_on


class TestPostgresCheckpoints(testing.CheckpointStoreConformance): ...


class TestPostgresRunListing(testing.RunListerConformance): ...


class TestPostgresLeases(testing.LeaseStoreConformance): ...


class TestPostgresIdempotency(testing.IdempotencyStoreConformance): ...


class TestPostgresHistory(testing.HistoryStoreConformance): ...


class TestPostgresCommits(testing.CommitStoreConformance): ...


class TestPostgresRunReader(testing.RunReaderConformance): ...


class TestPostgresSegmentListing(testing.SegmentListerConformance): ...


class TestPostgresLedger(testing.LedgerConformance):
    @pytest.fixture
    def store(self, backend: Backend, postgres_url: str) -> object:
        self.url = postgres_url
        return backend.ledger

    async def preload_charges(self, store: object, tenant: str, run_id: str, count: int) -> None:
        connection = await asyncpg.connect(self.url)
        try:
            await connection.execute(
                "INSERT INTO adk_ledger (tenant, run_id, charge_id, micros) "
                "SELECT $1, $2, 'preloaded-' || n, 1 FROM generate_series(1, $3) AS n",
                tenant,
                run_id,
                count,
            )
        finally:
            await connection.close()


class TestPostgresChargeListing(testing.ChargeListerConformance): ...


class TestPostgresQuotas(testing.QuotaStoreConformance):
    @pytest.fixture
    async def racers(self, postgres_url: str) -> AsyncIterator[list[QuotaStore]]:
        """Backends of their own on the database: each its own pool, as separate replicas."""
        async with quota_stores_on(lambda: open_backend(postgres_url)) as stores:
            yield stores
