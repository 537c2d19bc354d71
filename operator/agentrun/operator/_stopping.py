"""SIGTERM and SIGINT heard before kopf listens and kept for it; once kopf listens, heard first.

kopf installs its own handlers for both only once it has imported everything and set up its
tasks, a second or more after the process began (many on a busy node). Before that a signal does
what its default says, and for a process that is PID 1 in its container (no init) that is
nothing: the kernel drops it, and the replica finishes starting, takes leases and makes calls
until the kubelet's SIGKILL at the end of the grace period. So the entry point (``__main__``)
calls ``listen`` before anything else, and kopf's start-up activity asks ``heard`` twice: first
(``_main.startup``), and again at its end (``_lifecycle.raise_a_pending_stop``), since kopf installs
its own handlers only after the activity's first step; either time it stops the operator before
any run is taken.

kopf's handlers then take over, and a stop reaches a run only late: kopf's handler sets a flag its
loop acts on, and only after a chain of its own tasks (the stop-flag checker ends, the root tasks
are cancelled, the daemon killer spawns a stopper per daemon) does a daemon's ``stopped`` turn
true. A run that checked it meanwhile went on: the call in flight when the signal came returned,
the model answered, and the next call began after the signal (``tests/kube/
test_operator_start_stop.py``). So once kopf listens, ``keep_listening`` puts this module's
handler back in front of kopf's and calls kopf's after it: the signal is remembered the moment
it comes, before kopf's loop hears of it, and every run's stop check (``_main.run_agent``) asks
``heard`` as well as its daemon's ``stopped``.

A module of its own, imported by both: ``python -m`` runs the entry point as ``__main__``, a
module apart from ``agentrun.operator.__main__``, which would keep a record of its own.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
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
    """The first stop signal that came, if one did: before kopf listened, or, once
    ``keep_listening`` has run, at any time."""
    return _heard[0] if _heard else None


Handler = Callable[[int, FrameType | None], object]


_in_front: list[Handler] = []


def _in_front_of(theirs: Handler) -> Handler:
    def remember_then_theirs(number: int, frame: FrameType | None) -> None:
        _remember(number, frame)
        theirs(number, frame)

    _in_front.append(remember_then_theirs)
    return remember_then_theirs


def keep_listening() -> None:
    """Remember SIGTERM and SIGINT from now on too, ahead of the handlers already there (kopf's),
    which still run after this module's, as they would have.

    Only where kopf listens itself: its handler is a Python one (asyncio's, which passes the
    signal on to kopf's loop through the loop's wakeup descriptor, unchanged by this). A default
    left in place (kopf not in the main thread, or not started) stays as it is, since this
    module's handler would turn a stop that ends the process into none."""
    if threading.current_thread() is not threading.main_thread():
        return  # only the main thread may set handlers; kopf does not listen from others either
    for number in STOP_SIGNALS:
        theirs = signal.getsignal(number)
        if callable(theirs) and theirs is not _remember and theirs not in _in_front:
            signal.signal(number, _in_front_of(theirs))
            signal.siginterrupt(number, False)  # as asyncio sets its own: calls go on
