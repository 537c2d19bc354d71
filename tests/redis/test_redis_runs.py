"""Whole runs, crashes and resumes on a Redis server and on a Redis Cluster
(``tests.support.run_scenarios``)."""

from __future__ import annotations

import pytest

from agentrun.stores.backend import Backend
from tests.support.run_scenarios import RunScenarios


class TestRedisRuns(RunScenarios):
    @pytest.fixture
    def stores(self, backend: Backend) -> Backend:
        return backend
