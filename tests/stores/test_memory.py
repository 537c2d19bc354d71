"""The memory stores against every conformance suite, with a store clock moved by hand."""

from __future__ import annotations

import pytest

from agentrun.stores.memory import MemoryBackend
from agentrun.testing import (
    CheckpointStoreConformance,
    HistoryStoreConformance,
    IdempotencyStoreConformance,
    LeaseStoreConformance,
    LedgerConformance,
    ManualClock,
)


class _Memory:
    @pytest.fixture
    def backend(self) -> MemoryBackend:
        self.clock = ManualClock()
        return MemoryBackend(clock=self.clock)

    async def pass_time(self, seconds: float) -> None:
        self.clock.advance(seconds)


class TestMemoryCheckpoints(_Memory, CheckpointStoreConformance):
    @pytest.fixture
    def store(self, backend: MemoryBackend) -> object:
        return backend.checkpoints


class TestMemoryLeases(_Memory, LeaseStoreConformance):
    @pytest.fixture
    def store(self, backend: MemoryBackend) -> object:
        return backend.leases


class TestMemoryIdempotency(_Memory, IdempotencyStoreConformance):
    @pytest.fixture
    def store(self, backend: MemoryBackend) -> object:
        return backend.idempotency


class TestMemoryHistory(_Memory, HistoryStoreConformance):
    @pytest.fixture
    def store(self, backend: MemoryBackend) -> object:
        return backend.history


class TestMemoryLedger(_Memory, LedgerConformance):
    charges_before = 20_000  # through ``charge`` itself: the memory store has no bulk write

    @pytest.fixture
    def store(self, backend: MemoryBackend) -> object:
        return backend.ledger
