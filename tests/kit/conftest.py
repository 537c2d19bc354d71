"""Fixtures for the kit core tests: memory stores that share one fence book and a hand-moved clock.

The memory stores are the reference semantics (they pass every conformance suite), so the core is
tested against them rather than against anything imitating a store. Where a test needs a store
to misbehave (fail, count reads), it wraps a memory store in a small class from ``stores.py``.
"""

from __future__ import annotations

import pytest

from agentrun.stores._memory import MemoryBackend
from agentrun.testing import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def backend(clock: ManualClock) -> MemoryBackend:
    return MemoryBackend(clock=clock)
