"""Redis's round trips, counted as the driver's writes to its connections, on one server and on
a Redis Cluster: commands sent in one write (a pipeline) are answered in one round trip.

A boundary is a staged ``SET`` and a script in the run's slot, sent together; a resume is one
script reading the frontier with every segment and the run's records.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio.connection as redis_connection

from tests.support.round_trips import RoundTripsConformance


def _first_command(packed: Any) -> str:
    """The name of the first command in what the driver writes (RESP: ``*N``, ``$len``, name)."""
    data = packed if isinstance(packed, bytes | bytearray) else b"".join(map(bytes, packed))
    return bytes(data).split(b"\r\n", 3)[2].decode("ascii", "replace")


class TestRedisRoundTrips(RoundTripsConformance):
    @pytest.fixture
    def round_trips(self, monkeypatch: pytest.MonkeyPatch) -> list[str]:
        writes: list[str] = []
        original = redis_connection.AbstractConnection.send_packed_command

        async def counted(self: Any, command: Any, *args: Any, **kw: Any) -> Any:
            writes.append(_first_command(command))
            return await original(self, command, *args, **kw)

        monkeypatch.setattr(redis_connection.AbstractConnection, "send_packed_command", counted)
        return writes
