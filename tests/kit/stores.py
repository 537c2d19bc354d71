"""Fault injectors and counters wrapped around the memory stores.

Each class implements a store protocol by delegating to a real memory store, and either counts
what passed through it or fails on purpose. None of them imitates a store's semantics; they only
make a real store observable or unreliable in one precise way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from agentrun._backend import CheckpointStore
from agentrun._errors import AgentRunError, StoreUnavailableError
from agentrun._frontier import Checkpoint, decode
from agentrun._history import HistoryStore
from agentrun._idempotency import Claim, IdempotencyRecord, IdempotencyStore, ListedRecord
from agentrun._leases import LeaseStore, RunLease


class CountingCheckpointStore:
    """Counts ``latest`` and ``put`` calls on a real checkpoint store."""

    def __init__(self, inner: CheckpointStore) -> None:
        self.inner = inner
        self.reads = 0
        self.puts: list[bytes] = []

    async def put(self, tenant: str, run_id: str, payload: bytes, *, fence: int) -> None:
        await self.inner.put(tenant, run_id, payload, fence=fence)
        self.puts.append(payload)

    async def latest(self, tenant: str, run_id: str) -> bytes | None:
        self.reads += 1
        return await self.inner.latest(tenant, run_id)

    async def forget(self, tenant: str, run_id: str) -> None:
        await self.inner.forget(tenant, run_id)


class FailingCheckpointStore:
    """A checkpoint store whose every write fails with ``error``; reads find nothing."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.attempts = 0

    async def put(self, tenant: str, run_id: str, payload: bytes, *, fence: int) -> None:
        self.attempts += 1
        raise self.error

    async def latest(self, tenant: str, run_id: str) -> bytes | None:
        return None

    async def forget(self, tenant: str, run_id: str) -> None:
        return None


class RecordingHistoryStore:
    """Records the size of every segment a real history store is handed."""

    def __init__(self, inner: HistoryStore) -> None:
        self.inner = inner
        self.segments: list[bytes] = []

    async def put(self, tenant: str, run_id: str, segment: bytes, *, fence: int) -> str:
        handle = await self.inner.put(tenant, run_id, segment, fence=fence)
        self.segments.append(segment)
        return handle

    async def fetch(self, tenant: str, run_id: str, handle: str) -> bytes:
        return await self.inner.fetch(tenant, run_id, handle)

    async def forget(self, tenant: str, run_id: str) -> None:
        await self.inner.forget(tenant, run_id)


class CallLog:
    """Names every idempotency store method called, to prove planning only reads."""

    def __init__(self, inner: IdempotencyStore) -> None:
        self.inner = inner
        self.calls: list[str] = []

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
        self.calls.append("begin")
        return await self.inner.begin(
            tenant, run_id, key, holder=holder, fence=fence, ttl=ttl, call_id=call_id, tool=tool
        )

    async def record(
        self, tenant: str, run_id: str, key: str, outcome: str, *, holder: str, fence: int
    ) -> None:
        self.calls.append("record")
        await self.inner.record(tenant, run_id, key, outcome, holder=holder, fence=fence)

    async def abandon(self, tenant: str, run_id: str, key: str, *, holder: str, fence: int) -> None:
        self.calls.append("abandon")
        await self.inner.abandon(tenant, run_id, key, holder=holder, fence=fence)

    async def read(self, tenant: str, run_id: str, key: str) -> IdempotencyRecord | None:
        self.calls.append("read")
        return await self.inner.read(tenant, run_id, key)

    async def records(self, tenant: str, run_id: str) -> tuple[ListedRecord, ...]:
        self.calls.append("records")
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
        self.calls.append("settle")
        return await self.inner.settle(tenant, run_id, key, outcome, by=by, claimed_by=claimed_by)

    async def forget(self, tenant: str, run_id: str) -> None:
        self.calls.append("forget")
        await self.inner.forget(tenant, run_id)


class Renewals:
    """A real lease store that counts renewals and, given ``error``, fails every one with it
    (acquire, release and held work)."""

    def __init__(self, inner: LeaseStore, error: AgentRunError | None = None) -> None:
        self.inner = inner
        self.error = error
        self.renewals = 0

    async def acquire(self, tenant: str, run_id: str, holder: str, *, ttl: float) -> RunLease:
        return await self.inner.acquire(tenant, run_id, holder, ttl=ttl)

    async def renew(self, lease: RunLease, *, ttl: float) -> RunLease:
        self.renewals += 1
        if self.error is not None:
            raise self.error
        return await self.inner.renew(lease, ttl=ttl)

    async def release(self, lease: RunLease) -> None:
        await self.inner.release(lease)

    async def held(self, tenant: str, run_id: str) -> RunLease | None:
        return await self.inner.held(tenant, run_id)


class HeldRenewals:
    """A real lease store whose renewals, once sent, wait until the test lets them ``through``
    and swallow every cancellation meanwhile, as a driver stuck mid-command can; ``started``
    is set when one is sent."""

    def __init__(self, inner: LeaseStore) -> None:
        self.inner = inner
        self.started = asyncio.Event()
        self.through = asyncio.Event()
        self.swallowed = 0
        self.renewals = 0

    async def acquire(self, tenant: str, run_id: str, holder: str, *, ttl: float) -> RunLease:
        return await self.inner.acquire(tenant, run_id, holder, ttl=ttl)

    async def renew(self, lease: RunLease, *, ttl: float) -> RunLease:
        self.renewals += 1
        self.started.set()
        while not self.through.is_set():
            try:
                await self.through.wait()
            except asyncio.CancelledError:
                self.swallowed += 1
        return await self.inner.renew(lease, ttl=ttl)

    async def release(self, lease: RunLease) -> None:
        await self.inner.release(lease)

    async def held(self, tenant: str, run_id: str) -> RunLease | None:
        return await self.inner.held(tenant, run_id)


def unavailable(operation: str) -> StoreUnavailableError:
    return StoreUnavailableError("test store", operation, ConnectionRefusedError("refused"))


class LosingCheckpointStore:
    """A real checkpoint store that loses the writes ``lost`` picks: it acknowledges them and
    keeps nothing, as a store that lost an acknowledged write does (a failover onto a replica
    that had not received it, a restore from a backup, a Redis without ``appendfsync always``
    that crashed). The frontier it loses was, as far as anyone can tell, never written."""

    def __init__(self, inner: CheckpointStore, lost: Callable[[Checkpoint], bool]) -> None:
        self.inner = inner
        self.lost = lost
        self.dropped: list[Checkpoint] = []

    async def put(self, tenant: str, run_id: str, payload: bytes, *, fence: int) -> None:
        checkpoint = decode(payload)
        if self.lost(checkpoint):
            self.dropped.append(checkpoint)
            return
        await self.inner.put(tenant, run_id, payload, fence=fence)

    async def latest(self, tenant: str, run_id: str) -> bytes | None:
        return await self.inner.latest(tenant, run_id)

    async def forget(self, tenant: str, run_id: str) -> None:
        await self.inner.forget(tenant, run_id)
