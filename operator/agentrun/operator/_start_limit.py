"""How many runs one replica works on at once: as many as its status writes stay quick with.

A run at work writes its status as it goes (``_status``): a few fenced patches a run, each
through one of ``KubeApi``'s threads. Started all at once, 1,000 runs each wanted their writes
at the same time: the API server, on the same cores as everything else, answered each in
seconds, and a holder's write waited up to ~10 s (p99) for a thread. More runs at work did not
make more progress, only longer queues. So the number of runs this replica works on at once
follows how quickly its lease holders' status writes come back, the way TCP's congestion window
follows round trips:

* it starts at ``START`` and, while the limit is what keeps runs waiting (runs queue for room),
  grows at each holder write answered within ``TARGET``: by one for a write that came back well
  within it (``QUICK``) or before any write came back late (doubling about once a round of
  writes, so runs that mostly wait on a slow model, with few writes and all quick, soon have as
  many at work as they need), else by one a round of writes (``1 / limit`` a write), probing
  for room without flooding the API server;
* a holder write that took longer than ``TARGET`` brings it down to ``BACKOFF`` of the runs at
  work (never under ``FLOOR``), at most once a ``TARGET``: the writes already queued when the
  first came back late say nothing new.

Runs over the limit wait in the scheduler's fair queue, holding nothing (they have not been
claimed); a run at work is never stopped for it. ``AGENTRUN_MAX_ACTIVE_RUNS`` still caps it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

TARGET = 0.15
"""Seconds a lease holder's status write may take before fewer runs are started."""

QUICK = TARGET / 4
"""Seconds within which a write says the API server has room to spare."""

START = 16
"""Runs at work before any write has come back."""

FLOOR = 4
"""Runs at work the limit never goes under: a slow API server still sees runs progress."""

BACKOFF = 0.8
"""The share of the runs at work the limit drops to when a write came back late."""


class StartLimit:
    """The runs this replica may have at work now, from its holders' status writes."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._limit = float(START)
        self._lowered_at: float | None = None
        """When a write last came back late (``clock``); None: none has yet."""

    @property
    def limit(self) -> int:
        return int(self._limit)

    def wrote(self, seconds: float, at_work: int, waiting: bool) -> None:
        """A holder's status write took ``seconds``, with ``at_work`` runs at work and runs
        ``waiting`` for room or not."""
        if seconds <= TARGET:
            if waiting and at_work >= self.limit:
                quick = seconds <= QUICK or self._lowered_at is None
                self._limit += 1 if quick else 1 / self._limit
            return
        now = self.clock()
        if self._lowered_at is None or now - self._lowered_at >= TARGET:
            self._lowered_at = now
            self._limit = float(max(FLOOR, min(self.limit, int(at_work * BACKOFF))))
