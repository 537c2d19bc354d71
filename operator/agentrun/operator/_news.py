"""The watch's news of a run, for its worker to wait on instead of asking the API server.

The scheduler hands a run's worker the watch's latest view of the object with every event
(``RunWorker.saw``); this lets the worker also *wait* for the next one: for the claim another
replica just wrote to show, for the holder's status to name its lease, for the change that made
a patch fail. Each of those waits used to be a read (or a patch bound to fail).

A run deleted while it carries no finalizer (it never touched a store) is gone at once, and kopf
keeps no finalizer of its own on runs (``_main``): the ``DELETED`` event is what tells its worker
to stop (``News.gone``).
"""

from __future__ import annotations

import asyncio


class News:
    """The watch's events of one run, as one worker waits on them."""

    def __init__(self) -> None:
        self._arrived = asyncio.Event()
        self.gone = False
        """The run was deleted (its ``DELETED`` event came)."""

    def arrived(self, event_type: str) -> None:
        self.gone = self.gone or event_type == "DELETED"
        self._arrived.set()

    async def next(self, seconds: float) -> bool:
        """Wait at most ``seconds`` for the run's next watch event; whether one came
        (the live view of the object has it then)."""
        self._arrived.clear()
        try:
            await asyncio.wait_for(self._arrived.wait(), timeout=max(0.0, seconds))
        except TimeoutError:
            return False
        return True
