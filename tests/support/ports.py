"""Loopback ports for the servers the tests start, chosen where nothing else will take them.

Asking the kernel for port 0 and closing the socket hands back a port from the *ephemeral*
range (``net.ipv4.ip_local_port_range``, 32768-60999 by default). That is the range every
outgoing connection draws its source port from, so between the probe and the server's own
``bind`` the port can be taken by any client on the machine: kube-apiserver's first connections
to etcd, a store client in the other pytest worker. CI once lost the whole kube suite that way
("bind: address already in use" for the apiserver's secure port).

Ports are therefore drawn from the range just below the ephemeral one, where the kernel never
hands out a source port. Each pytest-xdist worker draws from its own slice of it, so two workers
never race for one port, and a port is never handed out twice in one process. Each candidate is
still bound once to check that nothing already listens there.
"""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

LOOPBACK = "127.0.0.1"
_SPAN = 12_000
"""How many ports below the ephemeral range the tests draw from."""

_given: set[int] = set()
_draw = random.SystemRandom()
"""Not ``random``'s shared generator, which a test or plugin may seed: two sessions seeded alike
would draw the same ports."""


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _worker_slice() -> range:
    start = _ephemeral_start()
    low = max(1024, start - _SPAN)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or "1")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) if worker.isdigit() else 0
    width = (start - low) // max(1, workers)
    return range(low + index * width, low + (index + 1) * width)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((LOOPBACK, port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A loopback port nothing listens on, outside the ephemeral range, not given out before."""
    candidates = [port for port in _worker_slice() if port not in _given]
    _draw.shuffle(candidates)
    for port in candidates:
        if _bindable(port):
            _given.add(port)
            return port
    raise RuntimeError(f"no free loopback port left below {_ephemeral_start()}")
