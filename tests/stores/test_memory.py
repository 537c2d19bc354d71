"""The memory stores against every conformance suite, with a store clock moved by hand."""

from __future__ import annotations

import pytest

from agentrun import testing
from agentrun.stores._memory import MemoryBackend
from agentrun.testing import ManualClock
from tests.support.chain_faults import ChainFaultsConformance


class _Memory:
    @pytest.fixture
    def backend(self) -> MemoryBackend:
        self.clock = ManualClock()
        return MemoryBackend(clock=self.clock)

    async def pass_time(self, seconds: float) -> None:
        self.clock.advance(seconds)


class TestMemoryCheckpoints(_Memory, testing.CheckpointStoreConformance): ...


class TestMemoryRunListing(_Memory, testing.RunListerConformance): ...


class TestMemoryLeases(_Memory, testing.LeaseStoreConformance): ...


class TestMemoryIdempotency(_Memory, testing.IdempotencyStoreConformance): ...


class TestMemoryHistory(_Memory, testing.HistoryStoreConformance): ...


class TestMemoryCommits(_Memory, testing.CommitStoreConformance): ...


class TestMemoryRunReader(_Memory, testing.RunReaderConformance): ...


class TestMemorySegmentListing(_Memory, testing.SegmentListerConformance): ...


class TestMemoryLedger(_Memory, testing.LedgerConformance):
    charges_before = 20_000  # through ``charge`` itself: the memory store has no bulk write


class TestMemoryChargeListing(_Memory, testing.ChargeListerConformance): ...


class TestMemoryQuotas(_Memory, testing.QuotaStoreConformance): ...


class TestMemoryChainFaults(_Memory, ChainFaultsConformance): ...
