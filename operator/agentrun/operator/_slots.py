"""How many runs one replica drives at once (``AGENTRUN_MAX_ACTIVE_RUNS``; 0, the default, is no
limit).

Without a limit, whichever replica sees a batch of queued runs first takes every lease, and one
interpreter on one core drives a thousand runs while the other replica waits on its watch
(``make bench-agents``: 90-98 CPU-seconds in one replica against 48-53 in the other). A replica
at its limit leaves the next run to a replica with room, which takes the lease meanwhile. A slot
is held only while a run holds the lease and is being driven: a run parked on a person, waiting
for another replica's lease or idle for any other reason holds none, so parked runs never starve
the replica of slots.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class RunSlots:
    """A counting limit with a wait that gives up once the run no longer wants a slot."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._free = asyncio.Semaphore(limit) if limit else None

    async def take(self, over: Callable[[], bool], poll: float) -> bool | None:
        """Take a slot: False if one was free at once, True if this had to wait for it (what the
        run looked like before may be stale by now), None if ``over()`` became true while
        waiting (no slot taken). ``over`` is asked at least every ``poll`` seconds."""
        if self._free is None:
            return False
        waited = False
        while not over():
            try:
                await asyncio.wait_for(self._free.acquire(), poll)
            except TimeoutError:
                waited = True
                continue
            return waited
        return None

    def give_back(self) -> None:
        if self._free is not None:
            self._free.release()
