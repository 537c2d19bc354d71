"""``python -m agentrun.operator [kopf run flags]``: the container's entry point.

Takes ``kopf run``'s flags (``--standalone``, ``--liveness``, ``--all-namespaces`` or
``--namespace``, ``--verbose``) and runs the handlers in ``agentrun.operator.main``.

A replica told to stop must begin no new call, also when it is told while it is still starting.
kopf hears SIGTERM and SIGINT only once it has imported everything and set up its tasks, a second
or more after the process began; before that, a signal does what its default says, and for a
process that is PID 1 in its container (no init) that is nothing at all: the kernel drops it, the
replica finishes starting, takes leases and makes calls until the kubelet's SIGKILL at the end of
the grace period. So the first thing this entry point does, before importing kopf, is listen for
both itself (``EarlyStop``) and hand what it heard to kopf as its stop flag: a signal that came
while starting stops kopf as soon as it runs, before any daemon takes a lease. From the moment kopf
installs its own handlers they replace these, and a stop takes kopf's usual path (daemons reach
their next step and hand their runs over, ``main.GRACE``).

The interpreter's own start, before this module runs, is still deaf as PID 1: the image runs
``tini`` as PID 1 (Dockerfile), which passes the signal on to this process, where until then the
default applies and ends it before it has done anything.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

log = logging.getLogger(__name__)


class EarlyStop:
    """SIGTERM and SIGINT, heard from the entry point's first line until kopf hears them itself.

    ``flag`` is set to the first signal heard, on ``loop``: the loop kopf is then run on, since an
    asyncio future belongs to one loop. The handler only schedules the setting
    (``call_soon_threadsafe``, what a signal handler may do to a loop, running or not yet)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.flag: asyncio.Future[signal.Signals] = self.loop.create_future()
        for number in STOP_SIGNALS:
            signal.signal(number, self._heard)

    def _heard(self, number: int, frame: FrameType | None) -> None:
        self.loop.call_soon_threadsafe(self._stop, signal.Signals(number))

    def _stop(self, number: signal.Signals) -> None:
        if not self.flag.done():
            log.warning("%s came while starting: stopping before taking any run", number.name)
            self.flag.set_result(number)


def main() -> None:
    early = EarlyStop()  # first: see the module's notes
    from kopf import cli  # imported only now: the import alone takes a moment

    cli.main(
        args=["run", *sys.argv[1:], "-m", "agentrun.operator.main"],
        prog_name="python -m agentrun.operator",
        obj=cli.CLIControls(stop_flag=early.flag, loop=early.loop),
    )


if __name__ == "__main__":
    main()
