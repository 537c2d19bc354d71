"""The SQLite stores against every conformance suite, each test on a fresh database file.

Time passes for real here: expiry is decided by the database's own clock, which no test moves.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentrun.stores.backend import Backend
from agentrun.testing import (
    CheckpointStoreConformance,
    HistoryStoreConformance,
    IdempotencyStoreConformance,
    LeaseStoreConformance,
    LedgerConformance,
)


class TestSqliteCheckpoints(CheckpointStoreConformance):
    @pytest.fixture
    def store(self, backend: Backend) -> object:
        return backend.checkpoints


class TestSqliteLeases(LeaseStoreConformance):
    @pytest.fixture
    def store(self, backend: Backend) -> object:
        return backend.leases


class TestSqliteIdempotency(IdempotencyStoreConformance):
    @pytest.fixture
    def store(self, backend: Backend) -> object:
        return backend.idempotency


class TestSqliteHistory(HistoryStoreConformance):
    @pytest.fixture
    def store(self, backend: Backend) -> object:
        return backend.history


class TestSqliteLedger(LedgerConformance):
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
