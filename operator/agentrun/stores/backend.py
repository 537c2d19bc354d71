"""One backend: the five stores of a run, opened together from one URL and closed together.

``open_backend`` picks the adapter by the URL's scheme and imports its driver only then, so a
kit that never talks to Redis never needs ``redis`` installed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from agentrun.checkpointing import CheckpointStore
from agentrun.errors import ConfigurationError
from agentrun.history import HistoryStore
from agentrun.idempotency import IdempotencyStore
from agentrun.leases import LeaseStore
from agentrun.ledger import Ledger


async def _nothing() -> None:
    return None


@dataclass
class Backend:
    checkpoints: CheckpointStore
    leases: LeaseStore
    idempotency: IdempotencyStore
    history: HistoryStore
    ledger: Ledger
    url: str = "memory://"
    closer: Callable[[], Awaitable[None]] = field(default=_nothing, repr=False)

    async def close(self) -> None:
        await self.closer()

    async def __aenter__(self) -> Backend:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()


SCHEMES = ("memory", "sqlite", "redis", "rediss", "postgresql", "postgres")


async def open_backend(url: str, *, create: bool = True) -> Backend:
    """Open the stores ``url`` names: ``memory://``, ``sqlite:///path/state.db``,
    ``redis://host:port/db``, ``postgresql://user@host:port/db``.

    ``create=False`` is for commands that only read or answer for existing runs: an embedded
    store (SQLite) that does not exist is refused rather than created, so a typo in the URL is
    an error, not an empty store that says "nothing checkpointed". Servers are never created."""
    scheme = urlsplit(url).scheme
    if scheme == "memory":
        from agentrun.stores.memory import MemoryBackend

        memory = MemoryBackend()
        return Backend(
            memory.checkpoints,
            memory.leases,
            memory.idempotency,
            memory.history,
            memory.ledger,
            url=url,
        )
    if scheme == "sqlite":
        from agentrun.stores import sqlite

        return await sqlite.open_backend(url, create=create)
    if scheme in ("redis", "rediss"):
        from agentrun.stores import redis

        return await redis.open_backend(url)
    if scheme in ("postgresql", "postgres"):
        from agentrun.stores import postgres

        return await postgres.open_backend(url)
    raise ConfigurationError(
        f"store URL {url!r} has scheme {scheme!r}; use one of "
        "sqlite:///path/state.db, redis://host:port/0, postgresql://user@host:port/db, memory://"
    )
