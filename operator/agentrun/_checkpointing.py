"""The write side: when to checkpoint, and how a frontier becomes the bytes a store keeps.

``Checkpointer.write`` masks secrets, then sizes the exact bytes the store will write, then
refuses (never truncates) a payload over ``max_bytes``: a resume from a truncated frontier would
continue a conversation that never happened, and nothing downstream could see the hole.

A checkpoint that cannot be written — over the cap, or a store that is unreachable — never fails
the live run. Losing the ability to resume is worth knowing about (``last_error``), not worth
killing a run that is otherwise fine. Two things are raised instead. ``StaleFenceError`` does not
say the checkpoint failed, it says the run now belongs to another worker, and this one must stop.
``CheckpointEncodingError`` says the frontier could not be masked or encoded: no store was asked,
so it is no outage but a bug or data the kit cannot encode, which fails every boundary after it
the same way; kept in ``last_error``, it would let a run go on that nobody could resume.

With a ``HistoryStore`` the transcript goes out of line: each write appends only the messages
added since the previous write of that run, and the frontier carries the chain's head.

With a ``CommitStore`` (a backend whose stores share one database) the new segment, the
frontier and the charge of the model call the boundary follows go in one commit (see
``agentrun._commits``); without one, each goes to its own store, the segment first, so a frontier
never names a segment that is not there.

With a ``CommitStore`` the chain is also compacted: every ``COMPACT_AFTER`` segments (sooner once
they hold ``SEGMENT_BYTES`` of JSON), the commit's segment holds every message since the last
compacted one (instead of only the new ones) and the segments it replaces are deleted in the same
commit. A segment of a turn or two compresses poorly even against the preceding 32 KB (each zlib
stream carries its own framing and Huffman tables, and each segment its header), and a resume pays a
decompression per segment; a chain of compacted segments stores about what the whole transcript
compressed once does, and resumes in a sixteenth of the decompressions. Every ``MERGE_AFTER``-th
compaction merges the same way one level up: its segment holds everything since the last merged one,
replacing the compacted segments in between too, so a long run resumes from a few segments of 64
boundaries each. The segments in between are transient (a writer that takes a run up compacts
those a former writer left with its own), so they are not compressed at all
(``encode_segment(transient=True)``): compressing each against 32 KB at zlib's level 6 was most of a
boundary's CPU on SQLite, and at level 1 against 4 KB still a third of it on PostgreSQL. Content
addressing is unchanged: a compacted (merged) segment is a segment, named by its digest, whose
previous is the last compacted (merged) one. Without a ``CommitStore`` nothing is compacted, as
deleting a segment before the frontier that stops naming it has landed would leave a frontier naming
a segment that is gone.

Masking and encoding are the dearest part of a write when done for the whole transcript, far
dearer than a store's loopback round trip (``bench/README.md``). So each message object is
masked and encoded once, not at every boundary
(``_MessageMemo``), and a write costs what its newest messages cost to mask and encode, plus
joining the remembered bytes of the rest.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from pydantic import Field

from agentrun._backend import CheckpointStore
from agentrun._base import FrozenModel
from agentrun._commits import BoundaryCommit, Charge, CommitStore, RunReader
from agentrun._errors import (
    CheckpointEncodingError,
    CheckpointTooLargeError,
    ConfigurationError,
    HistoryUnavailableError,
    StaleFenceError,
)
from agentrun._frontier import Boundary, Checkpoint, decode, encode_message, encode_spliced
from agentrun._history import (
    CONTEXT_BYTES,
    ChainPoint,
    ChainRead,
    HistoryStore,
    SegmentForm,
    encode_segment,
    handle_for,
    read_chain,
)
from agentrun._messages import Message
from agentrun._redaction import Masker, Redactor

DEFAULT_MAX_BYTES = 1 << 20


class CheckpointPolicy(FrozenModel):
    """Where to checkpoint and how large a frontier may be.

    Fewer boundaries cost less and repeat more work on resume; the default writes at all three.
    """

    boundaries: frozenset[Boundary] = frozenset(Boundary)
    max_bytes: int = Field(default=DEFAULT_MAX_BYTES, gt=0)
    segment_form: SegmentForm = SegmentForm.ZSTD
    """The form the transcript's segments are written in: ``SegmentForm.ZLIB_JSON`` while a
    worker of kit 0.1.0 (chart 0.2.0) or earlier may still take a run over."""


@dataclass(frozen=True)
class WriteReceipt:
    """What a written checkpoint cost: where, how many bytes, when, and how long it took."""

    boundary: Boundary
    iteration: int
    size: int
    written_at: datetime
    seconds: float
    """How long masking, encoding and the store's write took together."""
    spent: int | None = None
    """The run's total spend after the charge the write carried (None: it carried none)."""


COMPACT_AFTER = 16
"""How many segments a run's chain gathers after its last compacted one before the next commit
replaces them (see ``Checkpointer``)."""

MERGE_AFTER = 4
"""Every ``MERGE_AFTER``-th compaction merges: its segment holds everything since the last
merged one, replacing the compacted segments in between too (64 boundaries' messages in one
segment, ~150 KB of JSON in the booking conversation of ``bench.peers_run``). A resume pays a
fixed cost a segment besides the bytes (a zstd context and dictionary, the digest, the parse),
and a larger frame compresses better: fewer, larger frames decompress faster and store less. A
merge costs more zstd than a compaction (``bench/README.md``)."""

SEGMENT_BYTES = 256 * 1024
"""How much JSON a compacted or merged segment gathers, roughly: a compaction comes before the
``COMPACT_AFTER``-th segment once the transient ones with the new messages hold this much, and
a merge that would hold more compacts instead (only what followed the last compacted segment)
and starts the next round after it. A segment that size decompresses as fast per byte as any,
and without the bound a compaction after 16 boundaries of large tool results would hold one
boundary for as long as zstd at ``ZSTD_LEVEL`` takes over megabytes, and store them
uncompressed meanwhile (``bench/README.md``)."""


@dataclass(frozen=True)
class _Chain:
    head: str
    length: int
    context: bytes = b""
    """The JSON of the chain's last segments, for the next one to be compressed against; not
    kept up while the segments are transient, which are compressed against nothing."""
    base: ChainPoint = field(default_factory=ChainPoint)
    """The segment the ``recent`` ones follow: the last compacted one, or, when this worker
    took the chain up, its last compressed segment (``ChainRead.compacted``)."""
    recent: tuple[str, ...] = ()
    """The segments written after ``base``, oldest first: what the next compaction replaces."""
    recent_bytes: int = 0
    """The JSON of the messages in ``recent``, in bytes (about that for a chain taken up: its
    segments' bodies)."""
    merged: ChainPoint = field(default_factory=ChainPoint)
    """The segment the ``compacted`` ones follow: the last merged one, or ``base`` as this
    worker took the chain up."""
    compacted: tuple[str, ...] = ()
    """The compacted segments after ``merged``, oldest first: what the next merge replaces
    with ``recent``."""
    unheard: tuple[str, ...] = ()
    """The segments of commits that failed since the chain was last committed. Each may have
    landed with its reply lost, named by a frontier but by no later segment (the writer goes on
    from the chain it had), so the next commit with a segment drops them: it replaces that
    frontier in the same commit, and a fence refuses it if another worker has taken the run
    (and with it the chain) up meanwhile."""

    @classmethod
    def compacted_at(cls, head: str, length: int, context: bytes) -> _Chain:
        """A chain whose head was just compacted: the next compaction, and merge, start after
        it."""
        start = ChainPoint(head, length, context)
        return cls(head, length, context, start, (), 0, start, ())

    @classmethod
    def taken_up(cls, head: str, read: ChainRead, *, compacting: bool) -> _Chain:
        """A chain as read back. A ``compacting`` writer starts after its last compressed
        segment, so that the next compaction replaces the segments a former writer left stored
        as they are too; without a ``CommitStore`` nothing is compacted."""
        start = read.compacted if compacting else ChainPoint(head, len(read.messages), read.context)
        recent = read.uncompacted if compacting else ()
        return cls(
            head,
            len(read.messages),
            read.context,
            start,
            recent,
            read.uncompacted_bytes if compacting else 0,
            start,
            (),
        )

    def dropped_with(self, handle: str) -> tuple[str, ...]:
        """The ``unheard`` segments a commit of the segment ``handle`` drops: all but that one
        (the same messages again make the same segment, which the commit keeps)."""
        return tuple(unheard for unheard in self.unheard if unheard != handle)

    def compaction(self, since_merged: Sequence[bytes]) -> tuple[ChainPoint, tuple[str, ...], bool]:
        """Where the compaction at hand starts, the segments it replaces, and whether it ends a
        round of ``MERGE_AFTER`` (the next merge starts after it). ``since_merged`` is the
        JSON of every message after ``merged``. The round's last compaction merges (starts after
        ``merged``), unless the chain already holds over ``SEGMENT_BYTES`` since it; the others
        start after ``base``.

        The choice depends on this chain alone, not on the boundary's new messages: a commit
        whose reply was lost may have landed, and a merge that landed deleted ``base``. The
        writer keeps the chain it had (``Checkpointer.write``), so the next boundary compacts
        again and must merge again, whatever it adds, never start after a ``base`` that is gone.
        """
        if len(self.compacted) + 1 < MERGE_AFTER:
            return self.base, self.recent, False
        held = since_merged[: self.length - self.merged.length]
        if sum(len(message) for message in held) <= SEGMENT_BYTES:
            return self.merged, (*self.compacted, *self.recent), True
        return self.base, self.recent, True


_START = _Chain("", 0)
"""A run's chain before its first segment (no head)."""


class _Remembered:
    """What writes derived from one message object: the bytes of its masked form."""

    __slots__ = ("encoded", "ref")

    def __init__(self, ref: weakref.ref[Message], encoded: bytes) -> None:
        self.ref = ref
        self.encoded = encoded


class _MessageMemo:
    """Each message object's masked form, encoded, remembered while the message lives.

    The runner keeps a run's conversation in one list and only appends to it, so at every
    boundary all but the newest messages are the very objects written at the previous one. A
    write therefore masks and encodes only its newest messages and splices the rest in as bytes
    (``encode_spliced`` inline, the segment's JSON array out of line, whose compacted and merged
    segments gather 16 or 64 boundaries' messages again): masking and encoding the whole
    transcript at every boundary cost far more than a loopback round trip (see the module's
    docstring). The memo is keyed by identity, not by value: a message holds
    dicts and so has no hash, and comparing values would cost as much as masking. Identity is
    sound because messages are frozen (the out-of-line path relies on that too, appending only
    what is past the chain). An entry goes when its message is collected, so a long-lived
    worker keeps no transcript of a finished run. The bytes cost about the transcript's size
    again, for as long as it lives.
    """

    def __init__(self, redactor: Redactor | None) -> None:
        self._redactor = redactor
        self._memo: dict[int, _Remembered] = {}

    def encoded(self, messages: Sequence[Message]) -> list[bytes]:
        return [self._remembered(message).encoded for message in messages]

    def __len__(self) -> int:
        return len(self._memo)

    def _remembered(self, message: Message) -> _Remembered:
        key = id(message)
        remembered = self._memo.get(key)
        if remembered is not None and remembered.ref() is message:
            return remembered
        masked = message if self._redactor is None else self._redactor.mask_message(message)
        memo = self._memo
        remembered = _Remembered(
            weakref.ref(message, lambda _: memo.pop(key, None)), encode_message(masked)
        )
        memo[key] = remembered
        return remembered


class Checkpointer:
    """Writes a run's frontier where the policy says: masked, sized on its bytes, never truncated.

    A write that fails (over the cap, a store away) leaves ``last_error`` and the live run goes
    on; only ``StaleFenceError`` (the run is another worker's now) and
    ``CheckpointEncodingError`` (a frontier that cannot be encoded) propagate. It
    also reads frontiers back (``latest``, ``transcript``) and forgets runs.

    Args:
        store: Where the frontiers are kept.
        policy: The boundaries written at and the largest frontier, in bytes (default: every
            boundary, 1 MiB).
        extra_patterns: Regular expressions masked besides the built-in secret shapes (without
            ``masker``).
        redact: Whether to mask at all (without ``masker``; default True).
        history: Where transcripts are kept out of line, in segments; None keeps them inline.
        masker: The run's redaction, shared with what else writes for the run.
        commits: Commits a whole boundary at once, in the same database as ``store``,
            ``history`` and the runner's ledger.
        pause_collector: Switch Python's garbage collector off, process-wide, while a
            transcript is decoded: an application that owns its process may choose it; off by
            default (``_history.collector_paused``).

    Raises:
        ConfigurationError: An entry of ``extra_patterns`` is not a regular expression.
    """

    def __init__(
        self,
        store: CheckpointStore,
        policy: CheckpointPolicy | None = None,
        *,
        extra_patterns: Iterable[str] = (),
        redact: bool = True,
        history: HistoryStore | None = None,
        masker: Masker | None = None,
        commits: CommitStore | None = None,
        pause_collector: bool = False,
    ) -> None:
        """``masker`` is the run's redaction, shared with what else writes for the run (a
        backend's, see ``Backend.masker``); without one, ``extra_patterns`` and ``redact`` build
        it. ``self.masker`` is what the runner masks everything else it writes with.
        ``commits`` commits a whole boundary at once; it must write to the same database as
        ``store``, ``history`` and the runner's ledger (``StoreSet.commits`` does).
        ``pause_collector`` switches Python's garbage collector off, for the whole process, while
        a transcript is decoded (``_history.collector_paused`` says what it saves): an
        application that owns its process may choose it; off by default, the kit leaves the
        collector as its caller has it."""
        self.store = store
        self.policy = policy or CheckpointPolicy()
        self.history = history
        self.commits = commits
        self.pause_collector = pause_collector
        self.masker = masker or Masker.build(extra_patterns, redact=redact)
        self.redactor = self.masker.redactor
        self._messages = _MessageMemo(self.redactor)
        self.last_error: Exception | None = None
        self.last_write: WriteReceipt | None = None
        self._chains: dict[tuple[str, str], _Chain] = {}

    def writes_at(self, boundary: Boundary) -> bool:
        """Whether the policy writes at ``boundary`` (a frontier holding intent is written at
        any boundary, see ``write``).

        Args:
            boundary: The boundary asked about.

        Returns:
            Whether the policy names it.

        Raises:
            Nothing: It reads the policy only.
        """
        return boundary in self.policy.boundaries

    async def write(
        self, checkpoint: Checkpoint, *, charge: Charge | None = None
    ) -> WriteReceipt | None:
        """Persist ``checkpoint`` if the policy writes at its boundary, or if it names a call
        that is not safe to repeat (``holds_intent``): a policy trades repeated model calls for
        fewer writes, never a call that may be made twice.

        ``charge`` goes in the same commit; only with a ``CommitStore`` (``carries_charges``),
        and a receipt without ``spent`` says it was not made (the caller charges the ledger).
        Returns the receipt, or None when skipped or refused (then ``last_error`` says why; a
        skipped boundary leaves an earlier error in place). Raises only ``StaleFenceError`` and
        ``CheckpointEncodingError`` (see the module's notes).

        Args:
            checkpoint: The frontier to write.
            charge: The model call's charge, committed with the frontier (only with a
                ``CommitStore``).

        Returns:
            The ``WriteReceipt``, or None when skipped or when the write failed.

        Raises:
            StaleFenceError: The frontier's fence is below the run's: another worker has it.
            ConfigurationError: ``charge`` was given without a ``CommitStore``.
            CheckpointEncodingError: The frontier cannot be masked or encoded (not retryable).
        """
        if not self.writes_at(checkpoint.boundary) and not checkpoint.holds_intent:
            return None
        if charge is not None and self.commits is None:
            raise ConfigurationError(
                "Checkpointer.write was given a charge but has no CommitStore to commit it "
                "with: pass commits= or charge the ledger (see carries_charges)"
            )
        started = time.perf_counter()
        spent: int | None = None
        run = (checkpoint.tenant, checkpoint.run_id)
        try:
            persisted, messages, appended = self._persistable(checkpoint)
            payload = encode_spliced(persisted, messages)
        except Exception as error:
            raise CheckpointEncodingError(run_id=checkpoint.run_id, cause=error) from error
        try:
            if len(payload) > self.policy.max_bytes:
                raise CheckpointTooLargeError(
                    run_id=checkpoint.run_id, size=len(payload), limit=self.policy.max_bytes
                )
            if self.commits is None:
                if appended is not None and self.history is not None:
                    # The segment first, so a frontier never names a segment that is not there.
                    await self.history.put(
                        checkpoint.tenant, checkpoint.run_id, appended[1], fence=checkpoint.fence
                    )
                    self._chains[run] = appended[0]
                await self.store.put(
                    checkpoint.tenant, checkpoint.run_id, payload, fence=checkpoint.fence
                )
            else:
                spent = await self.commits.commit(
                    BoundaryCommit(
                        checkpoint.tenant,
                        checkpoint.run_id,
                        checkpoint.fence,
                        payload,
                        None if appended is None else appended[1],
                        charge,
                        () if appended is None else appended[2],
                        None if appended is None else appended[0].head,
                    )
                )
        except StaleFenceError:
            raise
        except Exception as error:
            self.last_error = error
            if self.commits is not None and appended is not None and appended[1]:
                self._unheard(checkpoint, appended[0].head)
            return None
        if appended is not None:
            self._chains[run] = appended[0]
        self.last_error = None
        self.last_write = WriteReceipt(
            checkpoint.boundary,
            checkpoint.iteration,
            len(payload),
            datetime.now(UTC),
            time.perf_counter() - started,
            spent,
        )
        return self.last_write

    def _unheard(self, checkpoint: Checkpoint, head: str) -> None:
        """Remember the segment of a commit that failed (see ``_Chain.unheard``)."""
        run = (checkpoint.tenant, checkpoint.run_id)
        chain = self._chains.get(run, _START)
        self._chains[run] = replace(chain, unheard=(*chain.unheard, head))

    @property
    def carries_charges(self) -> bool:
        """Whether ``write`` can take a model call's charge into its commit."""
        return self.commits is not None

    def _persistable(
        self, checkpoint: Checkpoint
    ) -> tuple[Checkpoint, list[bytes], tuple[_Chain, bytes, tuple[str, ...]] | None]:
        """The checkpoint as persisted, masked and with its transcript out of line or, inline,
        taken out and returned encoded (for ``encode_spliced``); and, out of line, the new
        segment, the chain it makes (remembered once stored) and the segments a commit drops
        with it. Only masking and encoding: no store is asked, so what fails here is a bug or
        data that cannot be encoded, never an outage (``write`` tells the two apart)."""
        update: dict[str, object] = {"written_at": datetime.now(UTC), "messages": ()}
        messages: list[bytes] = []
        appended: tuple[_Chain, bytes, tuple[str, ...]] | None = None
        if self.redactor is not None:
            masked = tuple(
                pending.model_copy(update={"call": call, "arguments_masked": True})
                if (call := self.redactor.mask_call(pending.call)) != pending.call
                else pending
                for pending in checkpoint.pending
            )
            update["pending"] = masked
            metadata = self.redactor.mask_json(dict(checkpoint.metadata))
            update["metadata"] = metadata
        if self.history is not None and checkpoint.history_handle is None:
            chain, appended = self._grown_chain(checkpoint)
            update.update(
                {"history_handle": chain.head, "history_length": len(checkpoint.messages)}
            )
        else:
            messages = self._messages.encoded(checkpoint.messages)
        return checkpoint.model_copy(update=update), messages, appended

    def _grown_chain(
        self, checkpoint: Checkpoint
    ) -> tuple[_Chain, tuple[_Chain, bytes, tuple[str, ...]] | None]:
        """The chain after this write's segment, and the segment to store (None: no new
        messages), with the segments a ``CommitStore``'s commit replaces by it when it is a
        compacted one. ``write`` stores it: on its own before the frontier without a
        ``CommitStore``, in the commit with one."""
        run = (checkpoint.tenant, checkpoint.run_id)
        chain = self._chains.get(run)
        if chain is not None and chain.length > len(checkpoint.messages):
            chain = None
        if chain is None:
            chain = _START
        fresh = self._messages.encoded(checkpoint.messages[chain.length :])
        if not fresh and chain.head:
            return replace(chain, length=len(checkpoint.messages)), None
        fresh_bytes = sum(len(message) for message in fresh)
        if self.commits is not None and (
            len(chain.recent) + 1 >= COMPACT_AFTER
            or chain.recent_bytes + fresh_bytes >= SEGMENT_BYTES
        ):
            # Everything since the last compacted (or merged) segment in one, which replaces
            # the segments in between.
            since_merged = self._messages.encoded(checkpoint.messages[chain.merged.length :])
            start, replaced, ends_round = chain.compaction(since_merged)
            segment, body = encode_segment(
                start.handle,
                since_merged[start.length - chain.merged.length :],
                start.context,
                form=self.policy.segment_form,
            )
            context = (start.context + body)[-CONTEXT_BYTES:]
            handle = handle_for(segment)
            grown = _Chain.compacted_at(handle, len(checkpoint.messages), context)
            if not ends_round:
                grown = replace(grown, merged=chain.merged, compacted=(*chain.compacted, handle))
            return grown, (grown, segment, (*replaced, *chain.dropped_with(handle)))
        transient = self.commits is not None
        segment, body = encode_segment(
            chain.head or None,
            fresh,
            chain.context,
            transient=transient,
            form=self.policy.segment_form,
        )
        handle = handle_for(segment)
        grown = replace(
            chain,
            head=handle,
            length=len(checkpoint.messages),
            context=chain.context if transient else (chain.context + body)[-CONTEXT_BYTES:],
            # Only what a compaction will replace: without a CommitStore there is none.
            recent=(*chain.recent, handle) if transient else (),
            recent_bytes=chain.recent_bytes + fresh_bytes if transient else 0,
            unheard=(),
        )
        dropped = chain.dropped_with(handle) if self.commits is not None else ()
        return grown, (grown, segment, dropped)

    async def latest(self, tenant: str, run_id: str) -> Checkpoint | None:
        """The run's frontier, read (format first) but with the transcript still a handle.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.

        Returns:
            The ``Checkpoint``, or None when the run has none.

        Raises:
            CheckpointFormatError: The frontier is in a format this kit cannot read.
            StoreUnavailableError: A store could not be reached or answered with an error.
        """
        payload = await self.store.latest(tenant, run_id)
        return None if payload is None else decode(payload, run_id=run_id)

    async def resumable(
        self, tenant: str, run_id: str, history: HistoryStore | None = None
    ) -> tuple[Checkpoint, tuple[Message, ...]] | None:
        """The run's frontier and its whole conversation (None without a frontier): in one round
        trip when the ``CommitStore`` is a ``RunReader`` and the transcript is this
        checkpointer's own history, else the frontier and then the transcript.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.
            history: Where the transcript is (default: this checkpointer's history store).

        Returns:
            The frontier and the whole conversation, or None when the run has no frontier.

        Raises:
            CheckpointFormatError: The frontier is in a format this kit cannot read.
            HistoryUnavailableError: The transcript the frontier names does not resolve.
            StoreUnavailableError: A store could not be reached or answered with an error.
        """
        if isinstance(self.commits, RunReader) and history in (None, self.history):
            payload, segments = await self.commits.read_run(tenant, run_id)
            return await self.read_back(run_id, payload, segments, history)
        found = await self.latest(tenant, run_id)
        return None if found is None else (found, await self.transcript(found, history))

    async def read_back(
        self,
        run_id: str,
        payload: bytes | None,
        segments: Mapping[str, bytes],
        history: HistoryStore | None = None,
    ) -> tuple[Checkpoint, tuple[Message, ...]] | None:
        """The frontier and its whole conversation from what a ``RunReader`` read at once (the
        frontier's bytes, None when there is none, and the run's segments).

        Args:
            run_id: The run's id.
            payload: The frontier's bytes, or None.
            segments: The run's segments by handle, as stored.
            history: Where a segment missing from ``segments`` is fetched (default: this
                checkpointer's history store).

        Returns:
            The frontier and the whole conversation, or None without a frontier.

        Raises:
            CheckpointFormatError: The frontier is in a format this kit cannot read.
            HistoryUnavailableError: The transcript the frontier names does not resolve.
        """
        if payload is None:
            return None
        checkpoint = decode(payload, run_id=run_id)
        return checkpoint, await self.transcript(checkpoint, history, listed=segments)

    async def transcript(
        self,
        checkpoint: Checkpoint,
        history: HistoryStore | None = None,
        *,
        listed: Mapping[str, bytes] | None = None,
    ) -> tuple[Message, ...]:
        """The checkpoint's whole conversation, resolving an out-of-line handle (from
        ``listed``, the run's segments as stored, when they were read already).

        Also remembers the chain, so the next write of this run appends after it.

        Args:
            checkpoint: The frontier whose conversation to read.
            history: Where the transcript is (default: this checkpointer's history store).
            listed: The run's segments by handle, as stored, when they were read already.

        Returns:
            The whole conversation, oldest message first.

        Raises:
            HistoryUnavailableError: No history store is configured, a segment is missing or
                does not match its handle, or the message count is not the frontier's.
            StoreUnavailableError: A store could not be reached or answered with an error.
        """
        if checkpoint.history_handle is None:
            return checkpoint.messages
        history = history or self.history
        if history is None:
            raise HistoryUnavailableError(
                run_id=checkpoint.run_id,
                handle=checkpoint.history_handle,
                why="no history store is configured on this worker",
            )
        read = await read_chain(
            history,
            checkpoint.tenant,
            checkpoint.run_id,
            checkpoint.history_handle,
            listed,
            pause_collector=self.pause_collector,
        )
        messages = read.messages
        if len(messages) != checkpoint.history_length:
            raise HistoryUnavailableError(
                run_id=checkpoint.run_id,
                handle=checkpoint.history_handle,
                why=f"it holds {len(messages)} messages, the checkpoint expects "
                f"{checkpoint.history_length}",
            )
        self._chains[(checkpoint.tenant, checkpoint.run_id)] = _Chain.taken_up(
            checkpoint.history_handle, read, compacting=self.commits is not None
        )
        return messages

    def let_go(self, tenant: str, run_id: str) -> None:
        """Drop what this checkpointer keeps of the run between writes (the chain it appends
        to), keeping everything stored. The runner calls it when its tenure of the run ends:
        the chain is tens of kilobytes, a long-lived worker carries thousands of runs, and the
        next tenure takes the chain up again from the store (``transcript``), where another
        worker may have grown it meanwhile.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.

        Raises:
            Nothing: It touches no store.
        """
        self._chains.pop((tenant, run_id), None)

    async def forget(self, tenant: str, run_id: str) -> None:
        """Drop the run's frontier and, with a history store, its transcript.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.

        Raises:
            StoreUnavailableError: A store could not be reached or answered with an error.
        """
        self.let_go(tenant, run_id)
        await self.store.forget(tenant, run_id)
        if self.history is not None:
            await self.history.forget(tenant, run_id)
