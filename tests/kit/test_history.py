"""History: content-addressed segments, verified on fetch, chained oldest to newest."""

from __future__ import annotations

import hashlib

import pytest

from agentrun.errors import HistoryUnavailableError, StaleFenceError
from agentrun.history import (
    HANDLE_PREFIX,
    Segment,
    append_transcript,
    handle_for,
    load_transcript,
    verified,
)
from agentrun.stores.memory import MemoryBackend
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
