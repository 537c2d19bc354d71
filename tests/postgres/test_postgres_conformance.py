"""The PostgreSQL stores against every conformance suite, on a real server and its real clock."""

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


class TestPostgresCheckpoints(CheckpointStoreConformance):
    @pytest.fixture
    def store(self, backend: Backend) -> object:
        return backend.checkpoints


class TestPostgresLeases(LeaseStoreConformance):
    @pytest.fixture
    def store(self, backend: Backend) -> object:
        return backend.leases


class TestPostgresIdempotency(IdempotencyStoreConformance):
    @pytest.fixture
    def store(self, backend: Backend) -> object:
        return backend.idempotency


class TestPostgresHistory(HistoryStoreConformance):
    @pytest.fixture
    def store(self, backend: Backend) -> object:
        return backend.history


class TestPostgresLedger(LedgerConformance):
    @pytest.fixture
    def store(self, backend: Backend) -> object:
        return backend.ledger
