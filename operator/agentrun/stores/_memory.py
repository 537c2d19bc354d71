"""In-process stores: the reference the conformance suites are first run against.

Nothing here outlives the process, which is precisely what surviving a restart is not; these
exist so the guarantees can be exercised without a database. They share one ``FenceBook`` when
given one (``MemoryBackend`` does), so a lease acquisition raises the bar for every later write
of the run at once, as the SQL and Redis stores do with their shared fence row or key.

The clock is injectable (``clock``) and is the store's clock: leases and claims expire by it,
never by the caller's. Like every store, these check no ids: ``MemoryBackend`` is a ``StoreSet``,
whose checks come first (``agentrun._storecore.checked``).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from agentrun._backend import StoreSet
from agentrun._commits import BoundaryCommit
from agentrun._errors import BudgetExceededError
from agentrun._history import handle_for, verified
from agentrun._idempotency import (
    Claim,
    ClaimState,
    IdempotencyRecord,
    ListedRecord,
    not_holder,
)
from agentrun._leases import RunLease, renewal_refused
from agentrun._quotas import NO_SPENDING, Allowance, Spend, Spending, refuse_superseded
from agentrun._storecore.checked import (
    DEFAULT_RUNS_PAGE,
    CheckedChargeLister,
    CheckedRunLister,
    CheckedSegmentLister,
)
from agentrun._storecore.fences import held_elsewhere, refuse_stale

Run = tuple[str, str]
Now = Callable[[], float]
"""The store's clock: expiry is decided by it, never by a caller's."""


class FenceBook:
    """The highest fence seen per run; a write below it is refused."""

    def __init__(self) -> None:
        self._highest: dict[Run, int] = {}

    def highest(self, run: Run) -> int:
        return self._highest.get(run, 0)

    def admit(self, run: Run, fence: int, what: str) -> None:
        refuse_stale(
            tenant=run[0], run_id=run[1], fence=fence, current=self.highest(run), what=what
        )
        self._highest[run] = fence


class MemoryCheckpointStore:
    """The reference ``CheckpointStore``, in process."""

    def __init__(self, fences: FenceBook | None = None) -> None:
        self._fences = fences or FenceBook()
        self._payloads: dict[Run, bytes] = {}

    async def put(self, tenant: str, run_id: str, payload: bytes, *, fence: int) -> None:
        run = (tenant, run_id)
        self._fences.admit(run, fence, "checkpoint write")
        self._payloads[run] = bytes(payload)

    async def latest(self, tenant: str, run_id: str) -> bytes | None:
        return self._payloads.get((tenant, run_id))

    async def forget(self, tenant: str, run_id: str) -> None:
        self._payloads.pop((tenant, run_id), None)

    async def runs(
        self, tenant: str | None = None, *, after: Run | None = None, limit: int = DEFAULT_RUNS_PAGE
    ) -> tuple[Run, ...]:
        """``RunLister.runs``: the runs with a frontier, by code point."""
        listed = (
            run
            for run in self._payloads
            if (tenant is None or run[0] == tenant) and (after is None or run > after)
        )
        return tuple(heapq.nsmallest(limit, listed))


@dataclass
class _Lease:
    holder: str
    fence: int
    expires: float


class MemoryLeaseStore:
    """The reference ``LeaseStore``, in process, on an injectable clock."""

    def __init__(self, fences: FenceBook | None = None, clock: Now = time.monotonic) -> None:
        self._fences = fences or FenceBook()
        self._clock = clock
        self._leases: dict[Run, _Lease] = {}

    def _live(self, run: Run) -> _Lease | None:
        lease = self._leases.get(run)
        return lease if lease is not None and lease.expires > self._clock() else None

    def _view(self, run: Run, lease: _Lease) -> RunLease:
        return RunLease(
            tenant=run[0],
            run_id=run[1],
            holder=lease.holder,
            fence=lease.fence,
            remaining=max(0.0, lease.expires - self._clock()),
        )

    async def acquire(self, tenant: str, run_id: str, holder: str, *, ttl: float) -> RunLease:
        run = (tenant, run_id)
        live = self._live(run)
        if live is not None and live.holder != holder:
            raise held_elsewhere(
                tenant=tenant,
                run_id=run_id,
                requested_by=holder,
                holder=live.holder,
                fence=live.fence,
            )
        # Every acquisition is admitted into the book, so its mark is above every fence issued.
        fence = self._fences.highest(run) + 1
        self._fences.admit(run, fence, "lease acquisition")
        self._leases[run] = _Lease(holder, fence, self._clock() + ttl)
        return self._view(run, self._leases[run])

    async def renew(self, lease: RunLease, *, ttl: float) -> RunLease:
        run = (lease.tenant, lease.run_id)
        live = self._live(run)
        if live is None or live.fence != lease.fence or live.holder != lease.holder:
            raise renewal_refused(lease, None if live is None else (live.holder, live.fence))
        live.expires = self._clock() + ttl
        return self._view(run, live)

    async def release(self, lease: RunLease) -> None:
        run = (lease.tenant, lease.run_id)
        current = self._leases.get(run)
        if current is not None and current.fence == lease.fence and current.holder == lease.holder:
            del self._leases[run]

    async def held(self, tenant: str, run_id: str) -> RunLease | None:
        run = (tenant, run_id)
        live = self._live(run)
        return None if live is None else self._view(run, live)


@dataclass
class _Record:
    state: ClaimState
    holder: str
    fence: int
    outcome: str | None = None
    expires: float | None = None
    call_id: str | None = None
    tool: str | None = None


class MemoryIdempotencyStore:
    """The reference ``IdempotencyStore``, in process, on an injectable clock."""

    def __init__(self, fences: FenceBook | None = None, clock: Now = time.monotonic) -> None:
        self._fences = fences or FenceBook()
        self._clock = clock
        self._records: dict[tuple[str, str, str], _Record] = {}

    def _live(self, at: tuple[str, str, str]) -> _Record | None:
        record = self._records.get(at)
        if record is not None and record.expires is not None and record.expires <= self._clock():
            del self._records[at]
            return None
        return record

    def _view(self, key: str, record: _Record) -> IdempotencyRecord:
        remaining = None if record.expires is None else max(0.0, record.expires - self._clock())
        return IdempotencyRecord(
            key=key,
            state=record.state,
            holder=record.holder,
            fence=record.fence,
            outcome=record.outcome,
            remaining=remaining,
            call_id=record.call_id,
            tool=record.tool,
        )

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
        self._fences.admit((tenant, run_id), fence, f"claim of {key}")
        at = (tenant, run_id, key)
        existing = self._live(at)
        if existing is not None:
            return Claim(won=False, record=self._view(key, existing))
        record = _Record(
            ClaimState.IN_FLIGHT,
            holder,
            fence,
            expires=None if ttl is None else self._clock() + ttl,
            call_id=call_id,
            tool=tool,
        )
        self._records[at] = record
        return Claim(won=True, record=self._view(key, record))

    def _own(
        self, tenant: str, run_id: str, key: str, holder: str, fence: int, what: str
    ) -> _Record:
        self._fences.admit((tenant, run_id), fence, what)
        record = self._live((tenant, run_id, key))
        if (
            record is None
            or record.state is not ClaimState.IN_FLIGHT
            or record.holder != holder
            or record.fence != fence
        ):
            raise not_holder(
                tenant,
                run_id,
                what,
                holder=holder,
                fence=fence,
                claim_fence=None if record is None else record.fence,
            )
        return record

    async def record(
        self, tenant: str, run_id: str, key: str, outcome: str, *, holder: str, fence: int
    ) -> None:
        record = self._own(tenant, run_id, key, holder, fence, f"outcome of {key}")
        record.state, record.outcome, record.expires = ClaimState.COMPLETED, outcome, None

    async def abandon(self, tenant: str, run_id: str, key: str, *, holder: str, fence: int) -> None:
        self._own(tenant, run_id, key, holder, fence, f"abandoning {key}")
        del self._records[(tenant, run_id, key)]

    async def read(self, tenant: str, run_id: str, key: str) -> IdempotencyRecord | None:
        record = self._live((tenant, run_id, key))
        return None if record is None else self._view(key, record)

    async def records(self, tenant: str, run_id: str) -> tuple[ListedRecord, ...]:
        run = (tenant, run_id)
        listed = []
        for at in [at for at in self._records if at[:2] == run]:
            record = self._live(at)
            if record is not None:
                listed.append(ListedRecord.of(at[2], record))
        return tuple(listed)

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
        at = (tenant, run_id, key)
        previous = self._records.get(at)
        if claimed_by is not None and (
            previous is None
            or previous.state is not ClaimState.IN_FLIGHT
            or (previous.holder, previous.fence) != claimed_by
        ):
            return False
        if outcome is None:
            self._records.pop(at, None)
            return True
        fence = previous.fence if previous is not None else 0
        self._records[at] = _Record(ClaimState.COMPLETED, by, fence, outcome)
        return True

    async def forget(self, tenant: str, run_id: str) -> None:
        run = (tenant, run_id)
        for at in [at for at in self._records if at[:2] == run]:
            del self._records[at]


class MemoryHistoryStore:
    """The reference ``HistoryStore``, in process."""

    def __init__(self, fences: FenceBook | None = None) -> None:
        self._fences = fences or FenceBook()
        self._segments: dict[Run, dict[str, bytes]] = {}

    async def put(self, tenant: str, run_id: str, segment: bytes, *, fence: int) -> str:
        run = (tenant, run_id)
        self._fences.admit(run, fence, "history write")
        handle = handle_for(segment)
        self._segments.setdefault(run, {})[handle] = bytes(segment)
        return handle

    async def fetch(self, tenant: str, run_id: str, handle: str) -> bytes:
        return verified(run_id, handle, self._segments.get((tenant, run_id), {}).get(handle))

    async def fetch_all(self, tenant: str, run_id: str) -> Mapping[str, bytes]:
        return dict(self._segments.get((tenant, run_id), {}))

    def drop(self, tenant: str, run_id: str, handles: tuple[str, ...]) -> None:
        """Delete the segments a compacted one replaces (for ``MemoryCommitStore.commit``)."""
        segments = self._segments.get((tenant, run_id), {})
        for handle in handles:
            segments.pop(handle, None)

    async def forget(self, tenant: str, run_id: str) -> None:
        self._segments.pop((tenant, run_id), None)


class MemoryLedger:
    """Charges per run, each with its micros, and the run's running total, so a charge never
    re-reads the others."""

    def __init__(self, fences: FenceBook | None = None) -> None:
        self._fences = fences or FenceBook()
        self._charges: dict[Run, dict[str, int]] = {}
        self._spent: dict[Run, int] = {}

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
        run = (tenant, run_id)
        self._fences.admit(run, fence, "ledger charge")
        charges = self._charges.setdefault(run, {})
        spent = self._spent.get(run, 0)
        if charge_id in charges:
            return spent
        if budget is not None and spent + micros > budget:
            raise BudgetExceededError(run_id=run_id, spent=spent, charge=micros, budget=budget)
        charges[charge_id] = micros
        self._spent[run] = spent + micros
        return spent + micros

    async def spent(self, tenant: str, run_id: str) -> int:
        return self._spent.get((tenant, run_id), 0)

    async def charges(self, tenant: str, run_id: str) -> tuple[tuple[str, int], ...]:
        """``ChargeLister.charges``: the run's charges, by charge id in code point order."""
        return tuple(sorted(self._charges.get((tenant, run_id), {}).items()))

    async def forget(self, tenant: str, run_id: str) -> None:
        run = (tenant, run_id)
        self._charges.pop(run, None)
        self._spent.pop(run, None)


@dataclass
class _Window:
    spending: Spending
    expires: float


class MemoryQuotaStore:
    """The reference ``QuotaStore``, in process, on an injectable clock. No call suspends between
    its check and its write, so each is atomic among the process's tasks."""

    def __init__(self, clock: Now = time.monotonic) -> None:
        self._clock = clock
        self._admitted: dict[tuple[str, str], dict[str, int]] = {}
        self._windows: dict[tuple[str, str, str], _Window] = {}

    async def admit(self, tenant: str, scope: str, run_id: str, *, fence: int, limit: int) -> bool:
        admitted = self._admitted.setdefault((tenant, scope), {})
        recorded = admitted.get(run_id)
        if recorded is not None:
            refuse_superseded(
                tenant=tenant,
                scope=scope,
                run_id=run_id,
                fence=fence,
                recorded=recorded,
                leaving=False,
            )
        elif len(admitted) >= limit:
            return False
        admitted[run_id] = fence
        return True

    async def leave(self, tenant: str, scope: str, run_id: str, *, fence: int) -> None:
        admitted = self._admitted.get((tenant, scope), {})
        recorded = admitted.get(run_id)
        if recorded is None:
            return
        refuse_superseded(
            tenant=tenant, scope=scope, run_id=run_id, fence=fence, recorded=recorded, leaving=True
        )
        del admitted[run_id]

    async def admitted(self, tenant: str, scope: str) -> dict[str, int]:
        return dict(self._admitted.get((tenant, scope), {}))

    def _live(self, at: tuple[str, str, str]) -> Spending:
        window = self._windows.get(at)
        if window is None or window.expires <= self._clock():
            self._windows.pop(at, None)
            return NO_SPENDING
        return window.spending

    async def reserve(
        self, tenant: str, scope: str, window: str, *, ask: Spend, limit: Allowance, ttl: float
    ) -> bool:
        at = (tenant, scope, window)
        spending = self._live(at)
        if not limit.leaves_room(spending, ask):
            return False
        reserved = spending.reserved.plus(ask)
        self._windows[at] = _Window(
            Spending(spent=spending.spent, reserved=reserved), self._clock() + ttl
        )
        return True

    async def settle(
        self, tenant: str, scope: str, window: str, *, reserved: Spend, used: Spend, ttl: float
    ) -> None:
        at = (tenant, scope, window)
        spending = self._live(at)
        settled = Spending(
            spent=spending.spent.plus(used), reserved=spending.reserved.less(reserved)
        )
        self._windows[at] = _Window(settled, self._clock() + ttl)

    async def spending(self, tenant: str, scope: str, window: str) -> Spending:
        return self._live((tenant, scope, window))

    async def forget(self, tenant: str, scope: str) -> None:
        self._admitted.pop((tenant, scope), None)
        for at in [at for at in self._windows if at[:2] == (tenant, scope)]:
            del self._windows[at]


class MemoryCommitStore:
    """The reference ``CommitStore``: one fence check, then the segment, the frontier and the
    charge. None of the stores' writes suspends, so nothing runs in between: all or nothing."""

    def __init__(
        self,
        fences: FenceBook,
        checkpoints: MemoryCheckpointStore,
        history: MemoryHistoryStore,
        ledger: MemoryLedger,
    ) -> None:
        self._fences = fences
        self._checkpoints = checkpoints
        self._history = history
        self._ledger = ledger

    async def commit(self, boundary: BoundaryCommit) -> int | None:
        tenant, run_id, fence = boundary.tenant, boundary.run_id, boundary.fence
        self._fences.admit((tenant, run_id), fence, "boundary commit")
        if boundary.segment is not None:
            await self._history.put(tenant, run_id, boundary.segment, fence=fence)
        self._history.drop(tenant, run_id, boundary.dropped)
        await self._checkpoints.put(tenant, run_id, boundary.frontier, fence=fence)
        if boundary.charge is None:
            return None
        charge = boundary.charge
        return await self._ledger.charge(
            tenant, run_id, charge.charge_id, charge.micros, budget=None, fence=fence
        )

    async def read_run(self, tenant: str, run_id: str) -> tuple[bytes | None, Mapping[str, bytes]]:
        frontier = await self._checkpoints.latest(tenant, run_id)
        if frontier is None:
            return None, {}
        return frontier, await self._history.fetch_all(tenant, run_id)


class MemoryBackend(StoreSet):
    """Every memory store of one process, sharing one fence book and one clock: a ``Backend``
    that tests (and ``open_backend("memory://")``) use where a real one would need a server."""

    checkpoints: CheckedRunLister
    """The memory checkpoint store behind its checks, which lists its runs."""
    history: CheckedSegmentLister
    """The memory history store behind its checks, which lists a run's segments."""
    ledger: CheckedChargeLister
    """The memory ledger behind its checks, which lists a run's charges."""

    def __init__(self, clock: Now = time.monotonic, *, url: str = "memory://") -> None:
        fences = FenceBook()
        checkpoints = MemoryCheckpointStore(fences)
        history = MemoryHistoryStore(fences)
        ledger = MemoryLedger(fences)
        super().__init__(
            checkpoints=checkpoints,
            leases=MemoryLeaseStore(fences, clock),
            idempotency=MemoryIdempotencyStore(fences, clock),
            history=history,
            ledger=ledger,
            quotas=MemoryQuotaStore(clock),
            url=url,
            commits=MemoryCommitStore(fences, checkpoints, history, ledger),
        )
