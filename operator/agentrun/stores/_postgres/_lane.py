"""One pooled connection kept between calls, for the pools ``open_backend`` makes.

Why: asyncpg's ``acquire`` and ``release`` cost a pair inside a run (a proxy object, an idle
timer set and cancelled, a release shielded in a task of its own that takes event-loop turns of
its own). With fsync on that is a tenth of a boundary's commit: a boundary statement is faster on
a connection held between calls than through the stores' pool (``bench/README.md``). A run's
calls come one after another, so in a worker with one run
one connection kept out of the pool between them serves nearly all of them; where several runs
share the backend (an operator replica) it serves one call at a time and the others take pooled
connections.

The rules that keep it as safe as the pool:

* One call at a time has it. A call that finds it busy takes a connection from the pool, as
  every call did before.
* A call that leaves with an exception (a driver error, a timeout, a cancellation, an error raised
  by the caller's own block) hands it back to the pool, which rolls back, waits out a
  cancellation or discards it as it does for any connection it lent. The next call that succeeds
  on a pooled connection is kept instead.
* A kept connection found closed (the server ended it) is handed back unused.
* Nothing is kept while the pool has no connection left to lend: callers may be queued in
  ``acquire``, and the kept connection goes back so that they get it.
* Every ``RETURN_EVERY`` uses it goes back to the pool anyway, so the pool's own upkeep
  (``max_queries``, expired generations) still reaches it; that costs one release in a thousand.
* ``close`` hands it back, so that the pool's close, which waits for every connection it lent,
  does not wait for this one. ``open_backend``'s closer closes the lane first.

Who owns a lane is explicit: ``open_backend`` makes one for the pool it made and hands it to each
store it builds (their ``lane`` argument), and its closer closes it before the pool. A store built
without one (an application's own pool) keeps nothing: only the pool's owner can promise to close
the lane before the pool.
"""

from __future__ import annotations

from typing import Any

from agentrun.stores._drivers import driver

with driver("asyncpg", extra="postgres"):
    import asyncpg

RETURN_EVERY = 1_000
"""Uses after which the kept connection goes back to the pool (see the module docstring)."""


class Lane:
    """The connection kept for ``pool`` between calls, if any, and whether a call has it."""

    def __init__(self, pool: asyncpg.Pool, *, return_every: int = RETURN_EVERY) -> None:
        self.pool = pool
        self._return_every = return_every
        self._kept: Any = None
        self._busy = False
        self._uses = 0
        self._closed = False

    async def take(self) -> Any:
        """The kept connection, the caller's until ``done``; None when none is kept, or it is
        busy. One found closed is handed back to the pool first."""
        kept = self._kept
        if kept is None or self._busy:
            return None
        if _closed(kept):
            self._kept = None
            await self.pool.release(kept)
            return None
        self._busy = True
        return kept

    async def done(self, connection: Any, *, succeeded: bool) -> None:
        """After a call on ``connection`` (kept, or lent by the pool): keep it for the next call
        or hand it back to the pool."""
        if connection is self._kept:
            self._busy = False
            self._uses += 1
            if succeeded and self._keeps() and self._uses < self._return_every:
                return
            self._kept = None
        elif succeeded and self._kept is None and self._keeps() and not _closed(connection):
            self._kept, self._uses = connection, 0
            return
        await self.pool.release(connection)

    def _keeps(self) -> bool:
        """Whether a connection may stay out of the pool: not once closed, nor while the pool
        has none left to lend (a caller may be waiting for one)."""
        pool = self.pool
        return not self._closed and (
            pool.get_idle_size() > 0 or pool.get_size() < pool.get_max_size()
        )

    async def close(self) -> None:
        """Keep nothing from now on; hand back the kept connection unless a call has it (that
        call hands it back when it is done)."""
        self._closed = True
        kept = self._kept
        if kept is not None and not self._busy:
            self._kept = None
            await self.pool.release(kept)


def _closed(connection: Any) -> bool:
    """Whether a lent connection is closed. asyncpg detaches the connection from a proxy it
    lent when the connection closes, and takes it back itself: the proxy then refuses every
    call (releasing it again is a no-op)."""
    try:
        return bool(connection.is_closed())
    except asyncpg.InterfaceError:
        return True
