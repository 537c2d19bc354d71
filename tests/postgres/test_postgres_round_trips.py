"""PostgreSQL's round trips: each statement asyncpg's connection sends is one.

A boundary is one statement (``WITH``); a resume one (``SELECT`` of the frontier with every
segment and the run's records, ``UNION ALL``). Counted on the connection, so anything the pool sends
besides the stores' own statements (a reset on release) is counted too.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from tests.support.round_trips import RoundTripsConformance

SENDING = ("execute", "fetch", "fetchrow", "fetchval")


class TestPostgresRoundTrips(RoundTripsConformance):
    @pytest.fixture
    def round_trips(self, monkeypatch: pytest.MonkeyPatch) -> list[str]:
        sent: list[str] = []
        for name in SENDING:
            original = getattr(asyncpg.connection.Connection, name)

            async def counted(
                self: Any, query: str, *args: Any, _o: Any = original, **kw: Any
            ) -> Any:
                sent.append(query.split()[0])
                return await _o(self, query, *args, **kw)

            monkeypatch.setattr(asyncpg.connection.Connection, name, counted)
        return sent
