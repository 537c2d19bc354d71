"""A stop signal that comes before kopf listens is remembered, not lost (``operator._stopping``);
one that comes after is remembered at once, ahead of kopf's own handler, which still runs.

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


def _run(program: str) -> subprocess.CompletedProcess[str]:
    """``program`` in a Python process of its own (it sends itself signals), which must exit 0."""
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_the_first_stop_signal_is_remembered_and_the_process_goes_on(
    number: signal.Signals,
) -> None:
    result = _run(PROGRAM.format(name=number.name))
    assert result.stdout.strip() == number.name


AFTER_KOPF = """
import asyncio, os, signal
from agentrun.operator import _stopping as stopping

async def main() -> None:
    loop = asyncio.get_running_loop()
    kopf_heard = loop.create_future()
    loop.add_signal_handler(signal.{name}, kopf_heard.set_result, signal.{name})  # as kopf does
    stopping.keep_listening()
    stopping.keep_listening()  # once is enough: a second puts no second one in front
    os.kill(os.getpid(), signal.{name})
    print(stopping.heard().name)  # before the loop has run kopf's handler
    print(kopf_heard.done())
    print((await asyncio.wait_for(kopf_heard, 30)).name)

asyncio.run(main())
"""


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_stop_signal_after_kopf_listens_is_heard_at_once_and_kopf_still_hears_it(
    number: signal.Signals,
) -> None:
    """kopf's handler only tells its loop, and its daemons learn of the stop several of the
    loop's steps later: ``heard`` must tell at once, and kopf's own shut-down still start."""
    result = _run(AFTER_KOPF.format(name=number.name))
    assert result.stdout.split() == [number.name, "False", number.name]
