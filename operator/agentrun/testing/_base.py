"""What every conformance suite shares: the store under test, a fresh tenant per test, and a way
to let time pass."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import ClassVar

import pytest

from agentrun._backend import Backend
from agentrun._errors import ConfigurationError
from agentrun.testing.hostile import UNUSABLE_IDS


class ConformanceBase:
    """A suite's fixtures: ``store`` is the store of the ``backend`` fixture the suite is about
    (``role``), unless a subclass provides ``store`` itself (a store tested on its own)."""

    role: ClassVar[str]
    """Which store of a ``Backend`` the suite tests: ``checkpoints``, ``leases``, ..."""

    ttl: float = 0.6
    """Lease and claim TTL used by the suites; short, because real servers make us wait it out."""

    @pytest.fixture
    def store(self, backend: Backend) -> object:
        return getattr(backend, self.role)

    @pytest.fixture
    def tenant(self) -> str:
        return f"tenant-{uuid.uuid4().hex[:12]}"

    @pytest.fixture
    def other_tenant(self) -> str:
        return f"other-{uuid.uuid4().hex[:12]}"

    async def pass_time(self, seconds: float) -> None:
        """Let ``seconds`` pass on the store's clock. Override for a store with a movable clock."""
        await asyncio.sleep(seconds)


async def refuses_unusable_ids(call: Callable[[str, str], Awaitable[object]]) -> None:
    """``call(tenant, run_id)`` raises ``ConfigurationError`` naming the tenant or the run id
    for every id in ``UNUSABLE_IDS``, in either place: never a driver's error, nor a write."""
    for bad in UNUSABLE_IDS:
        for tenant, run_id, named in ((bad, "run", "tenant"), ("tenant", bad, "run id")):
            with pytest.raises(ConfigurationError) as caught:
                await call(tenant, run_id)
            assert str(caught.value).startswith(named), (bad, str(caught.value))
