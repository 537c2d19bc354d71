"""The PostgreSQL stores against every conformance suite, on a real server and its real clock."""

from __future__ import annotations

import asyncpg
import pytest

from agentrun import Backend, testing


class TestPostgresCheckpoints(testing.CheckpointStoreConformance): ...


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
