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
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from pydantic import Field, ValidationError

from agentrun._base import FrozenModel
from agentrun.errors import HistoryUnavailableError
from agentrun.messages import Message

HANDLE_PREFIX = "sha256:"


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
    return await store.put(tenant, run_id, encode_segment(previous, messages), fence=fence)


def encode_segment(previous: str | None, messages: Sequence[Message]) -> bytes:
    """The bytes of the segment holding ``messages`` after ``previous``; its handle is their
    digest (``handle_for``), known before it is stored."""
    return Segment(previous=previous, messages=tuple(messages)).model_dump_json().encode()


async def load_transcript(
    store: HistoryStore, tenant: str, run_id: str, handle: str
) -> tuple[Message, ...]:
    """Every message of the chain ending at ``handle``, oldest first: in one round trip from a
    ``SegmentLister``, else one ``fetch`` per segment."""
    listed = await store.fetch_all(tenant, run_id) if isinstance(store, SegmentLister) else None
    chunks: list[tuple[Message, ...]] = []
    cursor: str | None = handle
    seen: set[str] = set()
    while cursor is not None:
        if cursor in seen:
            raise HistoryUnavailableError(run_id, handle, "its segments form a cycle")
        seen.add(cursor)
        raw = (
            await store.fetch(tenant, run_id, cursor)
            if listed is None
            else verified(run_id, cursor, listed.get(cursor))
        )
        try:
            segment = Segment.model_validate_json(raw)
        except ValidationError as exc:
            raise HistoryUnavailableError(
                run_id, cursor, f"a segment is unreadable ({exc})"
            ) from exc
        chunks.append(segment.messages)
        cursor = segment.previous
    return tuple(message for chunk in reversed(chunks) for message in chunk)
