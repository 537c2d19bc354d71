"""When, and in which replica, a run's undecidable calls are settled: a timer per run that is
due, decided from the watch.

A run waiting on a person costs nothing while nothing changes (``_scheduler``); a run with calls
a replica may settle (``_settlement_notes``) costs one timer handle in each replica, no task, no
request and no store command, until the earliest note is due. The replica the run prefers
(``_peers``: the one that would carry it on) fires at ``dueAt``; the others two poll intervals
later, in case it is gone. Whoever fires first takes the run's lease (``_settler``); the others
find it held and look again when it would lapse, by when the notes the holder wrote (a
resolution, ``LeftToPerson``) have cancelled their timers, or show a holder that died mid-probe,
whose round the next replica takes over.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Coroutine, Mapping
from datetime import datetime, timedelta
from typing import Any

from agentrun.operator import _settlement_notes as notes
from agentrun.operator._conditions import is_terminal
from agentrun.operator._context import OperatorContext
from agentrun.operator._settler import Settler

log = logging.getLogger(__name__)

RETRY_AFTER = 30.0
"""Seconds before a settling that failed before writing anything (the API server or the store
away) is tried again."""

SLACK = 0.2
"""Seconds after a held lease would lapse that its run is looked at again."""

Spawn = Callable[[Coroutine[Any, Any, None], str], "asyncio.Task[None]"]


class SettleTimers:
    """One replica's timers of runs due to be settled, and the settlings under way."""

    def __init__(
        self,
        context: OperatorContext,
        spawn: Spawn,
        copied: Callable[[], contextvars.Context | None],
    ) -> None:
        self.context = context
        self.settler = Settler(context, self._who)
        self._spawn = spawn
        self._copied = copied
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._views: dict[str, Mapping[str, Any]] = {}
        """The watch's latest view of each run with a timer."""
        self._busy: dict[str, asyncio.Task[None]] = {}
        self._identity: str | None = None
        self._stopping = False

    async def _who(self) -> str:
        """The user the API server knows this replica as, asked once (a SelfSubjectReview)."""
        if self._identity is None:
            self._identity = await self.context.api.whoami()
        return self._identity

    def seen(self, body: Mapping[str, Any]) -> None:
        """A watch event of a run of this install: arm its timer at its earliest due note, or
        drop it when none is left to settle."""
        meta, status = body["metadata"], body.get("status") or {}
        uid = str(meta["uid"])
        due = (
            None
            if self._stopping
            or not self.context.config.settling
            or meta.get("deletionTimestamp")
            or is_terminal(status.get("conditions") or [])
            else notes.due_at(notes.to_settle(body))
        )
        if due is None:
            self.forget(uid)
            return
        if self.context.peers.preferred(uid) != self.context.config.worker_id:
            due += timedelta(seconds=2 * self.context.config.poll_interval)
        self._views[uid] = body
        self._arm(uid, due)

    def forget(self, uid: str) -> None:
        self._views.pop(uid, None)
        timer = self._timers.pop(uid, None)
        if timer is not None:
            timer.cancel()

    def _arm(self, uid: str, at: datetime) -> None:
        timer = self._timers.pop(uid, None)
        if timer is not None:
            timer.cancel()
        delay = max(0.0, (at - notes.utcnow()).total_seconds())
        self._timers[uid] = asyncio.get_running_loop().call_later(
            delay, self._fire, uid, context=self._copied()
        )

    def _fire(self, uid: str) -> None:
        self._timers.pop(uid, None)
        body = self._views.get(uid)
        if body is None or uid in self._busy or self._stopping:
            return  # a settling under way writes what re-arms it
        self._busy[uid] = self._spawn(self._settle(uid, body), f"settle {uid}")

    async def _settle(self, uid: str, body: Mapping[str, Any]) -> None:
        again: float | None = None
        try:
            again = await self.settler.settle(body)
        except Exception:
            log.exception("settling run %s failed; again in %.0fs", uid, RETRY_AFTER)
            again = RETRY_AFTER
        finally:
            del self._busy[uid]
        # Only when told to: a settling that found nothing due looks again at the next event,
        # not at the watch's view it was started from, which may lag what it read.
        if again is not None and uid in self._views and not self._stopping:
            self._arm(uid, notes.utcnow() + timedelta(seconds=again + SLACK))

    async def stop(self, grace: float) -> None:
        """Arm nothing more; give the settlings under way ``grace`` to end, then cancel them
        (each lets its lease go as it ends)."""
        self._stopping = True
        for uid in list(self._timers):
            self.forget(uid)
        busy = list(self._busy.values())
        if not busy:
            return
        _, pending = await asyncio.wait(busy, timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=grace)
