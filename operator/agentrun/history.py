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

A segment is stored compressed, by the client, with zlib: a segment holds a turn or two (a few
KB), too little for any compressor alone, so each is compressed with the chain's preceding 32 KB
(zlib's whole window) as its preset dictionary, and a 200-turn transcript is stored in about 1.3x
what zlib makes of it whole, under the lz4 a PostgreSQL server applies to it in one value, where
segments compressed alone came to 2x that. zlib because it is in the standard library, has preset
dictionaries, and makes the same bytes wherever the same zlib runs (zstd does better, but is a
dependency of its own before Python 3.14). The segment's header, before the compressed body,
names the previous segment (so the chain is walked without decompressing) and how much of the
preceding transcript was the dictionary (none for the first, or for a writer that knows none).
The handle is the digest of the bytes stored, so it still proves a fetch; a segment in the older
form (its JSON alone) is read as before.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from pydantic import Field, ValidationError

from agentrun._base import FrozenModel
from agentrun.errors import HistoryUnavailableError
from agentrun.messages import Message

HANDLE_PREFIX = "sha256:"
COMPRESSED = b"agentrun-segment/zlib\n"
"""How a compressed segment begins; then the previous handle (empty for none), a newline, the
dictionary's length in decimal, a newline, and the zlib stream of the segment's JSON."""
CONTEXT_BYTES = 32 * 1024
"""How much of the preceding transcript a segment is compressed against: zlib's window, past
which a preset dictionary is never used."""


class HistoryStore(Protocol):
    """Stores segments by content. Implementations call ``handle_for`` and ``verified``."""

    async def put(self, tenant: str, run_id: str, segment: bytes, *, fence: int) -> str:
        """Store ``segment`` and return its handle; refuse a fence below the run's highest."""

    async def fetch(self, tenant: str, run_id: str, handle: str) -> bytes:
        """Return the segment's bytes, verified against the handle."""

    async def forget(self, tenant: str, run_id: str) -> None:
        """Drop every segment of the run."""


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


def verified(run_id: str, handle: str, segment: bytes | None) -> bytes:
    """The segment, if it is present and is the one ``handle`` names."""
    if segment is None:
        raise HistoryUnavailableError(run_id, handle, "no segment is stored under it")
    if handle_for(segment) != handle:
        raise HistoryUnavailableError(run_id, handle, "the stored bytes do not match the handle")
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
    stored, _ = encode_segment(previous, messages)
    return await store.put(tenant, run_id, stored, fence=fence)


def encode_segment(
    previous: str | None, messages: Sequence[Message], context: bytes = b""
) -> tuple[bytes, bytes]:
    """The bytes to store for the segment holding ``messages`` after ``previous`` (its handle is
    their digest, ``handle_for``, known before it is stored), and the segment's JSON.

    ``context`` is the JSON of the chain's segments before it, joined, oldest first, as
    ``load_chain`` returns it: the segment is compressed against its last ``CONTEXT_BYTES``.
    """
    body = Segment(previous=previous, messages=tuple(messages)).model_dump_json().encode()
    dictionary = context[-CONTEXT_BYTES:]
    compressor = zlib.compressobj(6, zdict=dictionary) if dictionary else zlib.compressobj(6)
    header = COMPRESSED + (previous or "").encode() + b"\n" + str(len(dictionary)).encode() + b"\n"
    return header + compressor.compress(body) + compressor.flush(), body


def previous_of(run_id: str, handle: str, stored: bytes) -> str | None:
    """The handle a stored segment names as its previous one, read from its header (or, in the
    older form, its JSON)."""
    if stored.startswith(COMPRESSED):
        previous = stored[len(COMPRESSED) :].split(b"\n", 1)[0]
        return previous.decode() or None
    return _parsed(run_id, handle, stored).previous


def _parsed(run_id: str, handle: str, body: bytes) -> Segment:
    try:
        return Segment.model_validate_json(body)
    except ValidationError as exc:
        raise HistoryUnavailableError(run_id, handle, f"a segment is unreadable ({exc})") from exc


def decode_segment(
    run_id: str, handle: str, stored: bytes, context: bytes = b""
) -> tuple[Segment, bytes]:
    """A stored segment and its JSON, decompressed against the chain's preceding ``context``
    (as ``load_chain`` returns it for the chain up to the segment's previous one)."""
    body = _body(run_id, handle, stored, context)
    return _parsed(run_id, handle, body), body


def _body(run_id: str, handle: str, stored: bytes, context: bytes) -> bytes:
    if not stored.startswith(COMPRESSED):
        return stored
    try:
        _, length, compressed = stored[len(COMPRESSED) :].split(b"\n", 2)
        used = int(length)
        dictionary = context[-used:] if used else b""
        if len(dictionary) != used:
            raise ValueError(f"it was compressed against {used} bytes, {len(dictionary)} precede")
        inflate = zlib.decompressobj(zdict=dictionary) if used else zlib.decompressobj()
        body = inflate.decompress(compressed) + inflate.flush()
    except (ValueError, zlib.error) as exc:
        raise HistoryUnavailableError(run_id, handle, f"a segment is unreadable ({exc})") from exc
    return body


async def load_chain(
    store: HistoryStore,
    tenant: str,
    run_id: str,
    handle: str,
    listed: Mapping[str, bytes] | None = None,
) -> tuple[tuple[Message, ...], bytes]:
    """Every message of the chain ending at ``handle``, oldest first, and the context the next
    segment is compressed against (see ``encode_segment``): from ``listed`` (the run's segments
    as stored, already read), else in one round trip from a ``SegmentLister``, else one
    ``fetch`` per segment."""
    if listed is None and isinstance(store, SegmentLister):
        listed = await store.fetch_all(tenant, run_id)
    chain: list[tuple[str, bytes]] = []
    cursor: str | None = handle
    seen: set[str] = set()
    while cursor is not None:
        if cursor in seen:
            raise HistoryUnavailableError(run_id, handle, "its segments form a cycle")
        seen.add(cursor)
        stored = (
            await store.fetch(tenant, run_id, cursor)
            if listed is None
            else verified(run_id, cursor, listed.get(cursor))
        )
        chain.append((cursor, stored))
        cursor = previous_of(run_id, cursor, stored)
    messages: list[Message] = []
    context = b""
    previous: str | None = None
    for at, stored in reversed(chain):
        segment, body = decode_segment(run_id, at, stored, context)
        if segment.previous != previous:
            raise HistoryUnavailableError(run_id, at, "its header and its body name other chains")
        messages.extend(segment.messages)
        context = (context + body)[-CONTEXT_BYTES:]
        previous = at
    return tuple(messages), context


async def load_transcript(
    store: HistoryStore, tenant: str, run_id: str, handle: str
) -> tuple[Message, ...]:
    """Every message of the chain ending at ``handle``, oldest first (see ``load_chain``)."""
    messages, _ = await load_chain(store, tenant, run_id, handle)
    return messages
