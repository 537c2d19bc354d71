"""SIGTERM and SIGINT heard before kopf listens for them, and kept for it.

kopf installs its own handlers for both only once it has imported everything and set up its
tasks, a second or more after the process began (many on a busy node). Before that a signal does
what its default says, and for a process that is PID 1 in its container (no init) that is
nothing: the kernel drops it, and the replica finishes starting, takes leases and makes calls
until the kubelet's SIGKILL at the end of the grace period. So the entry point (``__main__``)
calls ``listen`` before anything else, and kopf's start-up activity asks ``heard`` twice: first
(``_main.startup``), and again at its end (``_lifecycle.raise_a_pending_stop``), since kopf installs
its own handlers only after the activity's first step; either time it stops the operator before
any run is taken. From then on kopf's handlers replace these.

A module of its own, imported by both: ``python -m`` runs the entry point as ``__main__``, a
module apart from ``agentrun.operator.__main__``, which would keep a record of its own.
"""

from __future__ import annotations

import signal
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

_heard: list[signal.Signals] = []


def _remember(number: int, frame: FrameType | None) -> None:
    _heard.append(signal.Signals(number))


def listen() -> None:
    """Remember SIGTERM and SIGINT from now on, instead of their defaults."""
    for number in STOP_SIGNALS:
        signal.signal(number, _remember)


def heard() -> signal.Signals | None:
    """The first stop signal that came before kopf listened, if one did."""
    return _heard[0] if _heard else None
