"""Whole runs, crashes and resumes on an SQLite file (``tests.support.run_scenarios``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from agentrun import Backend
from tests.support.run_scenarios import RunScenarios


class TestSqliteRuns(RunScenarios):
    @pytest.fixture
    def stores(self, backend: Backend, database_file: Path) -> Backend:
        self.database_file = database_file
        return backend

    async def kept(self, stores: Backend, tenant: str) -> list[str | bytes]:
        """Every column of every row of every table of the file that belongs to ``tenant``."""
        kept: list[str | bytes] = []
        with sqlite3.connect(self.database_file) as connection:
            tables = [
                name
                for (name,) in connection.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table'"
                )
            ]
            for table in tables:
                columns = [row[1] for row in connection.execute(f"PRAGMA table_info({table})")]
                if "tenant" not in columns:
                    continue
                for row in connection.execute(f"SELECT * FROM {table} WHERE tenant = ?", (tenant,)):
                    kept.extend(value for value in row if isinstance(value, str | bytes))
        return kept
