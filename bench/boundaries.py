"""Round trips and commits per boundary, resume round trips and time, bytes stored, masking.

``python3 -m bench.boundaries`` (part of ``make bench``) starts its own Redis and PostgreSQL
(``--fsync`` keeps PostgreSQL's fsync on, as deployed; the test servers run without it) and a
SQLite file, and drives a ``Checkpointer`` (redaction on, transcript out of line) through a
booking conversation as the runner does: per turn a boundary after the model call, carrying that
call's charge, and one after the tool result. Each run is made twice on each server:

* ``separate`` — the store contracts one by one (segment, frontier, and the ledger's charge on
  its own), what a ``Checkpointer`` without a ``CommitStore`` does;
* ``one commit`` — ``CommitStore.commit`` (``StoreSet.commits``), what ``on_backend`` uses.

Round trips and commits are counted on the client, below the stores: asyncpg statements (a
statement outside a transaction is a commit; ``BEGIN`` … ``COMMIT`` is one) and its preparing
of a statement the connection has not cached yet (a round trip of its own), Redis writes to the
socket (its commands are atomic one by one: ``atomic writes`` counts those that write), SQLite
calls on the database's thread (``BEGIN IMMEDIATE`` … ``COMMIT`` is a commit). Then a resume
(``read_and_plan``: frontier, whole transcript, the run's records) at 200 and 1,000 turns, with
the frontier and the transcript read at once (``RunReader``, ``listed``) and the transcript walked
one ``fetch`` a segment (``walked``); ``stored`` is how many segments the run keeps (compacted).

Stored bytes after the 200-turn run are the values as the server keeps them (PostgreSQL's
``pg_column_size``, after its lz4 TOAST compression), against the final transcript written once
(the same server's compression of it in one value, and zlib's). Masking: the in-process cost of
a write (no server), redaction off, on, and on without the windowed search (the reference).
Kit CPU: the in-process cost of a write as deployed (redaction on, out of line, charged,
compacted and merged) into a ``CommitStore`` that keeps nothing, over the longer run.
Decoding: the CPU of decoding the shorter run's transcript in memory, run after run, with the
garbage collector as the caller has it (the kit's default) and paused (``pause_collector``).

Timings on a shared 2-core machine are noisy: compare the ratios within one run, not runs.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import random
import statistics
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import asyncpg
import redis.asyncio.connection as redis_connection
from tests.support.chain_faults import RecordingCommits
from tests.support.postgres_server import postgres_server
from tests.support.redis_server import redis_server

from agentrun import open_backend
from agentrun._backend import StoreSet
from agentrun._checkpointing import Checkpointer, CheckpointPolicy
from agentrun._commits import BoundaryCommit, Charge
from agentrun._frontier import Boundary, encode, encode_message
from agentrun._history import (
    HistoryStore,
    SegmentForm,
    append_transcript,
    encode_segment,
    read_chain,
)
from agentrun._messages import Message
from agentrun._redaction import Masker, Redactor, Rule
from agentrun._resume import read_and_plan
from agentrun.stores._memory import MemoryHistoryStore
from agentrun.stores._postgres import EXPECTED_CHECKPOINT_SCHEMA
from agentrun.stores._sqlite._database import Database
from bench.checkpoint_write import (
    FENCE,
    TENANT,
    RawPostgres,
    RawSqlite,
    _frontier,
    _opening,
    _turn,
    chosen_servers,
)
from bench.checkpoint_write import run_on_servers as run_bench

TURNS = (200, 1000)
CHARGE_MICROS = 1_234


# -- counting below the stores ----------------------------------------------------------------


class Trips:
    """Round trips, commits and writing commands counted while ``counting``."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.counting = False

    def add(self, what: str, n: int = 1) -> None:
        if self.counting:
            self.counts[what] += n

    @contextlib.contextmanager
    def measure(self) -> Iterator[Counter[str]]:
        self.counts = Counter()
        self.counting = True
        try:
            yield self.counts
        finally:
            self.counting = False


TRIPS = Trips()
_WRITES = {b"SET", b"EVALSHA", b"EVAL", b"HSET", b"DEL", b"INCRBY"}


@contextlib.contextmanager
def counted() -> Iterator[None]:
    """Patch the three drivers' calls to count round trips and commits, and restore them."""
    patched: list[tuple[object, str, object]] = []

    def patch(owner: object, name: str, wrapper: Any) -> None:
        original = getattr(owner, name)
        patched.append((owner, name, original))
        setattr(owner, name, wrapper(original))

    def statement(original: Any) -> Any:
        async def call(self: asyncpg.Connection, query: str, *args: Any, **kw: Any) -> Any:
            TRIPS.add("round trips")
            if not self.is_in_transaction():
                TRIPS.add("commits")
            return await original(self, query, *args, **kw)

        return call

    for name in ("execute", "fetch", "fetchrow", "fetchval"):
        patch(asyncpg.connection.Connection, name, statement)

    def prepared(original: Any) -> Any:
        # asyncpg prepares a statement a connection has not cached yet (Parse and Describe,
        # answered before it binds): a round trip before the statement's own.
        async def call(self: asyncpg.Connection, query: str, *args: Any, **kw: Any) -> Any:
            record_class = kw.get("record_class") or self._protocol.get_record_class()
            key = (query, record_class, kw.get("ignore_custom_codec", False))
            if not kw.get("use_cache", True) or self._stmt_cache.get(key) is None:
                TRIPS.add("round trips")
            return await original(self, query, *args, **kw)

        return call

    patch(asyncpg.connection.Connection, "_get_statement", prepared)

    def sent(original: Any) -> Any:
        async def call(self: Any, *args: Any, **kw: Any) -> Any:
            TRIPS.add("round trips")
            return await original(self, *args, **kw)

        return call

    def packed(original: Any) -> Any:
        def call(self: Any, *args: Any) -> Any:
            name = args[0] if isinstance(args[0], bytes) else str(args[0]).encode()
            if name.upper() in _WRITES:
                TRIPS.add("commits")
            return original(self, *args)

        return call

    patch(redis_connection.AbstractConnection, "send_packed_command", sent)
    patch(redis_connection.AbstractConnection, "pack_command", packed)

    def hop(kind: str) -> Any:
        def wrap(original: Any) -> Any:
            async def call(self: Database, *args: Any, **kw: Any) -> Any:
                TRIPS.add("round trips")
                if kind == "write":
                    TRIPS.add("commits")
                return await original(self, *args, **kw)

            return call

        return wrap

    patch(Database, "read", hop("read"))
    patch(Database, "write", hop("write"))
    try:
        yield
    finally:
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)


# -- the runs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class WriteRow:
    server: str
    mode: str
    turns: int
    per_boundary: dict[str, float]
    per_model_boundary: dict[str, float]
    median_ms: float
    p99_ms: float


@dataclass(frozen=True)
class ResumeRow:
    server: str
    turns: int
    segments: int
    listed_trips: int
    listed_ms: float
    walked_trips: int
    walked_ms: float


class Walking:
    """A history store without ``fetch_all``: the transcript is walked a ``fetch`` a segment."""

    def __init__(self, inner: HistoryStore) -> None:
        self.inner = inner

    async def put(self, tenant: str, run_id: str, segment: bytes, *, fence: int) -> str:
        return await self.inner.put(tenant, run_id, segment, fence=fence)

    async def fetch(self, tenant: str, run_id: str, handle: str) -> bytes:
        return await self.inner.fetch(tenant, run_id, handle)

    async def forget(self, tenant: str, run_id: str) -> None:
        await self.inner.forget(tenant, run_id)


KEYWORDS = '"api_key_hint": "rotate the api_key monthly", "secret_scope": "booking", '
"""Fields whose names hold the assignment rule's keywords, as many tools' JSON has: in each
tool result of the ``keywords`` conversation, so that rule is searched at every boundary."""


def conversation(
    turns: int, *, keywords: bool = False
) -> Iterator[tuple[int, tuple[Message, ...], tuple[Message, ...]]]:
    """Per turn: the conversation after the model's reply, and after the tool's result."""
    rng = random.Random(11)
    messages = _opening(rng)
    for index in range(turns):
        reply, result = _turn(rng, index)
        if keywords:
            text = result.text.replace('"next_page"', KEYWORDS + '"next_page"')
            result = Message.tool_result(result.tool_call_id or "", text)
        messages.append(reply)
        after_model = tuple(messages)
        messages.append(result)
        yield index, after_model, tuple(messages)


async def write_run(
    server: str,
    backend: StoreSet,
    run_id: str,
    turns: int,
    *,
    whole: bool,
    form: SegmentForm,
    recording: RecordingCommits | None = None,
) -> WriteRow:
    checkpointer = Checkpointer(
        backend.checkpoints,
        CheckpointPolicy(segment_form=form),
        history=backend.history,
        masker=backend.masker,
        commits=(recording or backend.commits) if whole else None,
    )
    per_boundary: Counter[str] = Counter()
    per_model: Counter[str] = Counter()
    times: list[float] = []
    gc.collect()
    for index, after_model, after_tool in conversation(turns):
        charge = Charge(f"model:{index}", CHARGE_MICROS)
        for boundary, messages in (
            (Boundary.AFTER_MODEL_CALL, after_model),
            (Boundary.AFTER_TOOL_RESULT, after_tool),
        ):
            checkpoint = _frontier(run_id, messages, index + 1).model_copy(
                update={"boundary": boundary}
            )
            with TRIPS.measure() as counts:
                started = time.perf_counter()
                if boundary is Boundary.AFTER_MODEL_CALL and not whole:
                    await backend.ledger.charge(
                        TENANT, run_id, charge.charge_id, charge.micros, budget=None, fence=FENCE
                    )
                model_charge = charge if boundary is Boundary.AFTER_MODEL_CALL and whole else None
                receipt = await checkpointer.write(checkpoint, charge=model_charge)
                times.append((time.perf_counter() - started) * 1000)
            if receipt is None:
                raise RuntimeError(f"{server}: a write failed: {checkpointer.last_error!r}")
            per_boundary.update(counts)
            if boundary is Boundary.AFTER_MODEL_CALL:
                per_model.update(counts)
    spent = await backend.ledger.spent(TENANT, run_id)
    if spent != turns * CHARGE_MICROS:
        raise RuntimeError(f"{server}: the ledger says {spent}, not {turns * CHARGE_MICROS}")
    ordered = sorted(times)
    return WriteRow(
        server,
        "one commit" if whole else "separate",
        turns,
        {k: v / (2 * turns) for k, v in per_boundary.items()},
        {k: v / turns for k, v in per_model.items()},
        statistics.median(times),
        ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
    )


class RawCommitter(Protocol):
    async def commit(self, rows: Sequence[tuple[str, bytes]]) -> None: ...

    async def close(self) -> None: ...


async def raw_commits(
    server: str, raw: RawCommitter, commits: Sequence[BoundaryCommit]
) -> WriteRow:
    """The same boundaries' bytes (segment and frontier) each in one transaction without the
    kit: on SQLite one ``BEGIN IMMEDIATE`` on a bare ``sqlite3`` connection with the store's
    pragmas, in the same file; on PostgreSQL one upsert statement of both rows on one asyncpg
    connection held throughout (as the stores keep one between calls), into a ``bytea`` table
    compressed as the store's. What one durable commit costs here, the floor of a boundary."""
    times: list[float] = []
    try:
        for index, boundary in enumerate(commits):
            rows = [("frontier", boundary.frontier)]
            if boundary.segment is not None:
                rows.append((f"segment-{index}", boundary.segment))
            started = time.perf_counter()
            await raw.commit(rows)
            times.append((time.perf_counter() - started) * 1000)
    finally:
        await raw.close()
    ordered = sorted(times)
    counts = {"round trips": 1.0, "commits": 1.0}
    return WriteRow(
        server,
        "raw commit",
        len(commits) // 2,
        counts,
        counts,
        statistics.median(times),
        ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
    )


async def resume_run(server: str, backend: StoreSet, run_id: str, turns: int) -> ResumeRow:
    measured: list[tuple[int, float]] = []
    for history, boundaries in (
        (backend.history, backend.commits),
        (Walking(backend.history), None),
    ):
        checkpointer = Checkpointer(backend.checkpoints, history=history, commits=boundaries)
        with TRIPS.measure() as counts:
            started = time.perf_counter()
            _, messages, _ = await read_and_plan(
                checkpointer, backend.idempotency, TENANT, run_id, history=history
            )
            elapsed = (time.perf_counter() - started) * 1000
        if len(messages) != 2 + 2 * turns:
            raise RuntimeError(f"{server}: resumed {len(messages)} messages")
        measured.append((counts["round trips"], elapsed))
    stored = await backend.history.fetch_all(TENANT, run_id)  # type: ignore[attr-defined]
    return ResumeRow(server, turns, len(stored), *measured[0], *measured[1])


# -- bytes stored -----------------------------------------------------------------------------


async def stored_bytes(
    server: str, backend: StoreSet, url: str, run_id: str, form: SegmentForm
) -> tuple[int, int, int, int]:
    """The run's segments and frontier as the server keeps them; the final transcript written
    once as one value (compressed as the server compresses the store's columns); zlib's
    compression of it; and the floor of a chain: the whole transcript as one segment, beside the
    frontier as kept."""
    checkpointer = Checkpointer(backend.checkpoints, history=backend.history)
    latest = await checkpointer.latest(TENANT, run_id)
    assert latest is not None
    messages = await checkpointer.transcript(latest)
    transcript = encode(
        latest.model_copy(
            update={"messages": messages, "history_handle": None, "history_length": 0}
        )
    )
    alone, _ = encode_segment(None, [encode_message(message) for message in messages], form=form)
    if server != "PostgreSQL":
        listed = await backend.history.fetch_all(TENANT, run_id)  # type: ignore[attr-defined]
        frontier = await backend.checkpoints.latest(TENANT, run_id) or b""
        kept = sum(map(len, listed.values())) + len(frontier)
        zlibbed = len(zlib.compress(transcript, 6))
        return kept, len(transcript), zlibbed, len(alone) + len(frontier)
    connection = await asyncpg.connect(url)
    try:
        segments = await connection.fetchval(
            "SELECT sum(pg_column_size(segment)) FROM adk_history_segments "
            "WHERE tenant = $1 AND run_id = $2",
            TENANT,
            run_id,
        )
        frontier = await connection.fetchval(
            "SELECT pg_column_size(payload) FROM adk_checkpoints WHERE tenant = $1 AND run_id = $2",
            TENANT,
            run_id,
        )
        await connection.execute("CREATE TEMP TABLE once (v bytea COMPRESSION lz4)")
        await connection.execute("INSERT INTO once VALUES ($1)", transcript)
        once = await connection.fetchval("SELECT pg_column_size(v) FROM once")
    finally:
        await connection.close()
    zlibbed = len(zlib.compress(transcript, 6))
    return int(segments) + int(frontier), int(once), zlibbed, len(alone) + int(frontier)


# -- masking ----------------------------------------------------------------------------------


class _Nowhere:
    async def put(self, tenant: str, run_id: str, payload: bytes, *, fence: int) -> None:
        return None

    async def latest(self, tenant: str, run_id: str) -> bytes | None:
        return None

    async def forget(self, tenant: str, run_id: str) -> None:
        return None


async def masking(turns: int) -> dict[tuple[str, str], float]:
    """Median ms of an in-process ``Checkpointer.write`` (inline, no server) per boundary, for
    the plain conversation and one whose tool results hold the assignment rule's keywords."""
    built = Redactor.build()
    reference = Redactor(tuple(Rule(rule.pattern, rule.literals) for rule in built.rules))
    maskers = {
        "redaction off": Masker(None),
        "redaction on (windowed)": Masker(built),
        "redaction on (reference, unwindowed)": Masker(reference),
    }
    medians: dict[tuple[str, str], float] = {}
    for keywords in (False, True):
        for label, masker in maskers.items():
            checkpointer = Checkpointer(_Nowhere(), masker=masker)
            times: list[float] = []
            for index, after_model, after_tool in conversation(turns, keywords=keywords):
                for messages in (after_model, after_tool):
                    checkpoint = _frontier("masking", messages, index + 1)
                    started = time.perf_counter()
                    await checkpointer.write(checkpoint)
                    times.append((time.perf_counter() - started) * 1000)
            medians[("keywords in tool JSON" if keywords else "plain", label)] = statistics.median(
                times
            )
    return medians


class _Discarding:
    """A ``CommitStore`` that keeps nothing: what is left of a write is the kit's own CPU."""

    async def commit(self, boundary: BoundaryCommit) -> int | None:
        return None if boundary.charge is None else CHARGE_MICROS


class _NoSegments:
    async def put(self, tenant: str, run_id: str, segment: bytes, *, fence: int) -> str:
        raise AssertionError("a Checkpointer with a CommitStore puts no segment on its own")

    async def fetch(self, tenant: str, run_id: str, handle: str) -> bytes:
        raise AssertionError("nothing is read back")

    async def forget(self, tenant: str, run_id: str) -> None:
        return None


async def kit_cpu(turns: int, form: SegmentForm) -> tuple[float, float]:
    """Median and mean ms of an in-process ``Checkpointer.write`` per boundary as deployed
    (redaction on, the transcript out of line, a charge after each model call, compacted and
    merged as the ``Checkpointer`` does) into a ``CommitStore`` that keeps nothing: the kit's
    CPU in a boundary."""
    checkpointer = Checkpointer(
        _Nowhere(),
        CheckpointPolicy(segment_form=form),
        masker=Masker.build(()),
        history=_NoSegments(),
        commits=_Discarding(),
    )
    times: list[float] = []
    gc.collect()
    for index, after_model, after_tool in conversation(turns):
        for boundary, messages in (
            (Boundary.AFTER_MODEL_CALL, after_model),
            (Boundary.AFTER_TOOL_RESULT, after_tool),
        ):
            checkpoint = _frontier("kit-cpu", messages, index + 1).model_copy(
                update={"boundary": boundary}
            )
            charge = (
                Charge(f"model:{index}", CHARGE_MICROS)
                if boundary is Boundary.AFTER_MODEL_CALL
                else None
            )
            started = time.perf_counter()
            receipt = await checkpointer.write(checkpoint, charge=charge)
            times.append((time.perf_counter() - started) * 1000)
            if receipt is None:
                raise RuntimeError(f"an in-process write failed: {checkpointer.last_error!r}")
    return statistics.median(times), statistics.fmean(times)


# -- servers and printing ---------------------------------------------------------------------


DECODES = 300
"""Decodes timed per row of ``decoding``."""


async def decoding(turns: int) -> dict[str, tuple[float, float, float]]:
    """The CPU (this thread's time, which other processes on the machine barely move) of
    decoding the ``turns``-turn transcript from its segments already read (16 messages a
    segment, each compressed alone: ``append_transcript``), as a worker resuming run after run
    does: the last 20 transcripts kept alive, ``DECODES`` times, with the collector as the caller
    has it (the kit's default) and paused while decoding (``pause_collector``, the caller's
    choice). Per row: the median and mean of the decoding alone, and the whole loop's CPU a
    decode, which also counts the collections a pause only moves to after the decoding."""
    *_, (_, _, messages) = conversation(turns)
    store = MemoryHistoryStore()
    head: str | None = None
    for at in range(0, len(messages), 16):
        head = await append_transcript(
            store, TENANT, "decoded", previous=head, messages=messages[at : at + 16], fence=0
        )
    assert head is not None
    listed = await store.fetch_all(TENANT, "decoded")
    rows: dict[str, tuple[float, float, float]] = {}
    for label, paused in (("collector as the caller has it", False), ("paused (opt-in)", True)):
        kept: list[object] = []
        spent: list[float] = []
        gc.collect()
        whole = time.thread_time()
        for _ in range(DECODES):
            started = time.thread_time()
            read = await read_chain(store, TENANT, "decoded", head, listed, pause_collector=paused)
            spent.append((time.thread_time() - started) * 1000)
            kept.append(read.messages)
            del kept[:-20]
        per_decode = (time.thread_time() - whole) * 1000 / DECODES
        rows[label] = (statistics.median(spent), statistics.mean(spent), per_decode)
    return rows


@contextlib.asynccontextmanager
async def servers(
    folder: Path, names: Sequence[str], fsync: bool
) -> AsyncIterator[list[tuple[str, StoreSet, str]]]:
    with contextlib.ExitStack() as started:
        async with contextlib.AsyncExitStack() as opened:
            found: list[tuple[str, StoreSet, str]] = []
            for name in names:
                if name == "sqlite":
                    url = f"sqlite:///{folder / 'state.db'}"
                    label = "SQLite"
                elif name == "redis":
                    url = started.enter_context(redis_server(folder / "redis")).url
                    label = "Redis"
                else:
                    server = started.enter_context(postgres_server(durable=fsync))
                    url = server.create_database("agentrun_bench")
                    server.psql(EXPECTED_CHECKPOINT_SCHEMA, "agentrun_bench")
                    label = "PostgreSQL"
                backend = await open_backend(url)
                assert isinstance(backend, StoreSet)
                opened.push_async_callback(backend.close)
                found.append((label, backend, url))
            yield found


def _cells(counts: Mapping[str, float]) -> str:
    return f"{counts.get('round trips', 0):>5.1f} {counts.get('commits', 0):>7.1f}"


async def run(names: Sequence[str], fsync: bool, quick: bool, form: SegmentForm) -> None:
    began = time.monotonic()
    turns = (20, 100) if quick else TURNS
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-") as folder, counted():
        async with servers(Path(folder), names, fsync) as found:
            writes: list[WriteRow] = []
            resumes: list[ResumeRow] = []
            stored: list[tuple[str, int, int, int, int]] = []
            for label, backend, url in found:
                assert backend.commits is not None
                recording = RecordingCommits(backend.commits)
                for whole in (False, True):
                    run_id = f"{'whole' if whole else 'separate'}-{turns[0]}"
                    writes.append(
                        await write_run(
                            label,
                            backend,
                            run_id,
                            turns[0],
                            whole=whole,
                            form=form,
                            recording=recording,
                        )
                    )
                if label == "SQLite":
                    raw: RawCommitter = RawSqlite(Path(folder) / "state.db")
                    writes.append(await raw_commits(label, raw, recording.handed))
                elif label == "PostgreSQL":
                    held = await asyncpg.connect(url)
                    try:
                        raw = RawPostgres(held, "bytea", as_store=True)
                        writes.append(await raw_commits(label, raw, recording.handed))
                    finally:
                        await held.close()
                resumes.append(await resume_run(label, backend, f"whole-{turns[0]}", turns[0]))
                stored.append(
                    (label, *await stored_bytes(label, backend, url, f"whole-{turns[0]}", form))
                )
                await write_run(
                    label, backend, f"whole-{turns[1]}", turns[1], whole=True, form=form
                )
                resumes.append(await resume_run(label, backend, f"whole-{turns[1]}", turns[1]))
            masked = await masking(turns[0])
            cpu = await kit_cpu(turns[1], form)
            decoded = await decoding(turns[0])
    fsync_note = "fsync on" if fsync else "fsync off (test server)"
    print(
        f"\nPer boundary, {turns[0]} turns (2 boundaries a turn), segments {form.value}; "
        f"PostgreSQL {fsync_note}"
    )
    header = (
        f"{'server':<11} {'writes':<11} | {'every boundary':>13} | {'after a model call':>18} | "
        f"{'ms median':>9} {'p99':>7}"
    )
    print(header)
    print(f"{'':<11} {'':<11} | {'trips commits':>13} | {'trips commits':>18} |")
    print("-" * len(header))
    for row in writes:
        print(
            f"{row.server:<11} {row.mode:<11} | {_cells(row.per_boundary):>13} | "
            f"{_cells(row.per_model_boundary):>18} | {row.median_ms:>9.2f} {row.p99_ms:>7.2f}"
        )
    print("(Redis: commits = commands that write, each atomic; the frontier is staged by a SET)")
    print(
        "(SQLite raw commit: the same segment and frontier bytes, one BEGIN IMMEDIATE ... COMMIT "
        "a boundary\n on a bare sqlite3 connection, WAL, synchronous=FULL: the fsync floor)"
    )
    print(
        "(PostgreSQL raw commit: the same bytes, one upsert statement a boundary on one asyncpg "
        f"connection\n held throughout, bytea compressed as the store's; {fsync_note}: the commit "
        "floor)"
    )
    print("\nResume: frontier + whole transcript + the run's records (read_and_plan)")
    print(
        f"{'server':<11} {'turns':>5} {'stored':>8} | {'listed: trips':>13} {'ms':>8} | "
        f"{'walked: trips':>13} {'ms':>8} | {'walked/listed':>13}"
    )
    for resumed in resumes:
        print(
            f"{resumed.server:<11} {resumed.turns:>5} {resumed.segments:>8} | "
            f"{resumed.listed_trips:>13} {resumed.listed_ms:>8.1f} | "
            f"{resumed.walked_trips:>13} {resumed.walked_ms:>8.1f} | "
            f"{resumed.walked_ms / resumed.listed_ms:>12.1f}x"
        )
    print(
        f"\nDecoding the {turns[0]}-turn transcript in memory, steady state, CPU ms "
        f"(median, mean; whole loop a decode), {DECODES} decodes"
    )
    for label, (median, mean, loop_ms) in decoded.items():
        print(f"  {label:<32} {median:>7.2f} {mean:>7.2f}   {loop_ms:>7.2f}")
    print(f"\nBytes stored after the {turns[0]}-turn run (segments + frontier, as kept)")
    for label, kept, once, zlibbed, alone in stored:
        how = "lz4 TOAST" if label == "PostgreSQL" else "uncompressed"
        print(
            f"{label:<11} stored {kept:>10,} | final transcript once, {how:<12} {once:>10,} "
            f"({kept / once:.2f}x) | zlib -6 of it {zlibbed:>9,} ({kept / zlibbed:.3f}x) "
            f"| as one segment + frontier {alone:>9,} ({alone / zlibbed:.3f}x)"
        )
    print("\nMasking: in-process Checkpointer.write per boundary, inline, no server (ms median)")
    for (kind, label), median in masked.items():
        off = masked[(kind, "redaction off")]
        print(f"  {kind:<22} {label:<38} {median:>7.3f}  ({median / off:.2f}x redaction off)")
    print(
        f"\nKit CPU: in-process Checkpointer.write per boundary as deployed, {turns[1]} turns, "
        f"a CommitStore that keeps nothing (ms): median {cpu[0]:.3f}, mean {cpu[1]:.3f}"
    )
    print(f"\ndone in {time.monotonic() - began:.0f} s; servers stopped")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m bench.boundaries", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--servers", default="sqlite,redis,postgres")
    parser.add_argument("--fsync", action="store_true", help="PostgreSQL with fsync on")
    parser.add_argument("--quick", action="store_true", help="20 and 100 turns")
    parser.add_argument(
        "--segment-form",
        choices=[form.value for form in SegmentForm],
        default=CheckpointPolicy().segment_form.value,
        help="the form transcript segments are written in (default %(default)s)",
    )
    args = parser.parse_args(argv)
    names = chosen_servers(parser, args.servers, ("sqlite", "redis", "postgres"))
    return run_bench(run(names, args.fsync, args.quick, SegmentForm(args.segment_form)))


if __name__ == "__main__":
    raise SystemExit(main())
