"""Which replicas are alive: each holds a lease of its own in the store while it runs.

A run at work is held by one replica, and the others keep nothing for it (``_scheduler``): they
do not poll its lease. What they need to know is whether its holder is still there, which is
one question per replica, not per run. Each replica holds a lease on its worker id under
``TENANT`` in the run store, renewed like a run's (``Leaseholder``) and let go when the replica
stops; a replica whose heartbeat lapsed died without letting go, and the runs the watch shows
it holding are taken over as their own leases lapse.

The heartbeat's TTL is the shortest a run's lease may have (the AgentRun CRD's minimum), so a
replica lost with its pod is found dead no later than any of its runs' leases lapse.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from agentrun._errors import AgentRunError
from agentrun._leases import Leaseholder, LeasePolicy, LeaseStore

TENANT = "agentrun.dev/replicas"
"""The tenant the heartbeats are held under: a namespace or a tenant label's value can never
take this name (neither may hold a ``/``), so no run's lease shares a key with one."""

TTL = 5.0
"""Seconds a heartbeat lasts unrenewed: the least ``spec.leasePolicy.ttlSeconds`` allows."""

POLICY = LeasePolicy(ttl=TTL, renew_within=TTL * 2 / 3)

RETRY_AFTER = 1.0
"""Seconds before a heartbeat that could not be taken (the store away) is asked for again."""

log = logging.getLogger(__name__)


class Heartbeat:
    """This replica's heartbeat, and the question whether another's still beats."""

    def __init__(self, leases: LeaseStore, me: str) -> None:
        self.leases = leases
        self.me = me
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.create_task(self._beat(), name=f"heartbeat {self.me}")

    async def _beat(self) -> None:
        """Hold the heartbeat until told to stop, taking it again whenever it was lost (the
        store away longer than its TTL: peers then count this replica dead for a moment, and
        take over only runs whose own leases lapsed meanwhile)."""
        while not self._stop.is_set():
            try:
                holder = await Leaseholder.acquire(self.leases, TENANT, self.me, self.me, POLICY)
            except AgentRunError as error:
                log.warning("could not take this replica's heartbeat: %s", error)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), RETRY_AFTER)
                continue
            async with holder:
                stop = asyncio.ensure_future(self._stop.wait())
                lost = asyncio.ensure_future(holder.lost.wait())
                try:
                    await asyncio.wait((stop, lost), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    stop.cancel()
                    lost.cancel()

    async def alive(self, replica: str) -> bool:
        """Whether ``replica``'s heartbeat is live (this replica's always is)."""
        if replica == self.me:
            return True
        return await self.leases.held(TENANT, replica) is not None

    async def stop(self) -> None:
        """Let the heartbeat go, so that peers take this replica's runs at once."""
        self._stop.set()
        if self._task is not None:
            await self._task
