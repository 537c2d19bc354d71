"""What a missing store driver says: which extra of the package brings it.

The Redis and PostgreSQL adapters need a driver the kit does not depend on (``redis``,
``asyncpg``); a deployment that never uses them never installs them. One that does and forgot
gets ``ImportError`` naming the command that fixes it, not a bare ``No module named 'redis'``.
Each adapter package imports its driver first, inside ``driver("redis", extra="redis")``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def driver(name: str, *, extra: str) -> Iterator[None]:
    """Turn ``name`` missing, inside the block, into the extra to install; anything else missing
    (something inside the driver broken, which no extra fixes) is raised as it is."""
    try:
        yield
    except ModuleNotFoundError as missing:
        if (missing.name or "").partition(".")[0] != name:
            raise
        raise ImportError(
            f"the {extra} store needs the {name!r} package, which is not installed: "
            f"pip install 'agentrun[{extra}]'",
            name=name,
        ) from missing
