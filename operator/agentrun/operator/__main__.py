"""``python -m agentrun.operator [kopf run flags]``: the container's entry point.

Takes ``kopf run``'s flags (``--standalone``, ``--liveness``, ``--all-namespaces`` or
``--namespace``, ``--verbose``) and runs the handlers in ``agentrun.operator.main``.
"""

from __future__ import annotations

import sys

from kopf import cli


def main() -> None:
    cli.main(
        args=["run", *sys.argv[1:], "-m", "agentrun.operator.main"],
        prog_name="python -m agentrun.operator",
    )


if __name__ == "__main__":
    main()
