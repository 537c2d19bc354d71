"""Whole runs, crashes and resumes on a PostgreSQL server (``tests.support.run_scenarios``)."""

from __future__ import annotations

import asyncpg
import pytest

from agentrun import Backend
from agentrun.stores._postgres import PostgresTables
from tests.support.run_scenarios import RunScenarios


class TestPostgresRuns(RunScenarios):
    @pytest.fixture
    def stores(self, backend: Backend, postgres_url: str) -> Backend:
        self.url = postgres_url
        return backend

    async def kept(self, stores: Backend, tenant: str) -> list[str | bytes]:
        """Every column of every row of every table of the schema that belongs to ``tenant``."""
        kept: list[str | bytes] = []
        connection = await asyncpg.connect(self.url)
        try:
            for role, table in PostgresTables().items():
                if role == "schema_version":
                    continue
                for row in await connection.fetch(
                    f'SELECT * FROM "{table}" WHERE tenant = $1', tenant
                ):
                    kept.extend(value for value in row.values() if isinstance(value, str | bytes))
        finally:
            await connection.close()
        return kept
