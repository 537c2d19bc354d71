"""How the tests run the CLI: this checkout's own code, never whichever ``agentrun`` is installed.

``python -m agentrun.cli`` under the interpreter running the tests, with the checkout's source
root first on ``PYTHONPATH``, so a stale console script or another installation on ``PATH``
cannot answer in its place.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[2] / "operator"
COMMAND = (sys.executable, "-m", "agentrun.cli")


def cli_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the checkout's source root first."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SOURCE_ROOT), env.get("PYTHONPATH")]))
    return env
