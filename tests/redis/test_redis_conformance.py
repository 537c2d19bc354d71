"""The Redis stores against every conformance suite, on one server and on a Redis Cluster.

Time passes for real here (the store's clock is the server's ``TIME``), so the suites' short TTL
is what keeps this fast. Every test runs twice: ``[single]`` and ``[cluster]``.
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


class TestRedisCheckpoints(CheckpointStoreConformance):
    @pytest.fixture
    def store(self, backend: Backend) -> object:
        return backend.checkpoints


class TestRedisLeases(LeaseStoreConformance):
    @pytest.fixture
    def store(self, backend: Backend) -> object:
        return backend.leases


class TestRedisIdempotency(IdempotencyStoreConformance):
    @pytest.fixture
    def store(self, backend: Backend) -> object:
        return backend.idempotency


class TestRedisHistory(HistoryStoreConformance):
    @pytest.fixture
    def store(self, backend: Backend) -> object:
        return backend.history


class TestRedisLedger(LedgerConformance):
    @pytest.fixture
    def store(self, backend: Backend) -> object:
        return backend.ledger
