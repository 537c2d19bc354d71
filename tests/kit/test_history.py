"""History: content-addressed segments, verified on fetch, chained oldest to newest."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

import pytest

from agentrun.errors import HistoryUnavailableError, StaleFenceError
from agentrun.history import (
    HANDLE_PREFIX,
    Segment,
    append_transcript,
    decode_segment,
    encode_segment,
    handle_for,
    load_transcript,
    previous_of,
    verified,
)
from agentrun.stores.memory import MemoryBackend, MemoryHistoryStore
from tests.support.frontiers import RUN, TENANT, conversation


def test_a_handle_is_the_sha256_of_the_segment() -> None:
    segment = b'{"previous":null,"messages":[]}'
    assert handle_for(segment) == HANDLE_PREFIX + hashlib.sha256(segment).hexdigest()
    assert handle_for(segment) != handle_for(segment + b" ")


def test_verified_returns_matching_bytes_and_refuses_the_rest() -> None:
    segment = b"segment"
    assert verified(RUN, handle_for(segment), segment) == segment
    with pytest.raises(HistoryUnavailableError, match="no segment") as missing:
        verified(RUN, handle_for(segment), None)
    assert missing.value.run_id == RUN
    with pytest.raises(HistoryUnavailableError, match="do not match"):
        verified(RUN, handle_for(segment), b"tampered")


async def test_a_chain_loads_oldest_first(backend: MemoryBackend) -> None:
    head = None
    for turn in range(3):
        head = await append_transcript(
            backend.history,
            TENANT,
            RUN,
            previous=head,
            messages=conversation(1, start=turn),
            fence=0,
        )
    assert head is not None
    assert await load_transcript(backend.history, TENANT, RUN, head) == conversation(3)


async def test_an_empty_segment_is_a_valid_start(backend: MemoryBackend) -> None:
    head = await append_transcript(
        backend.history, TENANT, RUN, previous=None, messages=(), fence=0
    )
    assert await load_transcript(backend.history, TENANT, RUN, head) == ()


async def test_a_handle_of_another_run_does_not_resolve(backend: MemoryBackend) -> None:
    head = await append_transcript(
        backend.history, TENANT, RUN, previous=None, messages=conversation(1), fence=0
    )
    with pytest.raises(HistoryUnavailableError):
        await load_transcript(backend.history, TENANT, "another-run", head)
    with pytest.raises(HistoryUnavailableError):
        await load_transcript(backend.history, "another-tenant", RUN, head)


async def test_an_unreadable_segment_is_unavailable(backend: MemoryBackend) -> None:
    handle = await backend.history.put(TENANT, RUN, b"not a segment", fence=0)
    with pytest.raises(HistoryUnavailableError, match="unreadable"):
        await load_transcript(backend.history, TENANT, RUN, handle)


async def test_a_cycle_is_unavailable_not_an_endless_loop(backend: MemoryBackend) -> None:
    # A segment cannot name its own digest, but a store may hand back any bytes under a
    # handle: a store that answers every fetch with one segment pointing at itself.
    class Looping:
        async def put(self, tenant: str, run_id: str, segment: bytes, *, fence: int) -> str:
            return handle_for(segment)

        async def fetch(self, tenant: str, run_id: str, handle: str) -> bytes:
            return Segment(previous=handle, messages=conversation(1)).model_dump_json().encode()

        async def forget(self, tenant: str, run_id: str) -> None:
            return None

    with pytest.raises(HistoryUnavailableError, match="cycle"):
        await load_transcript(Looping(), TENANT, RUN, "sha256:start")


async def test_a_history_write_under_a_superseded_fence_is_refused(
    backend: MemoryBackend,
) -> None:
    lease = await backend.leases.acquire(TENANT, RUN, "w1", ttl=30)
    with pytest.raises(StaleFenceError):
        await append_transcript(
            backend.history,
            TENANT,
            RUN,
            previous=None,
            messages=conversation(1),
            fence=lease.fence - 1,
        )


class CountingHistory:
    """A lister over the reference store that counts the reads a load makes."""

    def __init__(self, inner: MemoryHistoryStore, *, tamper: str | None = None) -> None:
        self.inner = inner
        self.tamper = tamper
        self.reads: list[str] = []

    async def put(self, tenant: str, run_id: str, segment: bytes, *, fence: int) -> str:
        return await self.inner.put(tenant, run_id, segment, fence=fence)

    async def fetch(self, tenant: str, run_id: str, handle: str) -> bytes:
        self.reads.append("fetch")
        return await self.inner.fetch(tenant, run_id, handle)

    async def fetch_all(self, tenant: str, run_id: str) -> Mapping[str, bytes]:
        self.reads.append("fetch_all")
        listed = dict(await self.inner.fetch_all(tenant, run_id))
        if self.tamper is not None:
            listed[self.tamper] = listed[self.tamper] + b" "
        return listed

    async def forget(self, tenant: str, run_id: str) -> None:
        await self.inner.forget(tenant, run_id)


async def _chain(store: CountingHistory, turns: int) -> tuple[list[str], list[object]]:
    heads: list[str] = []
    sent: list[object] = []
    head = None
    for turn in range(turns):
        fresh = conversation(turn + 1)[-1:]
        head = await append_transcript(store, TENANT, RUN, previous=head, messages=fresh, fence=0)
        heads.append(head)
        sent.extend(fresh)
    return heads, sent


async def test_a_long_chain_loads_in_one_read_whatever_its_length() -> None:
    store = CountingHistory(MemoryHistoryStore())
    heads, sent = await _chain(store, 40)
    await store.put(TENANT, RUN, b"an orphan no frontier reached", fence=0)
    assert list(await load_transcript(store, TENANT, RUN, heads[-1])) == sent
    assert store.reads == ["fetch_all"]


async def test_a_listed_segment_is_still_verified_against_its_handle() -> None:
    store = CountingHistory(MemoryHistoryStore())
    heads, _ = await _chain(store, 5)
    store.tamper = heads[2]
    with pytest.raises(HistoryUnavailableError, match="do not match"):
        await load_transcript(store, TENANT, RUN, heads[-1])


async def test_segments_in_the_older_form_still_load() -> None:
    # Stores written before segments were compressed hold their JSON alone.
    store = MemoryHistoryStore()
    head = None
    sent: list[object] = []
    for turn in range(3):
        fresh = conversation(turn + 1)[-1:]
        body = Segment(previous=head, messages=fresh).model_dump_json().encode()
        head = await store.put(TENANT, RUN, body, fence=0)
        sent.extend(fresh)
    assert head is not None
    assert list(await load_transcript(store, TENANT, RUN, head)) == sent


async def test_a_segment_is_compressed_against_the_chain_before_it() -> None:
    _, first_body = encode_segment(None, conversation(4))
    again, _ = encode_segment("sha256:x", conversation(4), first_body)
    alone, _ = encode_segment("sha256:x", conversation(4))
    assert len(again) < len(alone) / 2, (len(again), len(alone))
    assert previous_of(RUN, handle_for(again), again) == "sha256:x"
    with pytest.raises(HistoryUnavailableError, match="unreadable"):
        decode_segment(RUN, handle_for(again), again)  # without the chain before it
    segment, _ = decode_segment(RUN, handle_for(again), again, first_body)
    assert segment.messages == conversation(4)
