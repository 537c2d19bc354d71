"""Which replica of an install claims a new run: the one rendezvous hashing picks among the
replicas seen lately, so that the others do not send a claim bound to be refused.

Every replica starts a daemon for a new run at its ``ADDED`` event, and each used to claim it at
once: one claim landed, the other was refused (0.8-0.9 refused status patches a run at 1,000
runs, each decoded and applied by the API server before its ``test`` failed). A replica knows the
others from the watch: while a run is held its status names the holder (``status.lease.holder``,
a worker id), and every replica sees every run of its install. Among the replicas seen holding a
run within ``MEMORY`` and itself, each run has one preferred replica, the same for every replica
that knows the same peers (the highest digest of the run's uid and the worker id). The others
wait on the watch for its claim while it shows signs of life: until a poll interval has passed
without the watch showing it hold a run, a lease TTL at most; then they claim as before
(``RunWorker._let_the_preferred_claim``). A busy replica's watch brings a claim seconds late at
1,000 runs, and a fixed wait of a poll interval let both claim again.

The preference decides nothing: the claim is still the one tested patch (``_claims``). A replica
that knows fewer peers (one just started), a preferred replica that died within ``MEMORY`` or
whose watch lags, costs at most the refused patch every run cost before, or that wait.
"""

from __future__ import annotations

import hashlib
import time

MEMORY = 60.0
"""Seconds a replica seen holding a run is still counted as one that claims runs."""


class Peers:
    """The replicas of this install seen lately, and the one each run prefers."""

    def __init__(self, me: str, *, memory: float = MEMORY) -> None:
        self.me = me
        self.memory = memory
        self._seen: dict[str, float] = {}

    def saw(self, holder: str) -> None:
        """``holder`` holds a run, as the watch shows it."""
        self._seen[holder] = time.monotonic()

    def last_seen(self, peer: str) -> float:
        """When ``peer`` was last seen holding a run (``time.monotonic``; now for this replica)."""
        return time.monotonic() if peer == self.me else self._seen.get(peer, float("-inf"))

    def live(self) -> list[str]:
        """This replica and those seen holding a run within ``memory``."""
        now = time.monotonic()
        for gone in [h for h, at in self._seen.items() if now - at > self.memory]:
            del self._seen[gone]
        return sorted({self.me, *self._seen})

    def preferred(self, run_id: str) -> str:
        """The replica that claims ``run_id``, of those this replica knows."""
        return max(
            self.live(),
            key=lambda peer: hashlib.blake2b(f"{run_id}/{peer}".encode(), digest_size=8).digest(),
        )
