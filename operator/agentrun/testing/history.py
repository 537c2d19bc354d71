"""``HistoryStoreConformance``: content-addressed segments verified on fetch, fenced writes,
isolated tenants, and a handle that no longer resolves raising ``HistoryUnavailableError``."""

from __future__ import annotations

import pytest

from agentrun._errors import HistoryUnavailableError, StaleFenceError
from agentrun._history import (
    HistoryStore,
    SegmentLister,
    append_transcript,
    handle_for,
    load_transcript,
)
from agentrun._identifiers import MAX_ID_BYTES
from agentrun._messages import Message
from agentrun.testing._base import ConformanceBase, refuses_unusable_ids
from agentrun.testing.hostile import HOSTILE_IDS, longest


class HistoryStoreConformance(ConformanceBase):
    role = "history"

    async def test_a_handle_is_the_digest_of_its_segment(
        self, store: HistoryStore, tenant: str
    ) -> None:
        handle = await store.put(tenant, "run", b'{"previous":null,"messages":[]}', fence=1)
        assert handle == handle_for(b'{"previous":null,"messages":[]}')
        assert await store.fetch(tenant, "run", handle) == b'{"previous":null,"messages":[]}'

    async def test_writing_a_segment_twice_is_harmless(
        self, store: HistoryStore, tenant: str
    ) -> None:
        first = await store.put(tenant, "run", b"same", fence=1)
        assert await store.put(tenant, "run", b"same", fence=1) == first

    async def test_an_unknown_handle_is_unavailable(self, store: HistoryStore, tenant: str) -> None:
        with pytest.raises(HistoryUnavailableError):
            await store.fetch(tenant, "run", handle_for(b"never written"))

    async def test_refuses_a_lower_fence(self, store: HistoryStore, tenant: str) -> None:
        await store.put(tenant, "run", b"current", fence=3)
        with pytest.raises(StaleFenceError):
            await store.put(tenant, "run", b"stale", fence=2)
        with pytest.raises(HistoryUnavailableError):
            await store.fetch(tenant, "run", handle_for(b"stale"))

    async def test_forget_evicts_the_transcript(self, store: HistoryStore, tenant: str) -> None:
        handle = await store.put(tenant, "run", b"gone soon", fence=1)
        await store.forget(tenant, "run")
        with pytest.raises(HistoryUnavailableError):
            await store.fetch(tenant, "run", handle)

    async def test_tenants_are_isolated(
        self, store: HistoryStore, tenant: str, other_tenant: str
    ) -> None:
        handle = await store.put(tenant, "run", b"private", fence=1)
        with pytest.raises(HistoryUnavailableError):
            await store.fetch(other_tenant, "run", handle)

    async def test_hostile_ids_never_collide(self, store: HistoryStore, tenant: str) -> None:
        handles = {
            run_id: await store.put(tenant, run_id, run_id.encode(), fence=1)
            for run_id in HOSTILE_IDS
        }
        for run_id, handle in handles.items():
            assert await store.fetch(tenant, run_id, handle) == run_id.encode()
            for other in ("a:b", "x" * 1000):
                if other != run_id:
                    with pytest.raises(HistoryUnavailableError):
                        await store.fetch(tenant, other, handle)

    async def test_a_chained_transcript_round_trips(self, store: HistoryStore, tenant: str) -> None:
        head: str | None = None
        sent: list[Message] = []
        for turn in range(5):
            fresh = [Message.of("user", f"turn {turn}"), Message.of("assistant", f"ok {turn}")]
            head = await append_transcript(
                store, tenant, "run", previous=head, messages=fresh, fence=1
            )
            sent.extend(fresh)
        assert head is not None
        assert await load_transcript(store, tenant, "run", head) == tuple(sent)

    async def test_ids_as_long_as_the_limit_are_kept(
        self, store: HistoryStore, tenant: str
    ) -> None:
        tenant, run_id = longest(MAX_ID_BYTES, tenant), longest(MAX_ID_BYTES, "run")
        handle = await store.put(tenant, run_id, b"long", fence=1)
        assert await store.fetch(tenant, run_id, handle) == b"long"
        await store.forget(tenant, run_id)

    async def test_ids_no_store_can_key_on_are_refused(self, store: HistoryStore) -> None:
        await refuses_unusable_ids(lambda t, r: store.put(t, r, b"segment", fence=1))
        await refuses_unusable_ids(lambda t, r: store.fetch(t, r, handle_for(b"segment")))
        await refuses_unusable_ids(store.forget)


class SegmentListerConformance(ConformanceBase):
    """For a history store that lists a run's segments (``SegmentLister``), so a transcript
    loads in one round trip: it lists all of the run's and nothing of another run or tenant."""

    role = "history"

    async def test_lists_every_segment_of_its_run_at_once(
        self, store: HistoryStore, tenant: str, other_tenant: str
    ) -> None:
        assert isinstance(store, SegmentLister), "the store has no fetch_all(tenant, run_id)"
        handles = {await store.put(tenant, "run", body, fence=1): body for body in (b"a", b"b")}
        await store.put(tenant, "other", b"c", fence=1)
        await store.put(other_tenant, "run", b"d", fence=1)
        assert dict(await store.fetch_all(tenant, "run")) == handles
        assert dict(await store.fetch_all(tenant, "never")) == {}

    async def test_a_transcript_loads_from_the_listing(
        self, store: HistoryStore, tenant: str
    ) -> None:
        head: str | None = None
        sent: list[Message] = []
        for turn in range(20):
            fresh = [Message.of("user", f"turn {turn}")]
            head = await append_transcript(
                store, tenant, "run", previous=head, messages=fresh, fence=1
            )
            sent.extend(fresh)
        assert head is not None
        assert await load_transcript(store, tenant, "run", head) == tuple(sent)
