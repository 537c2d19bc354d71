"""No ceiling on model calls in flight but the connection pool's.

The provider this replaces ran each call in a thread of the default executor, which holds
``min(32, cores + 4)`` threads: 6 on a two-core replica, so a seventh call waited for one of the
first six to end. Here 60 calls are started at once against an endpoint that takes a second to
answer each, and what is counted is not time but how many requests the endpoint had open at
the same moment.
"""

from __future__ import annotations

import asyncio

from agentrun._messages import Message
from agentrun.testing.model_server import Turn, serving
from tests.runner.models import Kind, provider

CALLS = 60


async def test_sixty_slow_model_calls_are_all_in_flight_at_once(kind: Kind) -> None:
    with serving([Turn("ok")], delay=1.0) as server:
        asked = provider(kind, server)
        replies = await asyncio.gather(
            *(
                asked.complete(model="m", messages=(Message.of("user", f"call {n}"),), tools=[])
                for n in range(CALLS)
            )
        )
        await asked.aclose()
    assert [reply.text for reply in replies] == ["ok"] * CALLS
    assert server.answered == CALLS
    assert server.peak_in_flight > 6
    assert server.peak_in_flight == CALLS
