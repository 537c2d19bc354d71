"""What a missing store driver says: which extra of the package brings it.

The Redis and PostgreSQL adapters need a driver the kit does not depend on (``redis``,
``asyncpg``); a deployment that never uses them never installs them. One that does and forgot
gets ``ImportError`` naming the command that fixes it, not a bare ``No module named 'redis'``.
"""

from __future__ import annotations


def missing_driver(error: ModuleNotFoundError, *, driver: str, extra: str) -> ImportError:
    """The error to raise for ``error``: the extra to install if ``driver`` itself is missing,
    else ``error`` unchanged (something inside the driver is broken, which no extra fixes)."""
    if (error.name or "").partition(".")[0] != driver:
        return error
    return ImportError(
        f"the {extra} store needs the {driver!r} package, which is not installed: "
        f"pip install 'agentrun[{extra}]'",
        name=driver,
    )
