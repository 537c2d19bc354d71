"""The stores of a run, as the one thing a worker opens, hands around and closes: ``Backend``.

``Backend`` is a protocol, and it lives with the store contracts rather than with the adapters,
so that whatever takes a backend (the runner, the CLI, the operator) names no adapter: the memory
backend satisfies it as it is, and each adapter's ``open_backend`` returns a ``StoreSet``. That
keeps the adapters from importing one another through a shared concrete class.

A backend carries the ``Masker`` everything written for its runs is masked with, and an
adapter's idempotency store is wrapped with it (``MaskedOutcomes``) as the ``StoreSet`` is built:
so a tool's outcome, a person's answer and an approval's reason are masked whoever records them
(the runner, the CLI, the operator), and the ``Checkpointer`` and the operator take the same
masker from here.

The stores a ``StoreSet`` is built with are put behind the checks every store call gets
(``agentrun._storecore.checked``): tenant, run id, key and TTL are refused there, once, before
any store sees them, so an adapter, or a third-party store handed to a ``StoreSet``, keeps no
checks of its own and cannot leave one out.

``CheckpointStore`` is here too: it is the one store contract without a module of its own, since
what it stores is ``_frontier``'s and how a frontier is written is ``_checkpointing``'s; and so is
the optional capability of a checkpoint store, ``RunLister``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Protocol, Self, runtime_checkable

from agentrun._commits import CommitStore
from agentrun._history import HistoryStore
from agentrun._idempotency import IdempotencyStore, masking
from agentrun._leases import LeaseStore
from agentrun._ledger import Ledger
from agentrun._quotas import QuotaStore
from agentrun._redaction import Masker
from agentrun._storecore.checked import (
    DEFAULT_RUNS_PAGE,
    checked_checkpoints,
    checked_commits,
    checked_history,
    checked_idempotency,
    checked_leases,
    checked_ledger,
    checked_quotas,
)


class CheckpointStore(Protocol):
    """One frontier per run; last write wins within a fence; a lower fence is refused."""

    async def put(self, tenant: str, run_id: str, payload: bytes, *, fence: int) -> None:
        """Replace the run's frontier with ``payload`` in one atomic, fenced step.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.
            payload: The frontier's bytes, as ``Checkpointer.write`` encoded them.
            fence: The writer's fence.

        Raises:
            StaleFenceError: ``fence`` is below the run's fence mark (another worker has the run).
            CheckpointTooLargeError: The payload is over what the store takes.
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def latest(self, tenant: str, run_id: str) -> bytes | None:
        """The run's frontier as stored.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.

        Returns:
            The frontier's bytes, or None when the run has none.

        Raises:
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def forget(self, tenant: str, run_id: str) -> None:
        """Drop the run's frontier.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.

        Raises:
            StoreUnavailableError: The store could not be reached or answered with an error.
        """


@runtime_checkable
class RunLister(Protocol):
    """A ``CheckpointStore`` that can list the runs it holds a frontier for.

    A worker never needs this: it is handed the run it works on. A person does: without
    Kubernetes there is no resource per run to list, and the frontiers are the one record of
    which runs exist, so a console (or a script) pages through them here. A run has a frontier
    from its first boundary until it is forgotten (``forget``), so a forgotten run is not
    listed, and neither is a run that has only taken a lease.

    Not every store can do this cheaply (Redis scans its keyspace), so it is optional, as
    ``SegmentLister`` is for history stores: ask ``isinstance(store, RunLister)``. The four
    stores the kit ships are listers, and the checks every ``StoreSet`` puts in front of a
    store keep the capability visible (``agentrun._storecore.checked``).
    """

    async def runs(
        self,
        tenant: str | None = None,
        *,
        after: tuple[str, str] | None = None,
        limit: int = DEFAULT_RUNS_PAGE,
    ) -> tuple[tuple[str, str], ...]:
        """One page of the runs with a frontier, in order of (tenant, run id).

        The order is the store's order of text: by code point on the memory, SQLite and Redis
        stores, and on PostgreSQL by the columns' collation, which is the order of the primary
        key that serves the query (by code point under the ``C`` collation). Asking each page
        ``after`` the last run of the one before walks every run once: none twice, and none
        left out that kept its frontier throughout the walk (one written behind the cursor
        shows on the next walk).

        Args:
            tenant: List only this tenant's runs; None lists every tenant's.
            after: Start after this (tenant, run id), which need not be a run; None starts at
                the beginning.
            limit: The most runs to list (1 or more).

        Returns:
            (tenant, run id) pairs, at most ``limit``, in order; fewer than ``limit`` only
            when the listing is at its end.

        Raises:
            ConfigurationError: A tenant or an ``after`` no store can key on (see
                ``agentrun._identifiers``), or a ``limit`` below 1.
            StoreUnavailableError: The store could not be reached or answered with an error.
        """


class Backend(Protocol):
    """The five stores of a run and the quota store, opened together from one URL and closed
    together.

    The five share one fence per run, so a lease acquisition raises the bar for every later write
    to any of them; the quota store keeps per-scope admissions and budgets, with the fence of the
    run's lease on each admission. Use it as an async context manager, or call ``close``.
    """

    @property
    def checkpoints(self) -> CheckpointStore: ...

    @property
    def leases(self) -> LeaseStore: ...

    @property
    def idempotency(self) -> IdempotencyStore: ...

    @property
    def history(self) -> HistoryStore: ...

    @property
    def ledger(self) -> Ledger: ...

    @property
    def quotas(self) -> QuotaStore: ...

    @property
    def url(self) -> str:
        """Where the stores are, with no password in it (it goes into logs)."""

    @property
    def masker(self) -> Masker:
        """What every string written for a run is masked with (see the module)."""

    async def close(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *_: object) -> None: ...


async def _nothing() -> None:
    return None


@dataclass
class StoreSet:
    """A ``Backend`` made of its six stores and what closes them: what an adapter hands back.

    Each store is kept behind its checks (``agentrun._storecore.checked``); the idempotency
    store's outcomes are masked too, after the checks."""

    checkpoints: CheckpointStore
    leases: LeaseStore
    idempotency: IdempotencyStore
    history: HistoryStore
    ledger: Ledger
    quotas: QuotaStore
    url: str
    closer: Callable[[], Awaitable[None]] = field(default=_nothing, repr=False)
    masker: Masker = field(default_factory=Masker.build, repr=False)
    commits: CommitStore | None = field(default=None, repr=False)
    """What commits a whole boundary at once, for stores that share one database (see
    ``agentrun._commits``); None: each store is written on its own. Not part of ``Backend``,
    so a backend of one's own needs only the six stores."""

    def __post_init__(self) -> None:
        self.checkpoints = checked_checkpoints(self.checkpoints)
        self.leases = checked_leases(self.leases)
        self.idempotency = masking(checked_idempotency(self.idempotency), self.masker.outcome)
        self.history = checked_history(self.history)
        self.ledger = checked_ledger(self.ledger)
        self.quotas = checked_quotas(self.quotas)
        if self.commits is not None:
            self.commits = checked_commits(self.commits)

    async def close(self) -> None:
        await self.closer()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()


@asynccontextmanager
async def closed_on_failure(closer: Callable[[], Awaitable[None]]) -> AsyncIterator[None]:
    """Around what an adapter checks between opening its connection and handing its stores
    back (a schema applied or verified, a server's eviction policy): if that fails, or is
    cancelled, the connection is closed before the error goes on, since nobody else holds it
    yet to close it."""
    try:
        yield
    except BaseException:
        await closer()
        raise
