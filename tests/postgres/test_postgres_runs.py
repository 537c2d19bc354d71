"""Whole runs, crashes and resumes on a PostgreSQL server (``tests.support.run_scenarios``)."""

from __future__ import annotations

import pytest

from agentrun.stores.backend import Backend
from tests.support.run_scenarios import RunScenarios


class TestPostgresRuns(RunScenarios):
    @pytest.fixture
    def stores(self, backend: Backend) -> Backend:
        return backend
