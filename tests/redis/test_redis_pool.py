"""Under load, calls beyond the connection pool wait their turn instead of failing."""

from __future__ import annotations

import asyncio

from agentrun import open_backend
from tests.support.redis_server import RedisServer


async def test_more_concurrent_calls_than_connections_all_succeed(
    single_server: RedisServer,
) -> None:
    backend = await open_backend(f"{single_server.url}?max_connections=4")
    try:
        claims = await asyncio.gather(
            *(
                backend.idempotency.begin("pool", f"run-{i}", "k", holder="w", fence=1)
                for i in range(200)
            )
        )
        assert all(claim.won for claim in claims)
        clients = int(
            single_server.cli("INFO", "clients").split("connected_clients:")[1].split()[0]
        )
        assert clients <= 4 + 1  # the pool's four, and the CLI asking
    finally:
        await backend.close()
