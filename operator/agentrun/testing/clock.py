"""A clock that tests move by hand, so expiry, renewals and lapses are tested without waiting.

It is a store's clock (memory stores call it) and a ``_leases.Clock`` (a ``Leaseholder`` reads it
and sleeps on it). A task sleeping on it wakes only when the test moves the clock past its
moment: ``advance`` jumps at once, ``pass_time`` walks to each sleeper's moment in turn and lets
the woken task run until it waits again, as real time would.
"""

from __future__ import annotations

import asyncio

TASK_YIELDS = 20
"""Turns of the event loop a woken task gets to reach its next wait; the tasks these clocks wake
(a holder renewing against a memory store) need one."""


class ManualClock:
    """A clock that stands still until a test moves it (``advance``, ``pass_time``)."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Jump ``seconds`` ahead; sleepers whose moment passed wake at the next await."""
        self.now += seconds
        self._wake()

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        sleeper = (self.now + seconds, asyncio.get_running_loop().create_future())
        self._sleepers.append(sleeper)
        try:
            await sleeper[1]
        finally:
            if sleeper in self._sleepers:
                self._sleepers.remove(sleeper)

    async def pass_time(self, seconds: float) -> None:
        """Let ``seconds`` pass, waking every sleeper at its own moment on the way."""
        end = self.now + seconds
        await _let_tasks_run()
        while due := [moment for moment, _ in self._sleepers if moment <= end]:
            self.now = max(self.now, min(due))
            self._wake()
            await _let_tasks_run()
        self.now = end

    def _wake(self) -> None:
        for sleeper in [s for s in self._sleepers if s[0] <= self.now]:
            self._sleepers.remove(sleeper)
            if not sleeper[1].done():
                sleeper[1].set_result(None)


async def _let_tasks_run() -> None:
    for _ in range(TASK_YIELDS):
        await asyncio.sleep(0)
