"""What a store gets from the store core for free, whoever wrote it (``agentrun._storecore``).

A third-party store handed to a ``StoreSet`` is never called with an id, a key or a TTL that
some store cannot keep: the checked layer refuses it first, with the ``ConfigurationError`` every
store gives. Its optional capabilities stay visible through the layer, and a backend built from
another backend's stores is not checked (or masked) twice.
"""

from __future__ import annotations

import pytest

from agentrun import open_backend
from agentrun._backend import RunLister, StoreSet
from agentrun._commits import RunReader
from agentrun._errors import ConfigurationError
from agentrun._history import SegmentLister
from agentrun._idempotency import MaskedOutcomes, RunAndRecordsReader
from agentrun._identifiers import MAX_KEY_BYTES
from agentrun._ledger import ChargeLister, Ledger
from agentrun._storecore.checked import (
    CheckedCheckpoints,
    CheckedHistory,
    CheckedIdempotency,
    CheckedLedger,
)
from agentrun.stores._memory import (
    MemoryBackend,
    MemoryCheckpointStore,
    MemoryHistoryStore,
    MemoryLedger,
)
from agentrun.testing._base import refuses_unusable_ids
from tests.kit.stores import CountingCheckpointStore, RecordingHistoryStore


def _with(checkpoints: CountingCheckpointStore) -> StoreSet:
    memory = MemoryBackend()
    return StoreSet(
        checkpoints=checkpoints,
        leases=memory.leases,
        idempotency=memory.idempotency,
        history=memory.history,
        ledger=memory.ledger,
        quotas=memory.quotas,
        url="third-party://",
    )


async def test_a_third_party_store_never_sees_an_id_no_store_can_keep() -> None:
    store = CountingCheckpointStore(MemoryBackend().checkpoints)
    backend = _with(store)
    await refuses_unusable_ids(lambda tenant, run: backend.checkpoints.latest(tenant, run))
    await refuses_unusable_ids(
        lambda tenant, run: backend.checkpoints.put(tenant, run, b"{}", fence=1)
    )
    assert (store.reads, store.puts) == (0, [])
    await backend.checkpoints.put("acme", "run-1", b"{}", fence=1)
    assert store.puts == [b"{}"]


async def test_keys_and_ttls_are_refused_before_any_store_is_asked() -> None:
    backend = MemoryBackend()
    too_long = "k" * (MAX_KEY_BYTES + 1)
    with pytest.raises(ConfigurationError, match="idempotency key"):
        await backend.idempotency.begin("acme", "run-1", too_long, holder="w", fence=1)
    with pytest.raises(ConfigurationError, match="charge id"):
        await backend.ledger.charge("acme", "run-1", too_long, 1, budget=None, fence=1)
    for ttl in (0.0, -1.0, float("nan")):
        with pytest.raises(ConfigurationError, match="ttl"):
            await backend.leases.acquire("acme", "run-1", "w", ttl=ttl)
    assert await backend.leases.held("acme", "run-1") is None


def test_capabilities_stay_visible_through_the_checks() -> None:
    backend = MemoryBackend()
    assert isinstance(backend.checkpoints, RunLister)
    assert isinstance(backend.history, SegmentLister)
    assert isinstance(backend.ledger, ChargeLister)
    assert isinstance(backend.commits, RunReader)
    assert not isinstance(backend.commits, RunAndRecordsReader)  # the memory one reads none

    plain = StoreSet(
        checkpoints=backend.checkpoints,
        leases=backend.leases,
        idempotency=backend.idempotency,
        history=RecordingHistoryStore(MemoryHistoryStore()),  # lists nothing
        ledger=backend.ledger,
        quotas=backend.quotas,
        url="third-party://",
    )
    assert isinstance(plain.history, CheckedHistory)
    assert not isinstance(plain.history, SegmentLister)
    counted = _with(CountingCheckpointStore(backend.checkpoints))  # lists no runs
    assert isinstance(counted.checkpoints, CheckedCheckpoints)
    assert not isinstance(counted.checkpoints, RunLister)
    unlisted = _with_ledger(_PlainLedger())  # lists no charges
    assert isinstance(unlisted.ledger, CheckedLedger)
    assert not isinstance(unlisted.ledger, ChargeLister)


class _ListingCheckpoints(CountingCheckpointStore):
    """A third-party checkpoint store that lists its runs, and what it was asked to list."""

    def __init__(self) -> None:
        super().__init__(MemoryCheckpointStore())
        self.asked: list[tuple[str | None, tuple[str, str] | None, int]] = []

    async def runs(
        self, tenant: str | None = None, *, after: tuple[str, str] | None = None, limit: int = 500
    ) -> tuple[tuple[str, str], ...]:
        self.asked.append((tenant, after, limit))
        return ()


async def test_a_run_listing_is_checked_before_the_store_is_asked() -> None:
    store = _ListingCheckpoints()
    backend = _with(store)
    listing = backend.checkpoints
    assert isinstance(listing, RunLister)
    await refuses_unusable_ids(lambda tenant, run: listing.runs(tenant, after=(tenant, run)))
    await refuses_unusable_ids(lambda tenant, run: listing.runs(after=(tenant, run)))
    for limit in (0, -5):
        with pytest.raises(ConfigurationError, match="page of runs"):
            await listing.runs(limit=limit)
    assert store.asked == []
    await listing.runs()
    await listing.runs("acme", after=("acme", "run-1"), limit=1)
    assert store.asked == [(None, None, 500), ("acme", ("acme", "run-1"), 1)]


async def test_every_memory_backend_lists_its_runs() -> None:
    async with await open_backend("memory://") as backend:
        assert isinstance(backend.checkpoints, RunLister)
        await backend.checkpoints.put("acme", "run-1", b"{}", fence=1)
        assert await backend.checkpoints.runs() == (("acme", "run-1"),)


class _PlainLedger:
    """A third-party ledger that lists no charges: a memory ledger's three calls only."""

    def __init__(self) -> None:
        self.inner = MemoryLedger()

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
        return await self.inner.charge(
            tenant, run_id, charge_id, micros, budget=budget, fence=fence
        )

    async def spent(self, tenant: str, run_id: str) -> int:
        return await self.inner.spent(tenant, run_id)

    async def forget(self, tenant: str, run_id: str) -> None:
        await self.inner.forget(tenant, run_id)


class _ListingLedger(_PlainLedger):
    """A third-party ledger that lists a run's charges, and which runs it was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, str]] = []

    async def charges(self, tenant: str, run_id: str) -> tuple[tuple[str, int], ...]:
        self.asked.append((tenant, run_id))
        return await self.inner.charges(tenant, run_id)


def _with_ledger(ledger: Ledger) -> StoreSet:
    memory = MemoryBackend()
    return StoreSet(
        checkpoints=memory.checkpoints,
        leases=memory.leases,
        idempotency=memory.idempotency,
        history=memory.history,
        ledger=ledger,
        quotas=memory.quotas,
        url="third-party://",
    )


async def test_a_charge_listing_is_checked_before_the_ledger_is_asked() -> None:
    store = _ListingLedger()
    backend = _with_ledger(store)
    listing = backend.ledger
    assert isinstance(listing, ChargeLister)
    await refuses_unusable_ids(listing.charges)
    assert store.asked == []
    await listing.charge("acme", "run-1", "model:e:1", 7, budget=None, fence=1)
    assert await listing.charges("acme", "run-1") == (("model:e:1", 7),)
    assert store.asked == [("acme", "run-1")]


async def test_every_memory_backend_lists_its_charges() -> None:
    async with await open_backend("memory://") as backend:
        assert isinstance(backend.ledger, ChargeLister)
        await backend.ledger.charge("acme", "run-1", "model:e:1", 7, budget=None, fence=1)
        assert await backend.ledger.charges("acme", "run-1") == (("model:e:1", 7),)


def test_a_backend_of_another_backends_stores_checks_and_masks_once() -> None:
    backend = MemoryBackend()
    again = StoreSet(
        checkpoints=backend.checkpoints,
        leases=backend.leases,
        idempotency=backend.idempotency,
        history=backend.history,
        ledger=backend.ledger,
        quotas=backend.quotas,
        url="memory://",
        masker=backend.masker,
    )
    assert again.checkpoints is backend.checkpoints
    assert again.history is backend.history
    assert again.idempotency is backend.idempotency
    assert isinstance(again.idempotency, MaskedOutcomes)
    assert isinstance(again.idempotency.inner, CheckedIdempotency)
