"""Store adapters: memory (tests), SQLite (embedded default), Redis and PostgreSQL.

``open_backend`` picks the adapter by the URL's scheme and imports it only then, so a kit that
never talks to Redis never needs ``redis`` installed; one that does, without it, is told which
extra to install. The adapters know nothing of one another: each returns a ``StoreSet``, which
satisfies the ``Backend`` protocol of the contracts.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from agentrun._backend import Backend
from agentrun._errors import ConfigurationError


async def open_backend(url: str, *, create: bool = True) -> Backend:
    """Open the stores ``url`` names: ``memory://``, ``sqlite:///path/state.db``,
    ``redis://host:port/db``, ``postgresql://user@host:port/db``.

    ``create=False`` is for commands that only read or answer for existing runs: an embedded
    store (SQLite) that does not exist is refused rather than created, so a typo in the URL is
    an error, not an empty store that says "nothing checkpointed". Servers are never created.

    Raises ``ImportError`` naming the extra to install (``pip install 'agentrun[redis]'``) when
    the scheme's driver is missing.

    Args:
        url: Where the stores are: ``memory://``, ``sqlite:///path``, ``redis://...`` or
            ``postgresql://...``, with the adapter's options as query parameters.
        create: Whether an embedded store (SQLite) that does not exist is created (default).

    Returns:
        The ``Backend``: the five stores, opened; close it (or use it as an async context
        manager).

    Raises:
        ConfigurationError: The URL names no store the kit knows, or an option it cannot use;
            or ``create=False`` and the SQLite file does not exist.
        ImportError: The scheme's driver is not installed; the message names the extra.
        StoreUnavailableError: The server could not be reached.
    """
    scheme = urlsplit(url).scheme
    if scheme == "memory":
        from agentrun.stores._memory import MemoryBackend

        return MemoryBackend(url=url)
    if scheme == "sqlite":
        from agentrun.stores import _sqlite as sqlite

        return await sqlite.open_backend(url, create=create)
    if scheme in ("redis", "rediss"):
        from agentrun.stores import _redis as redis

        return await redis.open_backend(url)
    if scheme in ("postgresql", "postgres"):
        from agentrun.stores import _postgres as postgres

        return await postgres.open_backend(url)
    raise ConfigurationError(
        f"store URL {url!r} has scheme {scheme!r}; use one of "
        "sqlite:///path/state.db, redis://host:port/0, postgresql://user@host:port/db, memory://"
    )
