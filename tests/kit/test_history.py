"""History: content-addressed segments, verified on fetch, chained oldest to newest."""

from __future__ import annotations

import gc
import hashlib
import zlib
from collections.abc import Iterator, Mapping

import pytest

from agentrun._errors import HistoryUnavailableError, StaleFenceError
from agentrun._frontier import encode_message
from agentrun._history import (
    COMPRESSED,
    CONTEXT_BYTES,
    HANDLE_PREFIX,
    SEGMENT,
    ZSTD_SEGMENT,
    Segment,
    SegmentForm,
    append_transcript,
    decode_segment,
    encode_segment,
    handle_for,
    header_length,
    load_chain,
    load_transcript,
    previous_of,
    read_chain,
    verified,
)
from agentrun._messages import Message
from agentrun.stores._memory import MemoryBackend, MemoryHistoryStore
from tests.support.collector import collections_started
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
    messages = _encoded(conversation(4))
    _, first_body = encode_segment(None, messages)
    previous = handle_for(b"the segment before")
    again, _ = encode_segment(previous, messages, first_body)
    alone, _ = encode_segment(previous, messages)
    assert len(again) < len(alone) / 2, (len(again), len(alone))
    assert previous_of(RUN, handle_for(again), again) == previous
    with pytest.raises(HistoryUnavailableError, match="unreadable"):
        decode_segment(RUN, handle_for(again), again)  # without the chain before it
    segment, _ = decode_segment(RUN, handle_for(again), again, first_body)
    assert segment.messages == conversation(4)
    assert segment.previous == previous


def test_a_segment_names_its_previous_once_in_32_bytes() -> None:
    # The handle covers every stored byte, so the header's digest needs no second copy in the
    # body, nor 71 characters of text: what repeats per segment is what keeps a chain above the
    # compressed size of the transcript written once.
    previous = handle_for(b"the segment before")
    digest = bytes.fromhex(previous.removeprefix(HANDLE_PREFIX))
    stored, body = encode_segment(previous, _encoded(conversation(2)))
    assert stored.count(digest) == 1
    assert previous.encode() not in stored
    assert previous.encode() not in body
    assert header_length(stored) == len(SEGMENT) + 1 + 32 + 2
    first, _ = encode_segment(None, _encoded(conversation(2)))
    assert header_length(first) == len(SEGMENT) + 1 + 2
    assert previous_of(RUN, handle_for(first), first) is None


@pytest.mark.parametrize("form", [SegmentForm.ZSTD, SegmentForm.DEFLATE])
def test_a_cut_short_segment_is_unreadable_not_half_read(form: SegmentForm) -> None:
    stored, _ = encode_segment(None, _encoded(conversation(3)), form=form)
    for cut in (stored[: len(SEGMENT) + 2], stored[:-5], stored[:-1], stored + b"more"):
        with pytest.raises(HistoryUnavailableError, match="unreadable"):
            decode_segment(RUN, handle_for(cut), cut)
    with pytest.raises(ValueError, match="not a handle"):
        encode_segment("sha256:x", ())


def _in_the_previous_form(
    previous: str | None, messages: tuple[Message, ...], context: bytes
) -> tuple[bytes, bytes]:
    """A segment as the release before ``SEGMENT`` wrote it (``COMPRESSED``)."""
    body = Segment(previous=previous, messages=messages).model_dump_json().encode()
    dictionary = context[-CONTEXT_BYTES:]
    compressor = zlib.compressobj(6, zdict=dictionary) if dictionary else zlib.compressobj(6)
    header = COMPRESSED + (previous or "").encode() + b"\n" + str(len(dictionary)).encode() + b"\n"
    return header + compressor.compress(body) + compressor.flush(), body


async def test_a_chain_the_previous_release_began_loads_and_carries_on_in_the_new_form() -> None:
    # Runs stored by the release before carry on here: their segments are read as written, and
    # the next ones, in the new form, are compressed against the older ones' JSON.
    store = MemoryHistoryStore()
    head: str | None = None
    context = b""
    for turn in range(3):
        stored, body = _in_the_previous_form(
            head, conversation(3)[2 * turn : 2 * turn + 2], context
        )
        head = await store.put(TENANT, RUN, stored, fence=0)
        context += body
    assert head is not None
    messages, carried = await load_chain(store, TENANT, RUN, head)
    assert messages == conversation(3)
    assert carried == context
    stored, _ = encode_segment(head, _encoded(conversation(4)[6:]), carried)
    assert stored.startswith(ZSTD_SEGMENT)
    head = await store.put(TENANT, RUN, stored, fence=0)
    assert await load_transcript(store, TENANT, RUN, head) == conversation(4)


def _encoded(messages: tuple[Message, ...]) -> list[bytes]:
    return [encode_message(message) for message in messages]


def _after_200_messages() -> tuple[bytes, str]:
    """The JSON of a chain's first 200 messages (more than a segment's context) and a handle
    for the segment before the next one."""
    context = b"".join(_encoded(conversation(200)))
    assert len(context) > CONTEXT_BYTES
    return context, handle_for(b"the segment before")


def test_a_transient_segment_is_stored_uncompressed_and_still_read() -> None:
    # A segment the next compaction replaces is not compressed: a deflate stream at level 0
    # (its JSON verbatim, in stored blocks) against no dictionary, which its header says, and
    # the reader needs nothing else to read it.
    context, previous = _after_200_messages()
    messages = _encoded(conversation(201)[-2:])
    kept, _ = encode_segment(previous, messages, context)
    for form in SegmentForm:
        transient, body = encode_segment(previous, messages, context, transient=True, form=form)
        assert body in transient
        if form is SegmentForm.ZLIB_JSON:
            assert transient.startswith(COMPRESSED + previous.encode() + b"\n0\n")
        else:
            at = header_length(transient) - 2
            assert int.from_bytes(transient[at : at + 2], "big") == 0
        segment, _ = decode_segment(RUN, handle_for(transient), transient, context)
        assert segment.messages == conversation(201)[-2:]
    at = header_length(kept) - 2
    assert int.from_bytes(kept[at : at + 2], "big") == CONTEXT_BYTES
    segment, _ = decode_segment(RUN, handle_for(kept), kept, context)
    assert segment.messages == conversation(201)[-2:]


def test_a_zstd_segment_round_trips_against_the_chain_and_stores_less_than_deflate() -> None:
    # What the default form is for: a compacted segment (16 boundaries' messages) against the
    # chain's preceding 32 KB, in fewer bytes than raw deflate of the same, read back whole.
    context, previous = _after_200_messages()
    messages = _encoded(conversation(216)[-16:])
    stored, body = encode_segment(previous, messages, context)
    deflated, same = encode_segment(previous, messages, context, form=SegmentForm.DEFLATE)
    assert stored.startswith(ZSTD_SEGMENT)
    assert body == same
    assert len(stored) < len(deflated), (len(stored), len(deflated))
    assert header_length(stored) == len(ZSTD_SEGMENT) + 1 + 32 + 2
    at = header_length(stored) - 2
    assert int.from_bytes(stored[at : at + 2], "big") == CONTEXT_BYTES
    assert previous_of(RUN, handle_for(stored), stored) == previous
    segment, read = decode_segment(RUN, handle_for(stored), stored, context)
    assert segment.messages == conversation(216)[-16:]
    assert segment.previous == previous
    assert read == body
    with pytest.raises(HistoryUnavailableError, match="unreadable"):
        decode_segment(RUN, handle_for(stored), stored)  # without the chain before it
    other = b"x" * CONTEXT_BYTES  # as long as it should be, but other bytes
    with pytest.raises(HistoryUnavailableError, match="unreadable"):
        decode_segment(RUN, handle_for(stored), stored, other)


def test_a_corrupt_zstd_segment_is_unreadable() -> None:
    # The handle would catch a flipped byte first; this is what the reader does with bytes a
    # store handed back under their own digest: refuse them, never return a garbled transcript.
    stored, _ = encode_segment(None, _encoded(conversation(3)))
    at = header_length(stored)
    for flipped in (at, at + 4, len(stored) // 2, len(stored) - 1):
        corrupt = stored[:flipped] + bytes((stored[flipped] ^ 0xFF,)) + stored[flipped + 1 :]
        with pytest.raises(HistoryUnavailableError, match="unreadable"):
            decode_segment(RUN, handle_for(corrupt), corrupt)


async def test_a_chain_mixing_every_form_loads_and_carries_on() -> None:
    # A run written by older releases, then by this one with each setting in turn (a rolling
    # upgrade and back), reads as one conversation, transient segments and all.
    store = MemoryHistoryStore()
    head: str | None = None
    context = b""
    sent: tuple[Message, ...] = ()
    writes = [
        (SegmentForm.ZLIB_JSON, False),
        (SegmentForm.DEFLATE, False),
        (SegmentForm.ZSTD, False),
        (SegmentForm.ZSTD, True),
        (SegmentForm.DEFLATE, True),
        (SegmentForm.ZSTD, False),
    ]
    for turn, (form, transient) in enumerate(writes):
        fresh = conversation(10, start=10 * turn)
        stored, body = encode_segment(
            head, _encoded(fresh), context, transient=transient, form=form
        )
        head = await store.put(TENANT, RUN, stored, fence=0)
        context = (context + body)[-CONTEXT_BYTES:]
        sent += fresh
    assert head is not None
    messages, carried = await load_chain(store, TENANT, RUN, head)
    assert messages == sent
    assert carried == context


async def test_the_context_a_chain_carries_is_the_tail_of_its_json_whatever_the_sizes() -> None:
    # A compacted segment's JSON is longer than the context, a transient one's shorter: either
    # way, what the next segment is compressed against is the last CONTEXT_BYTES of them all.
    store = MemoryHistoryStore()
    head: str | None = None
    joined = b""
    sent: tuple[Message, ...] = ()
    for turn, turns in enumerate((300, 3, 1, 300, 2)):
        fresh = conversation(turns, start=1000 * turn)
        stored, body = encode_segment(head, _encoded(fresh), joined[-CONTEXT_BYTES:])
        head = await store.put(TENANT, RUN, stored, fence=0)
        joined += body
        sent += fresh
    assert head is not None
    assert len(encode_segment(None, _encoded(conversation(300)))[1]) > CONTEXT_BYTES
    messages, carried = await load_chain(store, TENANT, RUN, head)
    assert messages == sent
    assert carried == joined[-CONTEXT_BYTES:]


async def test_an_older_segment_whose_body_names_another_previous_is_unavailable() -> None:
    # The older form names its previous twice, in its header and in its JSON: the walk follows
    # the header, so a body naming another chain is a segment nobody wrote.
    store = MemoryHistoryStore()
    first, _ = encode_segment(None, _encoded(conversation(1)), form=SegmentForm.ZLIB_JSON)
    previous = await store.put(TENANT, RUN, first, fence=0)
    body = Segment(previous=handle_for(b"another chain"), messages=conversation(1, start=1))
    forged = (
        COMPRESSED + previous.encode() + b"\n0\n" + zlib.compress(body.model_dump_json().encode())
    )
    head = await store.put(TENANT, RUN, forged, fence=0)
    with pytest.raises(HistoryUnavailableError, match="other chains"):
        await load_chain(store, TENANT, RUN, head)


@pytest.fixture
def collector() -> Iterator[list[int]]:
    with collections_started() as started:
        yield started


async def _listed_chain() -> tuple[MemoryHistoryStore, Mapping[str, bytes], str]:
    """A chain of two segments of 200 messages each, and its segments as listed."""
    store = MemoryHistoryStore()
    head = None
    for start in (0, 100):
        fresh = conversation(100, start=start)
        head = await append_transcript(store, TENANT, RUN, previous=head, messages=fresh, fence=0)
    assert head is not None
    return store, await store.fetch_all(TENANT, RUN), head


async def test_decoding_leaves_the_collector_running_as_the_caller_had_it(
    collector: list[int],
) -> None:
    """No process-wide state switched under the caller: the collector keeps running while a
    transcript decodes (a library that paused it would pause every thread of the process)."""
    store, listed, head = await _listed_chain()
    gc.enable()
    collector.clear()
    messages, _ = await load_chain(store, TENANT, RUN, head, listed)
    assert gc.isenabled()
    assert len(collector) >= len(messages)  # several collections a message decoded


async def test_decoding_leaves_a_collector_the_caller_switched_off_off(
    collector: list[int],
) -> None:
    store, listed, head = await _listed_chain()
    gc.disable()
    collector.clear()
    messages, _ = await load_chain(store, TENANT, RUN, head, listed)
    assert messages
    assert not gc.isenabled()
    assert collector == []


async def test_a_caller_may_choose_the_collector_paused_while_it_decodes(
    collector: list[int],
) -> None:
    store, listed, head = await _listed_chain()
    gc.enable()
    collector.clear()
    read = await read_chain(store, TENANT, RUN, head, listed, pause_collector=True)
    assert len(collector) < len(read.messages) / 2  # the walk's, none while it decodes
    assert gc.isenabled()


async def test_the_paused_collector_is_on_again_when_decoding_raises(
    collector: list[int],
) -> None:
    store, listed, head = await _listed_chain()
    segment = listed[head]
    garbled = {**listed, head: segment[:-8] + bytes(8)}
    gc.enable()
    with pytest.raises(HistoryUnavailableError):
        # Verified by its handle, so it is the decoding, not the walk, that finds it unreadable.
        await read_chain(
            store, TENANT, RUN, handle_for(garbled[head]), garbled, pause_collector=True
        )
    assert gc.isenabled()
