"""What every conformance suite shares: a fresh tenant per test and a way to let time pass."""

from __future__ import annotations

import asyncio
import uuid

import pytest


class ConformanceBase:
    ttl: float = 0.6
    """Lease and claim TTL used by the suites; short, because real servers make us wait it out."""

    @pytest.fixture
    def tenant(self) -> str:
        return f"tenant-{uuid.uuid4().hex[:12]}"

    @pytest.fixture
    def other_tenant(self) -> str:
        return f"other-{uuid.uuid4().hex[:12]}"

    async def pass_time(self, seconds: float) -> None:
        """Let ``seconds`` pass on the store's clock. Override for a store with a movable clock."""
        await asyncio.sleep(seconds)
