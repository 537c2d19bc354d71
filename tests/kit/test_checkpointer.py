"""The write side: boundaries, masking before sizing, a cap that refuses, a run that never fails,
fencing that does, and the transcript out of line in segments that grow with it."""

from __future__ import annotations

import gc
import json
import zlib
from collections.abc import Callable, Mapping

import pytest
from pydantic_core import PydanticSerializationError

from agentrun._checkpointing import (
    COMPACT_AFTER,
    DEFAULT_MAX_BYTES,
    MERGE_AFTER,
    SEGMENT_BYTES,
    Checkpointer,
    CheckpointPolicy,
)
from agentrun._errors import (
    CheckpointEncodingError,
    CheckpointTooLargeError,
    HistoryUnavailableError,
    StaleFenceError,
)
from agentrun._frontier import (
    Boundary,
    Checkpoint,
    decode,
    encode,
    encode_message,
    encode_spliced,
)
from agentrun._history import (
    COMPRESSED,
    SEGMENT,
    ZSTD_SEGMENT,
    Segment,
    SegmentForm,
    decode_segment,
    handle_for,
    load_chain,
    previous_of,
)
from agentrun._messages import Message
from agentrun._redaction import Redactor
from agentrun.stores._memory import MemoryBackend, MemoryHistoryStore
from tests.kit.secrets_corpus import SECRETS
from tests.kit.stores import (
    CountingCheckpointStore,
    FailingCheckpointStore,
    RecordingHistoryStore,
    unavailable,
)
from tests.support.chain_faults import RecordingCommits
from tests.support.collector import collections_started
from tests.support.frontiers import (
    APPROVAL,
    RUN,
    TENANT,
    conversation,
    frontier,
    pending,
    resolved,
)


def test_the_default_policy_writes_at_all_three_boundaries_under_one_mib() -> None:
    policy = CheckpointPolicy()
    assert policy.boundaries == frozenset(Boundary)
    assert policy.max_bytes == DEFAULT_MAX_BYTES == 1024 * 1024


async def test_the_default_writes_at_every_boundary(backend: MemoryBackend) -> None:
    store = CountingCheckpointStore(backend.checkpoints)
    checkpointer = Checkpointer(store)
    for iteration, boundary in enumerate(Boundary):
        receipt = await checkpointer.write(
            frontier(
                boundary=boundary,
                iteration=iteration,
                approval=APPROVAL if boundary is Boundary.BEFORE_APPROVAL else None,
            )
        )
        assert receipt is not None
        assert (receipt.boundary, receipt.iteration) == (boundary, iteration)
    assert [decode(p).boundary for p in store.puts] == list(Boundary)


@pytest.mark.parametrize("only", list(Boundary))
async def test_writes_only_at_the_policy_boundaries(backend: MemoryBackend, only: Boundary) -> None:
    store = CountingCheckpointStore(backend.checkpoints)
    checkpointer = Checkpointer(store, CheckpointPolicy(boundaries=frozenset({only})))
    for boundary in Boundary:
        approval = APPROVAL if boundary is Boundary.BEFORE_APPROVAL else None
        written = await checkpointer.write(frontier(boundary=boundary, approval=approval))
        assert (written is not None) is (boundary is only)
        assert checkpointer.writes_at(boundary) is (boundary is only)
    assert [decode(p).boundary for p in store.puts] == [only]


async def test_the_receipt_sizes_the_exact_bytes_stored(backend: MemoryBackend) -> None:
    checkpointer = Checkpointer(backend.checkpoints)
    receipt = await checkpointer.write(frontier(messages=conversation(5)))
    stored = await backend.checkpoints.latest(TENANT, RUN)
    assert receipt is not None
    assert stored is not None
    assert receipt.size == len(stored)
    assert checkpointer.last_write == receipt


async def test_masking_happens_before_sizing(backend: MemoryBackend) -> None:
    pem = next(entry for entry in SECRETS if entry.kind == "pem-rsa")
    secret_text = "\n".join([pem.text] * 20)  # many KiB of key, masked to a few bytes
    checkpoint = frontier(messages=(Message.of("user", secret_text),))
    measured = Checkpointer(MemoryBackend().checkpoints)
    probe = await measured.write(checkpoint)
    assert probe is not None
    cap = probe.size + 64  # room for a timestamp that serialises a few bytes longer
    assert len(encode(checkpoint)) > cap + 1000  # unmasked, it is well over the cap

    checkpointer = Checkpointer(backend.checkpoints, CheckpointPolicy(max_bytes=cap))
    receipt = await checkpointer.write(checkpoint)
    assert receipt is not None, checkpointer.last_error
    assert checkpointer.last_error is None
    stored = await backend.checkpoints.latest(TENANT, RUN)
    assert stored is not None
    assert len(stored) <= cap
    assert pem.secret not in decode(stored).messages[0].text


async def test_over_the_cap_is_refused_not_truncated(backend: MemoryBackend) -> None:
    store = CountingCheckpointStore(backend.checkpoints)
    checkpointer = Checkpointer(store, CheckpointPolicy(max_bytes=4096))
    small = frontier(messages=conversation(2), iteration=1)
    assert await checkpointer.write(small) is not None
    before = await backend.checkpoints.latest(TENANT, RUN)

    big = frontier(messages=conversation(200), iteration=2)
    assert await checkpointer.write(big) is None  # does not raise
    error = checkpointer.last_error
    assert isinstance(error, CheckpointTooLargeError)
    assert error.run_id == RUN
    assert error.limit == 4096
    assert error.size > 4096
    assert len(store.puts) == 1  # the store was never asked
    assert await backend.checkpoints.latest(TENANT, RUN) == before
    assert checkpointer.last_write is not None
    assert checkpointer.last_write.iteration == 1


async def test_the_cap_is_inclusive_to_the_byte(backend: MemoryBackend) -> None:
    checkpoint = frontier(messages=conversation(3))
    probe = await Checkpointer(MemoryBackend().checkpoints).write(checkpoint)
    assert probe is not None
    # written_at is stamped at each write; its length only changes on a whole second (1 in 1e6)
    exact = Checkpointer(backend.checkpoints, CheckpointPolicy(max_bytes=probe.size))
    assert await exact.write(checkpoint) is not None, exact.last_error
    short = Checkpointer(backend.checkpoints, CheckpointPolicy(max_bytes=probe.size - 1))
    assert await short.write(checkpoint) is None
    assert isinstance(short.last_error, CheckpointTooLargeError)
    assert short.last_error.size == probe.size


async def test_a_skipped_boundary_keeps_the_error_and_a_success_clears_it(
    backend: MemoryBackend,
) -> None:
    policy = CheckpointPolicy(boundaries=frozenset({Boundary.AFTER_TOOL_RESULT}), max_bytes=2048)
    checkpointer = Checkpointer(backend.checkpoints, policy)
    await checkpointer.write(frontier(messages=conversation(100)))
    error = checkpointer.last_error
    assert isinstance(error, CheckpointTooLargeError)

    assert await checkpointer.write(frontier(boundary=Boundary.AFTER_MODEL_CALL)) is None
    assert checkpointer.last_error is error

    assert await checkpointer.write(frontier(messages=conversation(1))) is not None
    assert checkpointer.last_error is None


@pytest.mark.parametrize(
    "error",
    [
        unavailable("write the checkpoint"),
        ConnectionResetError("reset by peer"),
        RuntimeError("driver bug"),
    ],
    ids=["unavailable", "raw-os-error", "runtime-error"],
)
async def test_a_failing_store_never_fails_the_run(error: Exception) -> None:
    store = FailingCheckpointStore(error)
    checkpointer = Checkpointer(store)
    assert await checkpointer.write(frontier()) is None
    assert store.attempts == 1
    assert checkpointer.last_error is error
    assert checkpointer.last_write is None


UNENCODABLE = Message.tool_result("c1", "a lone surrogate \ud800 from a JSON escape")
"""Text ``json.loads`` gives for ``"\\ud800"`` (a model's or a tool's JSON may hold it), and
that neither masking nor encoding to UTF-8 can take."""


@pytest.mark.parametrize("redact", [True, False], ids=["masked", "unmasked"])
@pytest.mark.parametrize("out_of_line", [False, True], ids=["inline", "out-of-line"])
async def test_a_frontier_that_cannot_be_masked_or_encoded_is_raised_not_kept_as_an_outage(
    backend: MemoryBackend, redact: bool, out_of_line: bool
) -> None:
    """Masking and encoding ask no store: a failure there is a bug or bad data, never an
    outage. It surfaces (the same data would fail every boundary after), not retryable, with
    its cause; no store is asked, and ``last_error`` keeps saying what it said of the stores."""
    store = CountingCheckpointStore(backend.checkpoints)
    history = RecordingHistoryStore(backend.history) if out_of_line else None
    checkpointer = Checkpointer(store, redact=redact, history=history)
    checkpoint = frontier(messages=(*conversation(1), UNENCODABLE))
    with pytest.raises(CheckpointEncodingError, match="could not be masked and encoded") as raised:
        await checkpointer.write(checkpoint)
    assert isinstance(raised.value.__cause__, UnicodeEncodeError | PydanticSerializationError)
    assert not raised.value.retryable
    assert raised.value.run_id == RUN
    assert checkpointer.last_error is None
    assert store.puts == []
    assert history is None or history.segments == []


async def test_a_stale_fence_propagates(backend: MemoryBackend) -> None:
    first = await backend.leases.acquire(TENANT, RUN, "w1", ttl=30)
    checkpointer = Checkpointer(backend.checkpoints)
    assert await checkpointer.write(frontier(fence=first.fence)) is not None
    await backend.leases.release(first)
    second = await backend.leases.acquire(TENANT, RUN, "w2", ttl=30)
    assert await checkpointer.write(frontier(fence=second.fence, iteration=5)) is not None
    with pytest.raises(StaleFenceError) as caught:
        await checkpointer.write(frontier(fence=first.fence, iteration=9))
    assert (caught.value.fence, caught.value.current) == (first.fence, second.fence)
    latest = await checkpointer.latest(TENANT, RUN)
    assert latest is not None
    assert latest.iteration == 5


async def test_a_stale_fence_from_the_history_store_propagates(backend: MemoryBackend) -> None:
    lease = await backend.leases.acquire(TENANT, RUN, "w1", ttl=30)
    checkpointer = Checkpointer(backend.checkpoints, history=backend.history)
    with pytest.raises(StaleFenceError):
        await checkpointer.write(frontier(fence=lease.fence - 1, messages=conversation(1)))


async def test_latest_reads_the_frontier_or_none(backend: MemoryBackend) -> None:
    checkpointer = Checkpointer(backend.checkpoints)
    assert await checkpointer.latest(TENANT, RUN) is None
    await checkpointer.write(frontier(iteration=3, messages=conversation(1)))
    latest = await checkpointer.latest(TENANT, RUN)
    assert latest is not None
    assert (latest.iteration, latest.messages) == (3, conversation(1))


async def _newest_segment(history: RecordingHistoryStore, head: str) -> Segment:
    """The chain's newest segment, decompressed against the chain before it."""
    stored = history.segments[-1]
    assert handle_for(stored) == head
    previous = previous_of(RUN, head, stored)
    context = b"" if previous is None else (await load_chain(history, TENANT, RUN, previous))[1]
    return decode_segment(RUN, head, stored, context)[0]


async def test_the_history_goes_out_of_line_and_grows_linearly(backend: MemoryBackend) -> None:
    history = RecordingHistoryStore(backend.history)
    store = CountingCheckpointStore(backend.checkpoints)
    checkpointer = Checkpointer(store, history=history)
    messages: tuple[Message, ...] = ()
    for turn in range(50):
        messages += conversation(1, start=turn)
        receipt = await checkpointer.write(frontier(messages=messages, iteration=turn))
        assert receipt is not None, checkpointer.last_error
        stored = decode(store.puts[-1])
        assert stored.messages == ()
        assert stored.history_handle is not None
        assert stored.history_length == len(messages)
        # this write appended only the turn's two messages
        assert (await _newest_segment(history, stored.history_handle)).messages == messages[-2:]

    transcript = len(Segment(messages=messages).model_dump_json())
    appended = sum(len(segment) for segment in history.segments)
    assert len(history.segments) == 50
    # compressed against the chain before it, each segment costs less than its messages' JSON
    assert appended < transcript, (appended, transcript)
    # the frontier itself stays the same size however long the conversation gets
    assert len(store.puts[-1]) - len(store.puts[0]) < 16

    fresh = Checkpointer(backend.checkpoints, history=backend.history)
    latest = await fresh.latest(TENANT, RUN)
    assert latest is not None
    assert await fresh.transcript(latest) == messages


@pytest.mark.parametrize("paused", [False, True], ids=["default", "pause_collector"])
async def test_a_resume_pauses_the_collector_only_when_the_checkpointer_is_told_to(
    backend: MemoryBackend, paused: bool
) -> None:
    """Off by default: the kit leaves the collector as its caller has it. The collections are
    counted while the transcript is read back with the collector run at nearly every allocation;
    paused, the decoding (about ten new objects a message) makes none of them."""
    writer = Checkpointer(backend.checkpoints, history=backend.history)
    messages = conversation(100)
    assert await writer.write(frontier(messages=messages)) is not None
    reader = Checkpointer(backend.checkpoints, history=backend.history, pause_collector=paused)
    latest = await reader.latest(TENANT, RUN)
    assert latest is not None
    with collections_started() as collections:
        assert await reader.transcript(latest) == messages
    assert gc.isenabled()
    assert (len(collections) < len(messages) / 2) is paused


# How the compacted and the transient segments of each form begin: ``SegmentForm.ZSTD`` keeps
# raw deflate for the transient ones, and ``DEFLATE`` writes no zstd frame.
_BEGINNINGS = {
    SegmentForm.ZSTD: (ZSTD_SEGMENT, SEGMENT),
    SegmentForm.DEFLATE: (SEGMENT, SEGMENT),
    SegmentForm.ZLIB_JSON: (COMPRESSED, COMPRESSED),
}


ROUND = COMPACT_AFTER * MERGE_AFTER
"""Boundaries from one merge to the next."""


def _unpadded(_: int) -> str:
    return ""


async def _written(
    writer: Checkpointer,
    backend: MemoryBackend,
    boundaries: int,
    *,
    padding: Callable[[int], str] = _unpadded,
    after: tuple[Message, ...] = (),
) -> tuple[Message, ...]:
    """``boundaries`` writes of one new turn each after the ``after`` transcript (the turn's
    user message padded with ``padding(turn)``), every frontier read back whole by a fresh
    reader; the transcript at the end."""
    messages = after
    for turn in range(len(after) // 2, len(after) // 2 + boundaries):
        asked = Message.of("user", f"turn {turn} {padding(turn)}")
        messages += (asked, *conversation(1, start=turn)[1:])
        receipt = await writer.write(frontier(messages=messages, iteration=turn))
        assert receipt is not None, writer.last_error
        assert (await resolved(backend))[1] == messages
    return messages


@pytest.mark.parametrize("form", list(SegmentForm))
async def test_one_commit_compacts_the_chain_and_drops_what_it_replaces(
    backend: MemoryBackend, form: SegmentForm
) -> None:
    """With a ``CommitStore`` every ``COMPACT_AFTER``-th segment holds everything since the
    last compacted one, and the segments it replaces go in its commit: what is stored stays a
    few segments, every frontier committed resolves to its whole transcript, and a worker that
    takes the run up carries the chain on. In every form, each segment in the form's own."""
    writer = Checkpointer(
        backend.checkpoints,
        CheckpointPolicy(segment_form=form),
        history=backend.history,
        commits=backend.commits,
    )
    boundaries = 3 * COMPACT_AFTER + 5
    messages = await _written(writer, backend, boundaries)
    stored = await backend.history.fetch_all(TENANT, RUN)
    assert len(stored) == 3 + 5  # three compacted segments and the five written after them
    compacted, transient = _BEGINNINGS[form]
    beginnings = sorted(segment[: len(compacted)] for segment in stored.values())
    assert beginnings == sorted([compacted] * 3 + [transient] * 5)
    taken_up = Checkpointer(
        backend.checkpoints,
        CheckpointPolicy(segment_form=form),
        history=backend.history,
        commits=backend.commits,
    )
    resumed = await taken_up.resumable(TENANT, RUN)
    assert resumed is not None
    for turn in range(boundaries, boundaries + COMPACT_AFTER):
        messages += conversation(1, start=turn)
        assert await taken_up.write(frontier(messages=messages, iteration=turn))
    assert len(await backend.history.fetch_all(TENANT, RUN)) == 3 + 5 + 1
    assert (
        await Checkpointer(backend.checkpoints, history=backend.history).transcript(
            (await taken_up.latest(TENANT, RUN)) or frontier()
        )
        == messages
    )


async def test_a_writer_that_takes_a_run_up_compacts_what_the_former_one_left_uncompressed(
    backend: MemoryBackend,
) -> None:
    """Transient segments are stored as they are until a compaction replaces them. A worker that
    takes the run up (a takeover, or a resume after an approval) counts those a former writer
    left as its own: its first compaction replaces them too, rather than keeping them for good
    beside a chain that starts again after them."""
    former = Checkpointer(backend.checkpoints, history=backend.history, commits=backend.commits)
    left = await _written(former, backend, COMPACT_AFTER + 4)  # one compaction, four after it
    assert len(await backend.history.fetch_all(TENANT, RUN)) == 1 + 4
    taker = Checkpointer(backend.checkpoints, history=backend.history, commits=backend.commits)
    assert await taker.resumable(TENANT, RUN) is not None
    await _written(taker, backend, COMPACT_AFTER - 4, after=left)
    assert len(await backend.history.fetch_all(TENANT, RUN)) == 2  # the two compacted ones


def _previous_handles(stored: Mapping[str, bytes]) -> set[str | None]:
    return {previous_of(RUN, handle, segment) for handle, segment in stored.items()}


async def test_every_round_of_compactions_ends_in_one_merged_segment(
    backend: MemoryBackend,
) -> None:
    """The ``MERGE_AFTER``-th compaction holds everything since the last merged segment and
    drops the compacted ones in between with the transient ones: two rounds and a half leave
    two merged segments, the compactions since and the transient segments after them, one
    chain from the first, and every frontier on the way resolved whole."""
    writer = Checkpointer(backend.checkpoints, history=backend.history, commits=backend.commits)
    await _written(writer, backend, 2 * ROUND + 2 * COMPACT_AFTER + 3)
    stored = await backend.history.fetch_all(TENANT, RUN)
    assert len(stored) == 2 + 2 + 3
    assert None in _previous_handles(stored)  # the first merged segment starts the chain
    assert len(_previous_handles(stored)) == len(stored)  # a chain: no two share a previous


async def test_a_round_too_large_to_merge_compacts_and_starts_the_next_round(
    backend: MemoryBackend,
) -> None:
    """Messages past ``SEGMENT_BYTES`` a round are not merged (one zstd call over that much
    would hold the boundary): the round's last compaction holds only what followed the
    compaction before it, and the next round starts after it, so a round of small messages
    after it merges into one segment."""
    writer = Checkpointer(backend.checkpoints, history=backend.history, commits=backend.commits)
    padded = await _written(
        writer, backend, ROUND, padding=lambda _: "x" * (SEGMENT_BYTES // (ROUND - 1) + 1)
    )
    await _written(writer, backend, ROUND, after=padded)
    stored = await backend.history.fetch_all(TENANT, RUN)
    assert len(stored) == MERGE_AFTER + 1  # the first round's compactions, the second merged
    assert len(_previous_handles(stored)) == len(stored)


@pytest.mark.parametrize("landed", [False, True])
@pytest.mark.parametrize(
    "failing",
    [COMPACT_AFTER - 1, COMPACT_AFTER, COMPACT_AFTER + 1, ROUND - 1, ROUND, ROUND + 1],
)
async def test_a_failed_commit_leaves_a_chain_that_resolves(
    backend: MemoryBackend, failing: int, landed: bool
) -> None:
    """Before, at and after a compaction and a merge, a commit that failed or whose reply was
    lost: the writer keeps its idea of the chain from before it, and every frontier committed
    after must still resolve whole (never name a segment that was not stored, or that a commit
    dropped)."""
    assert backend.commits is not None
    flaky = RecordingCommits(backend.commits, {failing: "after" if landed else "before"})
    writer = Checkpointer(backend.checkpoints, history=backend.history, commits=flaky)
    messages: tuple[Message, ...] = ()
    for turn in range(failing + COMPACT_AFTER + 2):
        before, messages = messages, messages + conversation(1, start=turn)
        receipt = await writer.write(frontier(messages=messages, iteration=turn))
        assert (receipt is None) == (flaky.commits == failing)
        landed_now = receipt is not None or landed
        assert (await resolved(backend))[1] == (messages if landed_now else before)


@pytest.mark.parametrize("failing", [3, COMPACT_AFTER, ROUND])
async def test_the_segment_of_a_commit_whose_reply_was_lost_is_dropped_by_the_next(
    backend: MemoryBackend, failing: int
) -> None:
    """A commit that landed with its reply lost leaves a segment the writer's next one does not
    follow (a transient one, a compaction, a merge): that next commit drops it, with the
    frontier that named it, so no segment lies beside the chain until the run is forgotten."""
    assert backend.commits is not None
    lossy = RecordingCommits(backend.commits, {failing: "after"})
    writer = Checkpointer(backend.checkpoints, history=backend.history, commits=lossy)
    messages: tuple[Message, ...] = ()
    for turn in range(failing + 2):
        messages += conversation(1, start=turn)
        receipt = await writer.write(frontier(messages=messages, iteration=turn))
        assert (receipt is None) == (turn + 1 == failing)
        assert (await resolved(backend))[1] == messages
        if receipt is None:  # it landed
            assert lossy.handed[-1].handle in await backend.history.fetch_all(TENANT, RUN)
    unheard = lossy.handed[failing - 1].handle
    assert unheard in lossy.handed[failing].dropped
    stored = await backend.history.fetch_all(TENANT, RUN)
    assert unheard not in stored
    assert len(_previous_handles(stored)) == len(stored)  # one chain, nothing beside it


async def test_a_failed_commit_retried_with_the_same_messages_keeps_its_segment(
    backend: MemoryBackend,
) -> None:
    """The same checkpoint written again after a failed commit makes the same segment: the
    retry keeps it rather than drop what it stores."""
    assert backend.commits is not None
    lossy = RecordingCommits(backend.commits, {2: "before"})
    writer = Checkpointer(backend.checkpoints, history=backend.history, commits=lossy)
    first = frontier(messages=conversation(1), iteration=0)
    second = frontier(messages=conversation(2), iteration=1)
    assert await writer.write(first) is not None
    assert await writer.write(second) is None
    assert await writer.write(second) is not None
    retried = lossy.handed[2]
    assert retried.handle == lossy.handed[1].handle
    assert retried.handle not in retried.dropped
    assert (await resolved(backend))[1] == conversation(2)


async def test_transient_segments_holding_segment_bytes_are_compacted_early(
    backend: MemoryBackend,
) -> None:
    """Large messages (a tool's 100 KB result) compact as soon as the transient segments hold
    ``SEGMENT_BYTES`` of JSON, not at the ``COMPACT_AFTER``-th: no boundary compresses megabytes
    at once, and no megabytes stay stored uncompressed meanwhile."""
    writer = Checkpointer(backend.checkpoints, history=backend.history, commits=backend.commits)
    large = SEGMENT_BYTES // 2 + 1
    await _written(writer, backend, 7, padding=lambda _: "x" * large)
    stored = await backend.history.fetch_all(TENANT, RUN)
    # Two boundaries' messages pass SEGMENT_BYTES: compacted at the 2nd, 4th and 6th.
    assert len(stored) == 3 + 1
    assert sum(len(segment) for segment in stored.values()) < SEGMENT_BYTES


async def test_a_merge_whose_reply_was_lost_is_merged_again_whatever_follows(
    backend: MemoryBackend,
) -> None:
    """A merge that landed deleted the last compacted segment; its reply lost, the writer keeps
    the chain it had and compacts again at the next boundary. Even when that boundary brings
    more than ``SEGMENT_BYTES``, it merges again (as the lost one did) rather than start after
    the compacted segment that is gone: every frontier after it still resolves."""
    assert backend.commits is not None
    lossy = RecordingCommits(backend.commits, {ROUND: "after"})
    writer = Checkpointer(backend.checkpoints, history=backend.history, commits=lossy)
    small = await _written(writer, backend, ROUND - 1)
    lost = small + conversation(1, start=ROUND - 1)
    assert await writer.write(frontier(messages=lost, iteration=ROUND - 1)) is None  # it landed
    await _written(writer, backend, 3, padding=lambda _: "x" * SEGMENT_BYTES, after=lost)


async def test_the_checkpointer_hands_the_store_the_segment_handle_it_names(
    backend: MemoryBackend,
) -> None:
    """The store keys a segment by the handle the commit carries instead of digesting it again:
    at every commit, transient and compacted, it is the segment's digest and what the frontier
    committed with it names."""
    assert backend.commits is not None
    handed = RecordingCommits(backend.commits)
    writer = Checkpointer(backend.checkpoints, history=backend.history, commits=handed)
    messages: tuple[Message, ...] = ()
    for turn in range(COMPACT_AFTER + 2):
        messages += conversation(1, start=turn)
        assert await writer.write(frontier(messages=messages, iteration=turn))
    assert handed.commits == COMPACT_AFTER + 2
    for commit in handed.handed:
        assert commit.segment is not None
        assert commit.handle == handle_for(commit.segment)
        assert commit.handle == decode(commit.frontier).history_handle


async def test_without_a_boundary_store_nothing_is_compacted(backend: MemoryBackend) -> None:
    writer = Checkpointer(backend.checkpoints, history=backend.history)
    messages: tuple[Message, ...] = ()
    for turn in range(COMPACT_AFTER + 1):
        messages += conversation(1, start=turn)
        assert await writer.write(frontier(messages=messages, iteration=turn))
    assert len(await backend.history.fetch_all(TENANT, RUN)) == COMPACT_AFTER + 1


async def test_a_resumed_writer_appends_after_the_stored_chain(backend: MemoryBackend) -> None:
    first = Checkpointer(backend.checkpoints, history=backend.history)
    await first.write(frontier(messages=conversation(3)))
    history = RecordingHistoryStore(backend.history)
    second = Checkpointer(backend.checkpoints, history=history)
    latest = await second.latest(TENANT, RUN)
    assert latest is not None
    messages = await second.transcript(latest) + conversation(1, start=3)
    await second.write(frontier(messages=messages))
    latest = await second.latest(TENANT, RUN)
    assert latest is not None
    assert latest.history_handle is not None
    assert (await _newest_segment(history, latest.history_handle)).messages == messages[-2:]
    assert await Checkpointer(backend.checkpoints).transcript(latest, backend.history) == messages


async def test_an_evicted_history_is_unavailable(backend: MemoryBackend) -> None:
    checkpointer = Checkpointer(backend.checkpoints, history=backend.history)
    await checkpointer.write(frontier(messages=conversation(2)))
    latest = await checkpointer.latest(TENANT, RUN)
    assert latest is not None
    await backend.history.forget(TENANT, RUN)
    with pytest.raises(HistoryUnavailableError) as caught:
        await checkpointer.transcript(latest)
    assert caught.value.run_id == RUN
    assert caught.value.handle == latest.history_handle


async def test_a_missing_middle_segment_is_unavailable(backend: MemoryBackend) -> None:
    checkpointer = Checkpointer(backend.checkpoints, history=backend.history)
    await checkpointer.write(frontier(messages=conversation(1)))
    await checkpointer.write(frontier(messages=conversation(2)))
    latest = await checkpointer.latest(TENANT, RUN)
    assert latest is not None
    assert latest.history_handle is not None
    head = await backend.history.fetch(TENANT, RUN, latest.history_handle)
    holed = MemoryHistoryStore()  # holds the head segment, not the one it points back to
    assert await holed.put(TENANT, RUN, head, fence=0) == latest.history_handle
    with pytest.raises(HistoryUnavailableError, match="no segment"):
        await checkpointer.transcript(latest, holed)


async def test_a_length_mismatch_is_unavailable(backend: MemoryBackend) -> None:
    checkpointer = Checkpointer(backend.checkpoints, history=backend.history)
    await checkpointer.write(frontier(messages=conversation(2)))
    latest = await checkpointer.latest(TENANT, RUN)
    assert latest is not None
    lying = latest.model_copy(update={"history_length": latest.history_length + 1})
    with pytest.raises(HistoryUnavailableError, match="4 messages"):
        await checkpointer.transcript(lying)


async def test_a_handle_without_a_history_store_is_unavailable(backend: MemoryBackend) -> None:
    writer = Checkpointer(backend.checkpoints, history=backend.history)
    await writer.write(frontier(messages=conversation(1)))
    reader = Checkpointer(backend.checkpoints)
    latest = await reader.latest(TENANT, RUN)
    assert latest is not None
    with pytest.raises(HistoryUnavailableError, match="no history store"):
        await reader.transcript(latest)


async def test_forget_drops_the_frontier_and_its_history(backend: MemoryBackend) -> None:
    checkpointer = Checkpointer(backend.checkpoints, history=backend.history)
    await checkpointer.write(frontier(messages=conversation(2)))
    latest = await checkpointer.latest(TENANT, RUN)
    assert latest is not None
    assert latest.history_handle is not None
    await checkpointer.forget(TENANT, RUN)
    assert await checkpointer.latest(TENANT, RUN) is None
    with pytest.raises(HistoryUnavailableError):
        await backend.history.fetch(TENANT, RUN, latest.history_handle)


async def test_the_stored_frontier_is_json_with_a_fresh_timestamp(backend: MemoryBackend) -> None:
    checkpoint = frontier()
    checkpointer = Checkpointer(backend.checkpoints)
    await checkpointer.write(checkpoint)
    stored = await backend.checkpoints.latest(TENANT, RUN)
    assert stored is not None
    assert json.loads(stored)["run_id"] == RUN
    assert decode(stored).written_at >= checkpoint.written_at


# -- remembered messages: masked and encoded once, spliced in as bytes ----------------------------

HOSTILE = '"messages":[] \\" \u00e9\u6f22\U0001f680 \\u0000'


def _varied_frontiers() -> list[Checkpoint]:
    talk = (*conversation(3), Message.of("user", HOSTILE), Message.tool_result("c9", "[1, 2]"))
    return [
        frontier(),
        frontier(messages=talk[:1]),
        frontier(messages=talk, metadata={"messages": [], "note": HOSTILE}),
        frontier(run_id=HOSTILE, tenant='"messages":[]', messages=talk, fence=9, iteration=4),
        frontier(
            boundary=Boundary.BEFORE_APPROVAL,
            approval=APPROVAL,
            messages=talk,
            pending=(pending("c1", key="k1"), pending("c2", safe_to_repeat=True)),
        ),
    ]


@pytest.mark.parametrize("checkpoint", _varied_frontiers(), ids=lambda c: str(len(c.messages)))
def test_splicing_encoded_messages_gives_exactly_the_bytes_of_encoding_the_whole(
    checkpoint: Checkpoint,
) -> None:
    bare = checkpoint.model_copy(update={"messages": ()})
    spliced = encode_spliced(bare, [encode_message(m) for m in checkpoint.messages])
    assert spliced == encode(checkpoint)
    assert decode(spliced) == checkpoint


def test_splicing_refuses_a_checkpoint_that_still_has_its_messages() -> None:
    with pytest.raises(ValueError, match="without its messages"):
        encode_spliced(frontier(messages=conversation(1)), [])


async def test_each_boundary_writes_what_masking_the_whole_transcript_would(
    backend: MemoryBackend,
) -> None:
    checkpointer = Checkpointer(backend.checkpoints)
    reference = Redactor.build()
    talk: list[Message] = []
    for turn, entry in enumerate(SECRETS[:12]):
        talk.append(Message.of("user", f"turn {turn}: {entry.text}"))
        talk.append(Message.of("assistant", f"noted turn {turn}"))
        assert await checkpointer.write(frontier(messages=tuple(talk), iteration=turn))
        stored = await backend.checkpoints.latest(TENANT, RUN)
        assert stored is not None
        written = decode(stored)
        assert written.messages == reference.mask_messages(talk)
        assert stored == encode(written)
        assert not any(entry.secret.encode() in stored for entry in SECRETS[: turn + 1])


async def test_a_message_is_masked_once_however_many_boundaries_carry_it(
    backend: MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    masked: list[Message] = []
    unpatched = Redactor.mask_message

    def counting(self: Redactor, message: Message) -> Message:
        masked.append(message)
        return unpatched(self, message)

    monkeypatch.setattr(Redactor, "mask_message", counting)
    checkpointer = Checkpointer(backend.checkpoints)
    talk = conversation(4)
    for length in range(1, len(talk) + 1):
        await checkpointer.write(frontier(messages=talk[:length]))
    assert masked == list(talk)
    # A message equal to one already written but another object is masked for itself.
    again = Message.of("user", talk[0].text)
    await checkpointer.write(frontier(messages=(*talk, again)))
    assert masked[-1] is again


async def test_what_is_remembered_goes_with_the_messages(backend: MemoryBackend) -> None:
    checkpointer = Checkpointer(backend.checkpoints)
    talk = [*conversation(5), Message.of("user", f"key {SECRETS[0].text}")]
    await checkpointer.write(frontier(messages=tuple(talk)))
    assert len(checkpointer._messages) == len(talk)
    del talk
    gc.collect()
    assert len(checkpointer._messages) == 0


def _as_kit_0_1_reads_it(stored: Mapping[str, bytes], head: str) -> tuple[Message, ...]:
    """The transcript ending at ``head`` read as kit 0.1.0 (chart 0.2.0) read one: it knows
    only ``COMPRESSED`` segments (a text header, a zlib stream of ``Segment``'s JSON) and
    validates each with ``Segment`` (extra fields forbidden)."""
    chain: list[bytes] = []
    cursor: str | None = head
    while cursor is not None:
        segment = stored[cursor]
        assert segment.startswith(COMPRESSED), "a segment kit 0.1.0 cannot read"
        chain.append(segment)
        cursor = segment[len(COMPRESSED) :].split(b"\n", 1)[0].decode() or None
    messages: list[Message] = []
    context = b""
    for segment in reversed(chain):
        _, length, compressed = segment[len(COMPRESSED) :].split(b"\n", 2)
        used = int(length)
        inflate = zlib.decompressobj(zdict=context[-used:]) if used else zlib.decompressobj()
        body = inflate.decompress(compressed) + inflate.flush()
        messages.extend(Segment.model_validate_json(body).messages)
        context += body
    return tuple(messages)


async def test_in_the_zlib_json_form_kit_0_1_can_take_the_run_over(
    backend: MemoryBackend,
) -> None:
    """A rolling upgrade from kit 0.1.0 leaves its replicas taking runs over for a while; they
    end a run whose segments they cannot read (``HistoryUnavailable``). Written in
    ``SegmentForm.ZLIB_JSON`` — merged, compacted and transient segments alike — every frontier's
    transcript reads as that release reads it."""
    policy = CheckpointPolicy(segment_form=SegmentForm.ZLIB_JSON)
    writer = Checkpointer(
        backend.checkpoints, policy, history=backend.history, commits=backend.commits
    )
    messages: tuple[Message, ...] = ()
    for turn in range(ROUND + 3):  # a merge, and the compactions and segments before it
        messages += conversation(1, start=turn)
        assert await writer.write(frontier(messages=messages, iteration=turn)), writer.last_error
        latest = await writer.latest(TENANT, RUN)
        assert latest is not None
        assert latest.history_handle is not None
        stored = await backend.history.fetch_all(TENANT, RUN)
        assert _as_kit_0_1_reads_it(stored, latest.history_handle) == messages
    final = await Checkpointer(backend.checkpoints, history=backend.history).latest(TENANT, RUN)
    assert final is not None
    assert await writer.transcript(final) == messages  # and this release reads it as well
