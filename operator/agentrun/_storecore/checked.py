"""The id, key and TTL checks of every store call, made once, in front of the store.

Every store keys what it keeps by (tenant, run id) and some calls by a key (the quota store by
tenant, scope and a run id or a window), and every store must refuse alike what one of them
cannot keep (``agentrun._identifiers``), an empty scope or window, a negative limit and a TTL
that is not positive, before it does anything. Each store used to check for itself, call by
call: about ninety call sites, and a store written by someone else could forget one. Here each
protocol has a thin layer that checks its arguments and hands the call on; ``StoreSet`` puts
every store it is built with behind one (``checked``), so every backend ``open_backend``
returns, and any backend of one's own built as a ``StoreSet``, checks every call, and no store
checks again.

A store's optional capabilities stay visible through its layer: a history store that lists a
run's segments (``SegmentLister``) gets a layer that lists them too, a checkpoint store that
lists its runs (``RunLister``) one that lists them, a ledger that lists a run's charges
(``ChargeLister``) one that lists them, a commit store that reads a run back (``RunReader``,
``RunAndRecordsReader``) one that reads it back; a store without the capability gets a layer
without it. ``inner`` is the store itself, for what only it knows (a driver's pool, a test's
look inside).

The checks are in ``async`` methods that await the store's, so an unusable id is raised where
the call is awaited, as from the store itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from agentrun._commits import BoundaryCommit, CommitStore, RunReader
from agentrun._errors import ConfigurationError
from agentrun._history import HistoryStore, SegmentLister
from agentrun._idempotency import (
    Claim,
    IdempotencyRecord,
    IdempotencyStore,
    ListedRecord,
    MaskedOutcomes,
    RunAndRecordsReader,
)
from agentrun._identifiers import check_key, check_name, check_run, check_tenant
from agentrun._leases import LeaseStore, RunLease, require_positive_ttl
from agentrun._ledger import ChargeLister, Ledger
from agentrun._quotas import Allowance, QuotaStore, Spend, Spending

if TYPE_CHECKING:
    from agentrun._backend import CheckpointStore, RunLister

DEFAULT_RUNS_PAGE = 500
"""How many runs ``RunLister.runs`` lists at most when not told. Here rather than beside the
protocol in ``agentrun._backend``, which imports this module (and hands the number on)."""
IDEMPOTENCY_KEY = "idempotency key"
CHARGE_ID = "charge id"
SCOPE = "quota scope"
WINDOW = "budget window"


class CheckedCheckpoints:
    def __init__(self, inner: CheckpointStore) -> None:
        self.inner = inner

    async def put(self, tenant: str, run_id: str, payload: bytes, *, fence: int) -> None:
        check_run(tenant, run_id)
        await self.inner.put(tenant, run_id, payload, fence=fence)

    async def latest(self, tenant: str, run_id: str) -> bytes | None:
        check_run(tenant, run_id)
        return await self.inner.latest(tenant, run_id)

    async def forget(self, tenant: str, run_id: str) -> None:
        check_run(tenant, run_id)
        await self.inner.forget(tenant, run_id)


class CheckedRunLister(CheckedCheckpoints):
    """The layer of a checkpoint store that is a ``RunLister``."""

    def __init__(self, inner: CheckpointStore, lister: RunLister) -> None:
        super().__init__(inner)
        self._lister = lister

    async def runs(
        self,
        tenant: str | None = None,
        *,
        after: tuple[str, str] | None = None,
        limit: int = DEFAULT_RUNS_PAGE,
    ) -> tuple[tuple[str, str], ...]:
        if tenant is not None:
            check_tenant(tenant)
        if after is not None:
            check_run(*after)
        if limit < 1:
            raise ConfigurationError(f"a page of runs is {limit} long; give 1 or more")
        return await self._lister.runs(tenant, after=after, limit=limit)


class CheckedLeases:
    """A lease being renewed or released came from ``acquire``, whose ids were checked."""

    def __init__(self, inner: LeaseStore) -> None:
        self.inner = inner

    async def acquire(self, tenant: str, run_id: str, holder: str, *, ttl: float) -> RunLease:
        check_run(tenant, run_id)
        require_positive_ttl(ttl)
        return await self.inner.acquire(tenant, run_id, holder, ttl=ttl)

    async def renew(self, lease: RunLease, *, ttl: float) -> RunLease:
        require_positive_ttl(ttl)
        return await self.inner.renew(lease, ttl=ttl)

    async def release(self, lease: RunLease) -> None:
        await self.inner.release(lease)

    async def held(self, tenant: str, run_id: str) -> RunLease | None:
        check_run(tenant, run_id)
        return await self.inner.held(tenant, run_id)


class CheckedIdempotency:
    def __init__(self, inner: IdempotencyStore) -> None:
        self.inner = inner

    async def begin(
        self,
        tenant: str,
        run_id: str,
        key: str,
        *,
        holder: str,
        fence: int,
        ttl: float | None = None,
        call_id: str | None = None,
        tool: str | None = None,
    ) -> Claim:
        _check_call(tenant, run_id, key)
        if ttl is not None:
            require_positive_ttl(ttl)
        return await self.inner.begin(
            tenant, run_id, key, holder=holder, fence=fence, ttl=ttl, call_id=call_id, tool=tool
        )

    async def record(
        self, tenant: str, run_id: str, key: str, outcome: str, *, holder: str, fence: int
    ) -> None:
        _check_call(tenant, run_id, key)
        await self.inner.record(tenant, run_id, key, outcome, holder=holder, fence=fence)

    async def abandon(self, tenant: str, run_id: str, key: str, *, holder: str, fence: int) -> None:
        _check_call(tenant, run_id, key)
        await self.inner.abandon(tenant, run_id, key, holder=holder, fence=fence)

    async def read(self, tenant: str, run_id: str, key: str) -> IdempotencyRecord | None:
        _check_call(tenant, run_id, key)
        return await self.inner.read(tenant, run_id, key)

    async def records(self, tenant: str, run_id: str) -> tuple[ListedRecord, ...]:
        check_run(tenant, run_id)
        return await self.inner.records(tenant, run_id)

    async def settle(
        self,
        tenant: str,
        run_id: str,
        key: str,
        outcome: str | None,
        *,
        by: str,
        claimed_by: tuple[str, int] | None = None,
    ) -> bool:
        _check_call(tenant, run_id, key)
        return await self.inner.settle(tenant, run_id, key, outcome, by=by, claimed_by=claimed_by)

    async def forget(self, tenant: str, run_id: str) -> None:
        check_run(tenant, run_id)
        await self.inner.forget(tenant, run_id)


def _check_call(tenant: str, run_id: str, key: str) -> None:
    check_run(tenant, run_id)
    check_key(IDEMPOTENCY_KEY, key)


class CheckedHistory:
    def __init__(self, inner: HistoryStore) -> None:
        self.inner = inner

    async def put(self, tenant: str, run_id: str, segment: bytes, *, fence: int) -> str:
        check_run(tenant, run_id)
        return await self.inner.put(tenant, run_id, segment, fence=fence)

    async def fetch(self, tenant: str, run_id: str, handle: str) -> bytes:
        check_run(tenant, run_id)
        return await self.inner.fetch(tenant, run_id, handle)

    async def forget(self, tenant: str, run_id: str) -> None:
        check_run(tenant, run_id)
        await self.inner.forget(tenant, run_id)


class CheckedSegmentLister(CheckedHistory):
    """The layer of a history store that is a ``SegmentLister``."""

    def __init__(self, inner: HistoryStore, lister: SegmentLister) -> None:
        super().__init__(inner)
        self._lister = lister

    async def fetch_all(self, tenant: str, run_id: str) -> Mapping[str, bytes]:
        check_run(tenant, run_id)
        return await self._lister.fetch_all(tenant, run_id)


class CheckedLedger:
    def __init__(self, inner: Ledger) -> None:
        self.inner = inner

    async def charge(
        self,
        tenant: str,
        run_id: str,
        charge_id: str,
        micros: int,
        *,
        budget: int | None,
        fence: int,
    ) -> int:
        check_run(tenant, run_id)
        check_key(CHARGE_ID, charge_id)
        return await self.inner.charge(
            tenant, run_id, charge_id, micros, budget=budget, fence=fence
        )

    async def spent(self, tenant: str, run_id: str) -> int:
        check_run(tenant, run_id)
        return await self.inner.spent(tenant, run_id)

    async def forget(self, tenant: str, run_id: str) -> None:
        check_run(tenant, run_id)
        await self.inner.forget(tenant, run_id)


class CheckedChargeLister(CheckedLedger):
    """The layer of a ledger that is a ``ChargeLister``."""

    def __init__(self, inner: Ledger, lister: ChargeLister) -> None:
        super().__init__(inner)
        self._lister = lister

    async def charges(self, tenant: str, run_id: str) -> tuple[tuple[str, int], ...]:
        check_run(tenant, run_id)
        return await self._lister.charges(tenant, run_id)


class CheckedCommits:
    def __init__(self, inner: CommitStore) -> None:
        self.inner = inner

    async def commit(self, boundary: BoundaryCommit) -> int | None:
        check_run(boundary.tenant, boundary.run_id)
        if boundary.charge is not None:
            check_key(CHARGE_ID, boundary.charge.charge_id)
        return await self.inner.commit(boundary)


class CheckedRunReader(CheckedCommits):
    """The layer of a commit store that is a ``RunReader``."""

    def __init__(self, inner: CommitStore, reader: RunReader) -> None:
        super().__init__(inner)
        self._reader = reader

    async def read_run(self, tenant: str, run_id: str) -> tuple[bytes | None, Mapping[str, bytes]]:
        check_run(tenant, run_id)
        return await self._reader.read_run(tenant, run_id)


class CheckedRecordsReader(CheckedRunReader):
    """The layer of a commit store that is a ``RunAndRecordsReader`` too."""

    def __init__(self, inner: CommitStore, reader: RunReader, records: RunAndRecordsReader) -> None:
        super().__init__(inner, reader)
        self._records = records

    def lists_records_of(self, idempotency: IdempotencyStore) -> bool:
        """Asked of the store with ``idempotency``'s own store, the one its layer checks for."""
        inner = idempotency.inner if isinstance(idempotency, CheckedIdempotency) else idempotency
        return self._records.lists_records_of(inner)

    async def read_run_and_records(
        self, tenant: str, run_id: str
    ) -> tuple[bytes | None, Mapping[str, bytes], tuple[ListedRecord, ...]]:
        check_run(tenant, run_id)
        return await self._records.read_run_and_records(tenant, run_id)


class CheckedQuotas:
    def __init__(self, inner: QuotaStore) -> None:
        self.inner = inner

    async def admit(self, tenant: str, scope: str, run_id: str, *, fence: int, limit: int) -> bool:
        check_run(tenant, run_id)
        check_name(SCOPE, scope)
        if limit < 0:
            raise ConfigurationError(f"the limit of {SCOPE} {scope!r} is {limit}; give 0 or more")
        return await self.inner.admit(tenant, scope, run_id, fence=fence, limit=limit)

    async def leave(self, tenant: str, scope: str, run_id: str, *, fence: int) -> None:
        check_run(tenant, run_id)
        check_name(SCOPE, scope)
        await self.inner.leave(tenant, scope, run_id, fence=fence)

    async def admitted(self, tenant: str, scope: str) -> dict[str, int]:
        _check_scope(tenant, scope)
        return await self.inner.admitted(tenant, scope)

    async def reserve(
        self, tenant: str, scope: str, window: str, *, ask: Spend, limit: Allowance, ttl: float
    ) -> bool:
        _check_window(tenant, scope, window)
        require_positive_ttl(ttl)
        return await self.inner.reserve(tenant, scope, window, ask=ask, limit=limit, ttl=ttl)

    async def settle(
        self, tenant: str, scope: str, window: str, *, reserved: Spend, used: Spend, ttl: float
    ) -> None:
        _check_window(tenant, scope, window)
        require_positive_ttl(ttl)
        await self.inner.settle(tenant, scope, window, reserved=reserved, used=used, ttl=ttl)

    async def spending(self, tenant: str, scope: str, window: str) -> Spending:
        _check_window(tenant, scope, window)
        return await self.inner.spending(tenant, scope, window)

    async def forget(self, tenant: str, scope: str) -> None:
        _check_scope(tenant, scope)
        await self.inner.forget(tenant, scope)


def _check_scope(tenant: str, scope: str) -> None:
    check_tenant(tenant)
    check_name(SCOPE, scope)


def _check_window(tenant: str, scope: str, window: str) -> None:
    _check_scope(tenant, scope)
    check_name(WINDOW, window)


def checked_checkpoints(store: CheckpointStore) -> CheckpointStore:
    # Here, not at the top: ``agentrun._backend`` builds its ``StoreSet`` with this module.
    from agentrun._backend import RunLister

    if isinstance(store, CheckedCheckpoints):
        return store
    if isinstance(store, RunLister):
        return CheckedRunLister(store, store)
    return CheckedCheckpoints(store)


def checked_leases(store: LeaseStore) -> LeaseStore:
    return store if isinstance(store, CheckedLeases) else CheckedLeases(store)


def checked_idempotency(store: IdempotencyStore) -> IdempotencyStore:
    """``store`` behind its layer; one already behind it (or masked behind it) as it is."""
    if isinstance(store, CheckedIdempotency) or (
        isinstance(store, MaskedOutcomes) and isinstance(store.inner, CheckedIdempotency)
    ):
        return store
    return CheckedIdempotency(store)


def checked_history(store: HistoryStore) -> HistoryStore:
    if isinstance(store, CheckedHistory):
        return store
    if isinstance(store, SegmentLister):
        return CheckedSegmentLister(store, store)
    return CheckedHistory(store)


def checked_ledger(store: Ledger) -> Ledger:
    if isinstance(store, CheckedLedger):
        return store
    if isinstance(store, ChargeLister):
        return CheckedChargeLister(store, store)
    return CheckedLedger(store)


def checked_quotas(store: QuotaStore) -> QuotaStore:
    return store if isinstance(store, CheckedQuotas) else CheckedQuotas(store)


def checked_commits(store: CommitStore) -> CommitStore:
    if isinstance(store, CheckedCommits):
        return store
    if isinstance(store, RunAndRecordsReader) and isinstance(store, RunReader):
        return CheckedRecordsReader(store, store, store)
    if isinstance(store, RunReader):
        return CheckedRunReader(store, store)
    return CheckedCommits(store)
