"""SQLite's round trips: each call on the database's thread (one transaction or one read) is one.

A boundary is one ``BEGIN IMMEDIATE``; a resume reads the frontier with every segment and the
run's records in one read transaction.
"""

from __future__ import annotations

from typing import Any

import pytest

from agentrun.stores._sqlite._database import Database
from tests.support.round_trips import RoundTripsConformance


class TestSqliteRoundTrips(RoundTripsConformance):
    @pytest.fixture
    def round_trips(self, monkeypatch: pytest.MonkeyPatch) -> list[str]:
        made: list[str] = []
        for name in ("read", "write"):
            original = getattr(Database, name)

            async def counted(self: Any, operation: str, work: Any, _o: Any = original) -> Any:
                made.append(operation)
                return await _o(self, operation, work)

            monkeypatch.setattr(Database, name, counted)
        return made
