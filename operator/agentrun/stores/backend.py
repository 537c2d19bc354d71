"""One backend: the five stores of a run, opened together from one URL and closed together.

``open_backend`` picks the adapter by the URL's scheme and imports its driver only then, so a
kit that never talks to Redis never needs ``redis`` installed.

A backend carries the ``Masker`` everything written for its runs is masked with, and its
idempotency store is wrapped with it (``MaskedOutcomes``) as it is built: so a tool's outcome, a
person's answer and an approval's reason are masked whoever records them (the runner, the CLI,
the operator), and the ``Checkpointer`` and the operator take the same masker from here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from agentrun.checkpointing import CheckpointStore
from agentrun.errors import ConfigurationError
from agentrun.history import HistoryStore
from agentrun.idempotency import IdempotencyStore, masking
from agentrun.leases import LeaseStore
from agentrun.ledger import Ledger
from agentrun.redaction import Masker


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
    masker: Masker = field(default_factory=Masker.build, repr=False)

    def __post_init__(self) -> None:
        self.idempotency = masking(self.idempotency, self.masker.outcome)

    async def close(self) -> None:
        await self.closer()

    async def __aenter__(self) -> Backend:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()


SCHEMES = ("memory", "sqlite", "redis", "rediss", "postgresql", "postgres")


async def open_backend(url: str) -> Backend:
    """Open the stores ``url`` names: ``memory://``, ``sqlite:///path/state.db``,
    ``redis://host:port/db``, ``postgresql://user@host:port/db``."""
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

        return await sqlite.open_backend(url)
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
