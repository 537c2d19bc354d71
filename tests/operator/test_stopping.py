"""A stop signal that comes before kopf listens is remembered, not lost (``operator._stopping``).

Each case is a Python process of its own that sends itself the signal, as the kubelet or a
terminal would, at once after ``listen``: the defaults would end it (SIGTERM) or raise
KeyboardInterrupt (SIGINT) in the middle of its start.
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

PROGRAM = """
import os, signal
from agentrun.operator import _stopping as stopping
assert stopping.heard() is None
stopping.listen()
os.kill(os.getpid(), signal.{name})
os.kill(os.getpid(), signal.SIGTERM)
print(stopping.heard().name)
"""


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_the_first_stop_signal_is_remembered_and_the_process_goes_on(
    number: signal.Signals,
) -> None:
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM.format(name=number.name)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == number.name
