"""``python -m agentrun.operator [kopf run flags]``: the container's entry point.

Takes ``kopf run``'s flags (``--standalone``, ``--liveness``, ``--all-namespaces`` or
``--namespace``, ``--verbose``) and runs the handlers in ``agentrun.operator._main``.

Its first act is to listen for SIGTERM and SIGINT (``_stopping``), before it imports kopf: a
replica told to stop while it starts must take no run. The interpreter's own start, before this
module runs, is still deaf when it is PID 1; the image's PID 1 is ``tini`` (Dockerfile), which
passes the signal on to this process, where until then the default applies and ends it before
it has done anything.
"""

from __future__ import annotations

import sys

from agentrun.operator import _stopping as stopping


def main() -> None:
    stopping.listen()  # first: see the module's notes
    from kopf import cli  # only now: importing it alone takes a moment

    cli.main(
        args=["run", *sys.argv[1:], "-m", "agentrun.operator._main"],
        prog_name="python -m agentrun.operator",
    )


if __name__ == "__main__":
    main()
