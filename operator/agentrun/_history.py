"""The transcript out of line: content-addressed segments chained by hash.

A run that has gone on for a day carries a conversation far past any sensible checkpoint cap, and
a frontier that refuses to be written is a run that cannot be resumed. So the frontier can carry
a ``history_handle`` instead of its messages.

The transcript is stored incrementally: each boundary appends one segment holding only the
messages added since the previous one and the handle of that previous segment. A handle is the
digest of its segment's bytes, so the bytes written over a run grow with the transcript and not
with its square, a segment can be written twice harmlessly, and a fetch can prove that what came
back is what was written. A handle that no longer resolves, or resolves to other bytes, raises
``HistoryUnavailableError``: the run stops rather than continue a conversation with a hole in it.

A segment is stored compressed, by the client: a segment holds a turn or two (a few KB), or 16
or 64 boundaries' messages when compacted or merged, too little for any compressor alone, so
each is compressed with the chain's preceding 32 KB as its dictionary. By default
(``SegmentForm.ZSTD``, since kit 0.2.0) a segment that stays is a zstd frame against that
context as a raw-content dictionary:
on the 200-turn booking run of ``bench.boundaries`` a chain stores a little less than zlib -6
of the whole transcript written once, where raw deflate against the same 32 KB (zlib's whole
window) stores a little more, and it reads back a little faster (``bench/README.md``). A
transient segment (one the next compacted segment
replaces) is raw deflate at level 0: stored, not compressed (see ``encode_segment``).

What is stored (``ZSTD_SEGMENT``, and ``SEGMENT`` for raw deflate): four bytes naming the form,
one byte saying how long the previous segment's SHA-256 is (32, or 0 for the first segment), that
digest as raw bytes, the dictionary's length in two bytes, and the compressed stream of the
segment's messages as a JSON array. Nothing is said twice: the previous handle is in the header
only (it is covered by the handle, the digest of every stored byte, as the body is), and the
stream carries no checksum (zlib's Adler-32, zstd's XXH64: they check what the digest already
proves). ``SEGMENT`` throughout (``SegmentForm.DEFLATE``) is still written on request, and the
forms written before are read as they were: ``COMPRESSED`` (a text header naming the previous
handle, and a zlib stream of ``{"previous": ..., "messages": [...]}``, which names it again) and,
older, that JSON alone. A chain may mix them: a run written by an older release carries on here,
its next segments in the new form. An older release cannot read a newer form (it raises
``HistoryUnavailableError``, "unreadable", and the run ends ``HistoryUnavailable``), so which form
is written is a choice (``SegmentForm``): while workers of such a release may still take runs over
— a rolling upgrade from it — write the newest form it reads; once none is left, the default.
"""

from __future__ import annotations

import gc
import hashlib
import json
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable

import zstandard
from pydantic import Field, TypeAdapter, ValidationError

from agentrun._base import FrozenModel
from agentrun._commits import BoundaryCommit
from agentrun._errors import HistoryUnavailableError
from agentrun._frontier import encode_message
from agentrun._messages import Message

HANDLE_PREFIX = "sha256:"
SEGMENT = b"ARS\x02"
"""How a segment begins in ``SegmentForm.DEFLATE`` (and a transient one in ``ZSTD``); then one
byte, the length of the previous segment's digest (32, or 0 for none), that digest, the
dictionary's length (two bytes, big-endian) and the raw deflate stream of the messages' JSON
array."""
COMPRESSED = b"agentrun-segment/zlib\n"
"""How a segment began in the form written before ``SEGMENT`` (still read): then the previous
handle (empty for none), a newline, the dictionary's length in decimal, a newline, and the zlib
stream of the segment's JSON (``Segment``)."""
ZSTD_SEGMENT = b"ARS\x03"
"""How a segment begins in ``SegmentForm.ZSTD``: the header of ``SEGMENT`` (the previous digest,
the dictionary's length), then a zstd frame of the messages' JSON array, compressed against that
much of the preceding transcript as a raw-content dictionary."""
_DIGEST = 32


class SegmentForm(StrEnum):
    """The form segments are written in; every form is read whatever is written."""

    DEFLATE = "deflate"
    """``SEGMENT``: the previous digest once, raw deflate of the messages throughout. Resumes as
    fast as ``ZSTD`` and stores a little more; its compacting boundary costs a little less at
    the p99 (``bench.boundaries --segment-form``)."""
    ZLIB_JSON = "zlib-json"
    """``COMPRESSED``: the only form releases up to kit 0.1.0 (chart 0.2.0) read; larger (the
    previous handle twice, in text) and slower to resume."""
    ZSTD = "zstd"
    """``ZSTD_SEGMENT``: as ``DEFLATE``, but segments that stay are zstd frames (level
    ``ZSTD_LEVEL``); transient ones are raw deflate at level 0, stored rather than compressed
    (``encode_segment``). The default; read from kit 0.2.0 (chart 0.3.0) on."""


CONTEXT_BYTES = 32 * 1024
"""How much of the preceding transcript a segment is compressed against: zlib's window, past
which a preset dictionary is never used."""


class HistoryStore(Protocol):
    """Stores segments by content. Implementations call ``handle_for`` and ``verified``."""

    async def put(self, tenant: str, run_id: str, segment: bytes, *, fence: int) -> str:
        """Store ``segment`` and return its handle; refuse a fence below the run's highest.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.
            segment: The segment's bytes, as ``encode_segment`` made them.
            fence: The writer's fence.

        Returns:
            The segment's handle (``handle_for`` its bytes).

        Raises:
            StaleFenceError: ``fence`` is below the run's fence mark (another worker has the run).
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def fetch(self, tenant: str, run_id: str, handle: str) -> bytes:
        """Return the segment's bytes, verified against the handle.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.
            handle: The segment's handle.

        Returns:
            The segment's bytes.

        Raises:
            HistoryUnavailableError: No segment has that handle, or its bytes do not match it.
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def forget(self, tenant: str, run_id: str) -> None:
        """Drop every segment of the run.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.

        Raises:
            StoreUnavailableError: The store could not be reached or answered with an error.
        """


@runtime_checkable
class SegmentLister(Protocol):
    """A ``HistoryStore`` that can hand over every segment of a run in one round trip.

    A transcript is a chain, and walking it with ``fetch`` costs one round trip per segment:
    400 at 200 turns, the whole of a resume's time. A store that lists the run's segments at once
    lets ``load_transcript`` walk the chain in memory instead. The listing is not trusted:
    every segment on the chain is still checked against its handle (``verified``), and segments
    the chain does not reach (written by a boundary whose frontier never landed) are ignored.
    """

    async def fetch_all(self, tenant: str, run_id: str) -> Mapping[str, bytes]:
        """Every segment of the run, by handle, as stored (unverified)."""


class Segment(FrozenModel):
    previous: str | None = None
    messages: tuple[Message, ...] = Field(default=())


def handle_for(segment: bytes) -> str:
    return HANDLE_PREFIX + hashlib.sha256(segment).hexdigest()


def committed_handle(boundary: BoundaryCommit) -> str | None:
    """The handle a ``CommitStore`` keys the commit's segment by: the one the writer gave
    (``BoundaryCommit.handle``), else the segment's digest; None without a segment."""
    if boundary.segment is None:
        return None
    return boundary.handle or handle_for(boundary.segment)


def verified(run_id: str, handle: str, segment: bytes | None) -> bytes:
    """The segment, if it is present and is the one ``handle`` names."""
    if segment is None:
        raise HistoryUnavailableError(
            run_id=run_id, handle=handle, why="no segment is stored under it"
        )
    if handle_for(segment) != handle:
        raise HistoryUnavailableError(
            run_id=run_id, handle=handle, why="the stored bytes do not match the handle"
        )
    return segment


async def append_transcript(
    store: HistoryStore,
    tenant: str,
    run_id: str,
    *,
    previous: str | None,
    messages: Sequence[Message],
    fence: int,
) -> str:
    """Append ``messages`` after ``previous`` and return the new head's handle."""
    stored, _ = encode_segment(previous, [encode_message(message) for message in messages])
    return await store.put(tenant, run_id, stored, fence=fence)


ZSTD_LEVEL = 10
"""zstd's level for the segments that stay, in ``SegmentForm.ZSTD``: over the compacted
segments of the 200-turn booking conversation of ``bench.boundaries``, 10 is the first level
that stores less than zlib -6 of the whole transcript and the last before the time a segment
doubles (``bench/README.md``)."""


def encode_segment(
    previous: str | None,
    messages: Sequence[bytes],
    context: bytes = b"",
    *,
    transient: bool = False,
    form: SegmentForm = SegmentForm.ZSTD,
) -> tuple[bytes, bytes]:
    """The bytes to store for the segment holding ``messages`` (each as ``encode_message``
    writes it) after ``previous`` (its handle is their digest, ``handle_for``, known before it
    is stored), and the segment's JSON.

    ``context`` is the JSON of the chain's segments before it, joined, oldest first, as
    ``load_chain`` returns it: the segment is compressed (``form``: a zstd frame at
    ``ZSTD_LEVEL`` or zlib level 6) against its last ``CONTEXT_BYTES``. A ``transient`` segment,
    one the next compacted segment replaces (kept for at most 15 boundaries), is not compressed:
    a deflate stream at level 0 (stored blocks, no dictionary, in every form), which every
    reader since the first segment form reads as it reads any deflate stream. Deflate level 1
    against the last 4 KB was, on PostgreSQL, a third of the kit's CPU in a boundary, where
    level 0 costs next to nothing (``bench/README.md``), and the server compresses a value
    over 2 KB itself
    (lz4 TOAST) before it reaches the WAL. What a run keeps is unchanged, the compacted
    segments; what is handed over grows (see bench/README.md). The header says how much
    context was used (none here), so a reader needs to know neither. ``form`` is what older
    releases can read (``SegmentForm``).
    """
    digest = b"" if previous is None else _digest_of(previous)
    array = b"[" + b",".join(messages) + b"]"
    level, dictionary = (0, b"") if transient else (6, context[-CONTEXT_BYTES:])
    if form is SegmentForm.ZSTD and not transient:
        return _binary_header(ZSTD_SEGMENT, digest, dictionary) + _zstd_compressed(
            array, dictionary
        ), array
    if form is SegmentForm.ZLIB_JSON:
        # ``Segment``'s JSON, as releases that read only this form wrote and validate it.
        body = b'{"previous":' + json.dumps(previous).encode() + b',"messages":' + array + b"}"
        header = COMPRESSED + (previous or "").encode() + b"\n" + b"%d\n" % len(dictionary)
        wbits = 15
    else:
        body = array
        header = _binary_header(SEGMENT, digest, dictionary)
        wbits = -15
    compressor = (
        zlib.compressobj(level, zlib.DEFLATED, wbits, zdict=dictionary)
        if dictionary
        else zlib.compressobj(level, zlib.DEFLATED, wbits)
    )
    return header + compressor.compress(body) + compressor.flush(), body


def _binary_header(form: bytes, digest: bytes, dictionary: bytes) -> bytes:
    """The header of ``SEGMENT`` and ``ZSTD_SEGMENT``: the form, the previous digest with its
    length, and the dictionary's length."""
    return form + bytes((len(digest),)) + digest + len(dictionary).to_bytes(2, "big")


def _zstd_compressed(body: bytes, dictionary: bytes) -> bytes:
    """A zstd frame of ``body`` against ``dictionary`` as raw content: with its size (so that it
    decompresses in one call), without a checksum or dictionary id (the handle proves the bytes,
    the header says what the dictionary is)."""
    parameters = zstandard.ZstdCompressionParameters.from_level(
        ZSTD_LEVEL,
        source_size=len(body),
        dict_size=len(dictionary),
        write_content_size=True,
        write_checksum=False,
        write_dict_id=False,
    )
    compressor = zstandard.ZstdCompressor(
        dict_data=_raw_dictionary(dictionary) if dictionary else None,
        compression_params=parameters,
    )
    return compressor.compress(body)


def _raw_dictionary(dictionary: bytes) -> zstandard.ZstdCompressionDict:
    return zstandard.ZstdCompressionDict(dictionary, dict_type=zstandard.DICT_TYPE_RAWCONTENT)


def _digest_of(handle: str) -> bytes:
    hexdigest = handle.removeprefix(HANDLE_PREFIX)
    if handle == hexdigest or len(hexdigest) != 2 * _DIGEST:
        raise ValueError(f"previous={handle!r} is not a handle: pass what handle_for returned")
    return bytes.fromhex(hexdigest)


@dataclass(frozen=True)
class _Header:
    """What a stored segment's header says, in whichever form it was written."""

    previous: str | None
    dictionary: int
    """How many bytes of the preceding transcript the stream was compressed against."""
    body_at: int
    """Where the compressed stream begins."""
    form: SegmentForm
    """How the stream is compressed: raw deflate, zlib with its wrapper, or a zstd frame."""


def _header(run_id: str, handle: str, stored: bytes) -> _Header | None:
    """The header of a compressed segment (None: the older form, JSON alone)."""
    try:
        form = (
            SegmentForm.DEFLATE
            if stored.startswith(SEGMENT)
            else SegmentForm.ZSTD
            if stored.startswith(ZSTD_SEGMENT)
            else None
        )
        if form is not None:
            at = len(SEGMENT) + 1
            length = stored[at - 1] if len(stored) >= at else -1
            if length not in (0, _DIGEST) or len(stored) < at + length + 2:
                raise ValueError("its header is cut short or names no digest")
            previous = HANDLE_PREFIX + stored[at : at + length].hex() if length else None
            at += length
            used = int.from_bytes(stored[at : at + 2], "big")
            return _Header(previous, used, at + 2, form)
        if stored.startswith(COMPRESSED):
            previous_text, length_text, _ = stored[len(COMPRESSED) :].split(b"\n", 2)
            at = len(COMPRESSED) + len(previous_text) + len(length_text) + 2
            return _Header(
                previous_text.decode() or None, int(length_text), at, SegmentForm.ZLIB_JSON
            )
    except (ValueError, UnicodeDecodeError) as exc:
        raise HistoryUnavailableError(
            run_id=run_id, handle=handle, why=f"a segment is unreadable ({exc})"
        ) from exc
    return None


def header_length(stored: bytes) -> int:
    """How many bytes of a stored segment come before its compressed stream (0 for JSON)."""
    header = _header("", "", stored)
    return 0 if header is None else header.body_at


def previous_of(run_id: str, handle: str, stored: bytes) -> str | None:
    """The handle a stored segment names as its previous one, read from its header (or, in the
    oldest form, its JSON)."""
    return _Link.of(run_id, handle, stored).previous


def _parsed(run_id: str, handle: str, body: bytes) -> Segment:
    try:
        return Segment.model_validate_json(body)
    except ValidationError as exc:
        raise HistoryUnavailableError(
            run_id=run_id, handle=handle, why=f"a segment is unreadable ({exc})"
        ) from exc


_MESSAGES: TypeAdapter[tuple[Message, ...]] = TypeAdapter(tuple[Message, ...])


@dataclass(frozen=True)
class _Link:
    """One stored segment of a chain, its header read once: the walk from the head needs it to
    find the previous segment, the decoding to find the stream and its dictionary."""

    handle: str
    stored: bytes
    previous: str | None
    header: _Header | None
    """None: the oldest form, JSON alone, parsed already (``parsed``) to find the previous."""
    parsed: Segment | None

    @classmethod
    def of(cls, run_id: str, handle: str, stored: bytes) -> _Link:
        header = _header(run_id, handle, stored)
        if header is not None:
            return cls(handle, stored, header.previous, header, None)
        parsed = _parsed(run_id, handle, stored)
        return cls(handle, stored, parsed.previous, None, parsed)


def decode_segment(
    run_id: str, handle: str, stored: bytes, context: bytes = b""
) -> tuple[Segment, bytes]:
    """A stored segment and its JSON, decompressed against the chain's preceding ``context``
    (as ``load_chain`` returns it for the chain up to the segment's previous one)."""
    link = _Link.of(run_id, handle, stored)
    messages, body = _decoded_link(run_id, link, context)
    # Both fields are validated already: the previous handle from its digest or JSON, the
    # messages by ``_decoded_link``.
    return Segment.model_construct(previous=link.previous, messages=messages), body


def _decoded_link(run_id: str, link: _Link, context: bytes) -> tuple[tuple[Message, ...], bytes]:
    """The messages of one segment of a chain and its JSON, decompressed against ``context``.
    Its previous handle is the one the walk followed; ``ZLIB_JSON`` names it again in its body,
    and a body naming another is refused here."""
    if link.parsed is not None:
        return link.parsed.messages, link.stored
    assert link.header is not None  # a link has one or the other
    body = _inflated(run_id, link.handle, link.stored, link.header, context)
    if link.header.form is SegmentForm.ZLIB_JSON:
        segment = _parsed(run_id, link.handle, body)
        if segment.previous != link.header.previous:
            raise HistoryUnavailableError(
                run_id=run_id, handle=link.handle, why="its header and its body name other chains"
            )
        return segment.messages, body
    try:
        return _MESSAGES.validate_json(body), body
    except ValidationError as exc:
        raise HistoryUnavailableError(
            run_id=run_id, handle=link.handle, why=f"a segment is unreadable ({exc})"
        ) from exc


def _inflated(run_id: str, handle: str, stored: bytes, header: _Header, context: bytes) -> bytes:
    try:
        used = header.dictionary
        if used > len(context):
            raise ValueError(f"it was compressed against {used} bytes, {len(context)} precede")
        dictionary = context[-used:] if used else b""
        stream = memoryview(stored)[header.body_at :]
        if header.form is SegmentForm.ZSTD:
            decompressor = zstandard.ZstdDecompressor(
                dict_data=_raw_dictionary(dictionary) if used else None
            )
            return decompressor.decompress(stream, allow_extra_data=False)
        wbits = 15 if header.form is SegmentForm.ZLIB_JSON else -15
        inflate = zlib.decompressobj(wbits, zdict=dictionary) if used else zlib.decompressobj(wbits)
        body = inflate.decompress(stream) + inflate.flush()
        if not inflate.eof or inflate.unused_data:
            raise ValueError("its compressed stream is cut short or followed by other bytes")
    except (ValueError, zlib.error, zstandard.ZstdError) as exc:
        raise HistoryUnavailableError(
            run_id=run_id, handle=handle, why=f"a segment is unreadable ({exc})"
        ) from exc
    return body


@dataclass(frozen=True)
class ChainPoint:
    """A point of a chain a writer compacts after: the segment's handle (None: the chain's
    start), how many messages the chain holds up to it, and the last ``CONTEXT_BYTES`` of their
    JSON."""

    handle: str | None = None
    length: int = 0
    context: bytes = b""


@dataclass(frozen=True)
class ChainRead:
    """A chain read back: its messages, oldest first, the context the next segment is compressed
    against (see ``encode_segment``), and where a writer that takes it up compacts from."""

    messages: tuple[Message, ...]
    context: bytes
    compacted: ChainPoint
    """The last segment compressed against a dictionary, or a zstd frame; else the chain's
    start."""
    uncompacted: tuple[str, ...] = ()
    """The segments after ``compacted``, oldest first, compressed against no dictionary: the
    transient ones (stored as they are) a former writer had not compacted yet, and, in the
    ``DEFLATE`` and ``ZLIB_JSON`` forms, any segment compressed from the chain's start, which
    has no dictionary either (compacting it again costs only CPU)."""
    uncompacted_bytes: int = 0
    """Their messages' JSON, in bytes."""


async def load_chain(
    store: HistoryStore,
    tenant: str,
    run_id: str,
    handle: str,
    listed: Mapping[str, bytes] | None = None,
) -> tuple[tuple[Message, ...], bytes]:
    """Every message of the chain ending at ``handle``, oldest first, and the context the next
    segment is compressed against (see ``read_chain``)."""
    read = await read_chain(store, tenant, run_id, handle, listed)
    return read.messages, read.context


async def read_chain(
    store: HistoryStore,
    tenant: str,
    run_id: str,
    handle: str,
    listed: Mapping[str, bytes] | None = None,
    *,
    pause_collector: bool = False,
) -> ChainRead:
    """The chain ending at ``handle``: from ``listed`` (the run's segments as stored, already
    read), else in one round trip from a ``SegmentLister``, else one ``fetch`` per segment.

    ``pause_collector``: the caller's choice to have Python's cyclic garbage collector off while
    the chain is decoded (``collector_paused``); off by default, the collector is left alone."""
    if listed is None and isinstance(store, SegmentLister):
        listed = await store.fetch_all(tenant, run_id)
    chain: list[_Link] = []
    cursor: str | None = handle
    seen: set[str] = set()
    while cursor is not None:
        if cursor in seen:
            raise HistoryUnavailableError(
                run_id=run_id, handle=handle, why="its segments form a cycle"
            )
        seen.add(cursor)
        stored = (
            await store.fetch(tenant, run_id, cursor)
            if listed is None
            else verified(run_id, cursor, listed.get(cursor))
        )
        chain.append(_Link.of(run_id, cursor, stored))
        cursor = chain[-1].previous
    if not pause_collector:
        return _decoded(run_id, chain)
    with collector_paused():
        return _decoded(run_id, chain)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the block, then as it was (on again unless the
    caller had it off), also when the block raises.

    The collector is process-wide: off here, it is off for every thread of the process, which
    is why a library never does this on its own (``read_chain`` only when asked). Why an
    application may ask: decoding a transcript makes about ten tracked objects a message (the
    models, their ``__dict__`` and fields-set, the tuples of parts and calls, the arguments),
    none of them garbage, and the collector, run every 700 new ones, traverses them again and
    again while they are young; paused, the first collection after traverses them once. At 200
    turns that is about a fifth of the decoding's CPU (``bench/README.md``, ``boundaries``).
    Nothing in the block awaits, so no other coroutine runs while it is off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _decoded(run_id: str, chain: Sequence[_Link]) -> ChainRead:
    """``chain`` (newest segment first, each verified and linked to the next by its
    ``previous``) read back."""
    messages: list[Message] = []
    context = b""
    compacted = ChainPoint()
    uncompacted: list[str] = []
    uncompacted_bytes = 0
    for link in reversed(chain):
        segment_messages, body = _decoded_link(run_id, link, context)
        messages.extend(segment_messages)
        context = (
            body[-CONTEXT_BYTES:]
            if len(body) >= CONTEXT_BYTES
            else (context[len(body) - CONTEXT_BYTES :] + body)
        )
        header = link.header
        if header is not None and header.form is not SegmentForm.ZSTD and not header.dictionary:
            uncompacted.append(link.handle)
            uncompacted_bytes += len(body)
        else:
            compacted = ChainPoint(link.handle, len(messages), context)
            uncompacted, uncompacted_bytes = [], 0
    return ChainRead(tuple(messages), context, compacted, tuple(uncompacted), uncompacted_bytes)


async def load_transcript(
    store: HistoryStore, tenant: str, run_id: str, handle: str
) -> tuple[Message, ...]:
    """Every message of the chain ending at ``handle``, oldest first (see ``load_chain``)."""
    messages, _ = await load_chain(store, tenant, run_id, handle)
    return messages
