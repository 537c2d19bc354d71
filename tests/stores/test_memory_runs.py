"""Whole runs, crashes and resumes on the memory stores (``tests.support.run_scenarios``)."""

from __future__ import annotations

import pytest

from agentrun.stores.memory import MemoryBackend
from tests.support.run_scenarios import RunScenarios


class TestMemoryRuns(RunScenarios):
    @pytest.fixture
    def stores(self) -> MemoryBackend:
        return MemoryBackend()
