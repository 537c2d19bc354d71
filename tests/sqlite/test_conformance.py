"""The SQLite stores against every conformance suite, each test on a fresh database file.

Time passes for real here: expiry is decided by the database's own clock, which no test moves.
"""

from __future__ import annotations

import pytest

from agentrun import Backend
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
    def store(self, backend: Backend) -> object:
        return backend.ledger
