"""Resumer: the lease before the frontier, and the lease back on every path that does not hand it
over."""

from __future__ import annotations

import json

import pytest

from agentrun._checkpointing import Checkpointer
from agentrun._errors import (
    CheckpointFormatError,
    HistoryUnavailableError,
    NothingCheckpointedError,
    RunLeaseError,
)
from agentrun._frontier import CHECKPOINT_FORMAT, encode
from agentrun._idempotency import marker_key
from agentrun._leases import LeasePolicy
from agentrun._resume import Resumer, plan_resume
from agentrun.stores._memory import MemoryBackend
from tests.kit.stores import CountingCheckpointStore
from tests.support.frontiers import RUN, TENANT, conversation, frontier, pending


def resumer_for(
    backend: MemoryBackend, store: CountingCheckpointStore | None = None, *, history: bool = True
) -> Resumer:
    checkpoints = Checkpointer(
        store or backend.checkpoints, history=backend.history if history else None
    )
    return Resumer(
        checkpoints=checkpoints,
        leases=backend.leases,
        idempotency=backend.idempotency,
        history=backend.history if history else None,
        policy=LeasePolicy(ttl=30, renew_within=10),
    )


async def written(backend: MemoryBackend, **fields: object) -> None:
    checkpointer = Checkpointer(backend.checkpoints, history=backend.history)
    assert await checkpointer.write(frontier(**fields)) is not None, checkpointer.last_error


async def assert_free(backend: MemoryBackend) -> None:
    """Nobody holds the run, and another worker takes it at once."""
    assert await backend.leases.held(TENANT, RUN) is None
    taken = await backend.leases.acquire(TENANT, RUN, "someone-else", ttl=30)
    assert taken.holder == "someone-else"


async def test_resume_hands_over_checkpoint_messages_plan_and_lease(
    backend: MemoryBackend,
) -> None:
    unknown = pending("c1", name="send_email")
    await written(backend, messages=conversation(3), pending=(unknown,), iteration=4)
    await backend.idempotency.begin(TENANT, RUN, marker_key("c1"), holder="gone", fence=0)

    carried = await resumer_for(backend).resume(RUN, tenant=TENANT, holder="w1")
    assert carried.checkpoint.iteration == 4
    assert carried.checkpoint.history_handle is not None
    assert carried.messages == conversation(3)
    assert carried.plan == await plan_resume(
        carried.checkpoint, backend.idempotency, carried.messages
    )
    assert carried.plan.indeterminate == (unknown,)
    assert (carried.lease.holder, carried.lease.tenant, carried.lease.run_id) == ("w1", TENANT, RUN)
    held = await backend.leases.held(TENANT, RUN)
    assert held is not None  # handed over, not released
    assert (held.holder, held.fence) == ("w1", carried.lease.fence)


async def test_the_fence_rises_on_every_acquisition(backend: MemoryBackend) -> None:
    await written(backend)
    resumer = resumer_for(backend)
    fences = []
    for worker in ("w1", "w2", "w3"):
        carried = await resumer.resume(RUN, tenant=TENANT, holder=worker)
        fences.append(carried.lease.fence)
        await backend.leases.release(carried.lease)
    assert fences == sorted(set(fences))
    assert fences[0] >= 1


async def test_the_loser_gets_the_lease_error_and_never_reads(backend: MemoryBackend) -> None:
    await written(backend)
    store = CountingCheckpointStore(backend.checkpoints)
    resumer = resumer_for(backend, store)
    winner = await resumer.resume(RUN, tenant=TENANT, holder="w1")
    reads = store.reads
    assert reads >= 1
    with pytest.raises(RunLeaseError) as caught:
        await resumer.resume(RUN, tenant=TENANT, holder="w2")
    assert store.reads == reads
    assert caught.value.holder == "w1"
    assert caught.value.fence == winner.lease.fence
    assert caught.value.requested_by == "w2"
    assert "'w1'" in str(caught.value)
    held = await backend.leases.held(TENANT, RUN)
    assert held is not None
    assert held.holder == "w1"  # the loser did not disturb the winner's lease


async def test_nothing_checkpointed_releases_the_lease(backend: MemoryBackend) -> None:
    with pytest.raises(NothingCheckpointedError) as caught:
        await resumer_for(backend).resume(RUN, tenant=TENANT, holder="w1")
    assert (caught.value.run_id, caught.value.tenant) == (RUN, TENANT)
    await assert_free(backend)


async def test_a_newer_format_releases_the_lease_and_leaves_the_payload(
    backend: MemoryBackend,
) -> None:
    raw = json.loads(encode(frontier()))
    raw["format_version"] = CHECKPOINT_FORMAT + 1
    raw["only_in_the_future"] = True
    payload = json.dumps(raw).encode()
    await backend.checkpoints.put(TENANT, RUN, payload, fence=0)
    with pytest.raises(CheckpointFormatError):
        await resumer_for(backend).resume(RUN, tenant=TENANT, holder="w1")
    assert await backend.checkpoints.latest(TENANT, RUN) == payload
    await assert_free(backend)


async def test_an_unreadable_payload_releases_the_lease(backend: MemoryBackend) -> None:
    await backend.checkpoints.put(TENANT, RUN, b"\x00\x01 not a checkpoint", fence=0)
    with pytest.raises(CheckpointFormatError):
        await resumer_for(backend).resume(RUN, tenant=TENANT, holder="w1")
    await assert_free(backend)


async def test_an_evicted_history_releases_the_lease(backend: MemoryBackend) -> None:
    await written(backend, messages=conversation(2))
    await backend.history.forget(TENANT, RUN)
    with pytest.raises(HistoryUnavailableError):
        await resumer_for(backend).resume(RUN, tenant=TENANT, holder="w1")
    await assert_free(backend)


async def test_a_handle_with_no_history_store_releases_the_lease(backend: MemoryBackend) -> None:
    await written(backend, messages=conversation(2))
    with pytest.raises(HistoryUnavailableError):
        await resumer_for(backend, history=False).resume(RUN, tenant=TENANT, holder="w1")
    await assert_free(backend)


async def test_an_inline_frontier_resumes_without_a_history_store(
    backend: MemoryBackend,
) -> None:
    checkpointer = Checkpointer(backend.checkpoints)
    await checkpointer.write(frontier(messages=conversation(2)))
    carried = await resumer_for(backend, history=False).resume(RUN, tenant=TENANT, holder="w1")
    assert carried.messages == conversation(2)
    assert carried.checkpoint.history_handle is None


async def test_the_lease_fence_outranks_the_frontier_writer(backend: MemoryBackend) -> None:
    first = await backend.leases.acquire(TENANT, RUN, "w0", ttl=30)
    await written(backend, fence=first.fence, messages=conversation(1))
    await backend.leases.release(first)
    carried = await resumer_for(backend).resume(RUN, tenant=TENANT, holder="w1")
    assert carried.lease.fence > carried.checkpoint.fence == first.fence
