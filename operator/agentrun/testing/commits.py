"""``CommitStoreConformance``: a whole boundary in one commit, all of it or none of it.

For a backend that has a ``CommitStore`` (``StoreSet.commits``): what it commits is what the
separate stores read back (the frontier, the segment under its handle, the charge in the run's
total, the segments it drops gone); a stale fence refuses all of it and leaves nothing partial; a
commit retried counts its charge once; and its fence check raises the run's fence for every
store, as theirs do.

``RunReaderConformance``, for a ``CommitStore`` that is also a ``RunReader``: ``read_run`` hands
back what the separate stores read (the latest frontier, every segment by its handle), nothing for
a run without a frontier, and nothing of another tenant's or run's.
"""

from __future__ import annotations

import pytest

from agentrun._backend import StoreSet
from agentrun._commits import BoundaryCommit, Charge, CommitStore, RunReader
from agentrun._errors import HistoryUnavailableError, StaleFenceError
from agentrun._history import handle_for
from agentrun.testing._base import ConformanceBase


class CommitStoreConformance(ConformanceBase):
    role = "commits"

    async def test_one_commit_is_read_back_by_each_store(
        self, store: CommitStore, backend: StoreSet, tenant: str
    ) -> None:
        commit = BoundaryCommit(tenant, "run", 1, b'{"f":1}', b"segment", Charge("model:1", 70))
        assert await store.commit(commit) == 70
        assert await backend.checkpoints.latest(tenant, "run") == b'{"f":1}'
        assert await backend.history.fetch(tenant, "run", handle_for(b"segment")) == b"segment"
        assert await backend.ledger.spent(tenant, "run") == 70
        assert await store.commit(BoundaryCommit(tenant, "run", 1, b'{"f":2}')) is None
        assert await backend.checkpoints.latest(tenant, "run") == b'{"f":2}'

    async def test_a_stale_fence_refuses_all_of_it(
        self, store: CommitStore, backend: StoreSet, tenant: str
    ) -> None:
        await store.commit(BoundaryCommit(tenant, "run", 3, b'{"f":3}', b"new", Charge("a", 5)))
        stale = BoundaryCommit(tenant, "run", 2, b'{"f":2}', b"stale", Charge("b", 7))
        with pytest.raises(StaleFenceError):
            await store.commit(stale)
        assert await backend.checkpoints.latest(tenant, "run") == b'{"f":3}'
        with pytest.raises(HistoryUnavailableError):
            await backend.history.fetch(tenant, "run", handle_for(b"stale"))
        assert await backend.ledger.spent(tenant, "run") == 5

    async def test_a_retried_commit_counts_its_charge_once(
        self, store: CommitStore, backend: StoreSet, tenant: str
    ) -> None:
        commit = BoundaryCommit(tenant, "run", 1, b'{"f":1}', b"seg", Charge("model:1", 40))
        assert await store.commit(commit) == 40
        assert await store.commit(commit) == 40
        later = BoundaryCommit(tenant, "run", 1, b'{"f":2}', None, Charge("model:2", 2))
        assert await store.commit(later) == 42
        assert await backend.ledger.charge(tenant, "run", "model:2", 2, budget=None, fence=1) == 42
        assert await backend.ledger.spent(tenant, "run") == 42

    async def test_it_raises_the_fence_for_every_store(
        self, store: CommitStore, backend: StoreSet, tenant: str
    ) -> None:
        await store.commit(BoundaryCommit(tenant, "run", 5, b'{"f":5}'))
        with pytest.raises(StaleFenceError):
            await backend.checkpoints.put(tenant, "run", b'{"f":4}', fence=4)
        with pytest.raises(StaleFenceError):
            await backend.history.put(tenant, "run", b"late", fence=4)
        with pytest.raises(StaleFenceError):
            await backend.ledger.charge(tenant, "run", "late", 1, budget=None, fence=4)

    async def test_a_commit_deletes_the_segments_it_drops(
        self, store: CommitStore, backend: StoreSet, tenant: str
    ) -> None:
        for segment in (b"one", b"two", b"three"):
            await store.commit(BoundaryCommit(tenant, "run", 2, b'{"f":1}', segment))
        dropped = (handle_for(b"one"), handle_for(b"two"))
        stale = BoundaryCommit(tenant, "run", 1, b'{"f":0}', b"stale", dropped=dropped)
        with pytest.raises(StaleFenceError):
            await store.commit(stale)
        assert await backend.history.fetch(tenant, "run", handle_for(b"one")) == b"one"
        await store.commit(BoundaryCommit(tenant, "run", 2, b'{"f":2}', b"both", dropped=dropped))
        for gone in dropped:
            with pytest.raises(HistoryUnavailableError):
                await backend.history.fetch(tenant, "run", gone)
        assert await backend.history.fetch(tenant, "run", handle_for(b"three")) == b"three"
        assert await backend.history.fetch(tenant, "run", handle_for(b"both")) == b"both"
        assert await backend.checkpoints.latest(tenant, "run") == b'{"f":2}'
        again = BoundaryCommit(tenant, "run", 2, b'{"f":2}', b"both", dropped=dropped)
        assert await store.commit(again) is None  # a retried commit: nothing left to drop

    @pytest.mark.parametrize("segment", [None, b"new"], ids=["no-segment", "segment"])
    @pytest.mark.parametrize("charge", [None, Charge("model:2", 30)], ids=["no-charge", "charge"])
    @pytest.mark.parametrize("drops", [False, True], ids=["no-drop", "drop"])
    async def test_every_shape_of_boundary_commits_all_of_it_or_none(
        self,
        store: CommitStore,
        backend: StoreSet,
        tenant: str,
        segment: bytes | None,
        charge: Charge | None,
        drops: bool,
    ) -> None:
        """A store may write each shape its own way (PostgreSQL: a statement per shape); each
        must still be all of it behind the fence, or nothing."""
        await store.commit(BoundaryCommit(tenant, "run", 2, b'{"f":1}', b"old", Charge("m", 12)))
        dropped = (handle_for(b"old"),) if drops else ()
        stale = BoundaryCommit(tenant, "run", 1, b'{"f":0}', segment, charge, dropped)
        with pytest.raises(StaleFenceError):
            await store.commit(stale)
        assert await backend.checkpoints.latest(tenant, "run") == b'{"f":1}'
        assert await backend.history.fetch(tenant, "run", handle_for(b"old")) == b"old"
        assert await backend.ledger.spent(tenant, "run") == 12
        if segment is not None:
            with pytest.raises(HistoryUnavailableError):
                await backend.history.fetch(tenant, "run", handle_for(segment))
        commit = BoundaryCommit(tenant, "run", 2, b'{"f":2}', segment, charge, dropped)
        assert await store.commit(commit) == (None if charge is None else 42)
        assert await backend.checkpoints.latest(tenant, "run") == b'{"f":2}'
        assert await backend.ledger.spent(tenant, "run") == (12 if charge is None else 42)
        if segment is not None:
            assert await backend.history.fetch(tenant, "run", handle_for(segment)) == segment
        if drops:
            with pytest.raises(HistoryUnavailableError):
                await backend.history.fetch(tenant, "run", handle_for(b"old"))
        else:
            assert await backend.history.fetch(tenant, "run", handle_for(b"old")) == b"old"

    async def test_tenants_and_runs_are_apart(
        self, store: CommitStore, backend: StoreSet, tenant: str, other_tenant: str
    ) -> None:
        await store.commit(BoundaryCommit(tenant, "run", 1, b'{"f":1}', b"s", Charge("c", 9)))
        assert await backend.checkpoints.latest(other_tenant, "run") is None
        assert await backend.checkpoints.latest(tenant, "other") is None
        assert await backend.ledger.spent(other_tenant, "run") == 0
        with pytest.raises(HistoryUnavailableError):
            await backend.history.fetch(tenant, "other", handle_for(b"s"))


class RunReaderConformance(ConformanceBase):
    role = "commits"

    async def test_it_reads_back_the_latest_frontier_and_every_segment(
        self, store: RunReader, backend: StoreSet, tenant: str
    ) -> None:
        assert isinstance(store, RunReader)
        assert backend.commits is not None
        await backend.commits.commit(BoundaryCommit(tenant, "run", 1, b'{"f":1}', b"one"))
        await backend.commits.commit(BoundaryCommit(tenant, "run", 1, b'{"f":2}', b"two"))
        await backend.commits.commit(BoundaryCommit(tenant, "run", 1, b'{"f":3}'))
        frontier, segments = await store.read_run(tenant, "run")
        assert frontier == b'{"f":3}' == await backend.checkpoints.latest(tenant, "run")
        assert dict(segments) == {handle_for(b"one"): b"one", handle_for(b"two"): b"two"}

    async def test_a_run_without_a_frontier_reads_as_nothing(
        self, store: RunReader, backend: StoreSet, tenant: str
    ) -> None:
        assert await store.read_run(tenant, "never") == (None, {})
        await backend.history.put(tenant, "segments-only", b"orphan", fence=1)
        frontier, segments = await store.read_run(tenant, "segments-only")
        assert frontier is None
        assert not segments

    async def test_tenants_and_runs_are_apart(
        self, store: RunReader, backend: StoreSet, tenant: str, other_tenant: str
    ) -> None:
        assert backend.commits is not None
        await backend.commits.commit(BoundaryCommit(tenant, "run", 1, b'{"f":1}', b"mine"))
        await backend.commits.commit(BoundaryCommit(tenant, "other", 1, b'{"o":1}', b"its"))
        assert await store.read_run(other_tenant, "run") == (None, {})
        frontier, segments = await store.read_run(tenant, "run")
        assert frontier == b'{"f":1}'
        assert dict(segments) == {handle_for(b"mine"): b"mine"}
