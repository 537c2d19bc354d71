"""What a checkpoint costs per boundary, against the raw round trip of the same bytes.

``python3 -m bench.checkpoint_write`` (``make bench``) starts its own throwaway Redis and
PostgreSQL servers with the test tooling (``tests/support``) and a SQLite file in a temporary
folder, measures, prints, and stops them. It is a command, never a test: timings on a shared
2-core machine are evidence to read, not a threshold to assert.

**Inline frontiers** of about 10 KB, 100 KB and 1 MiB (just under the default cap, which a
frontier must fit to be written at all). Each is a booking conversation: a system prompt, a user
request, then turns of an assistant message with a ``search_flights`` call and the tool's JSON
result. At every boundary the conversation is the same message objects as before plus one turn
built afresh, as in the runner, which appends to one list. Per boundary, interleaved:

* ``write`` — ``Checkpointer.write`` as deployed (redaction on, default cap);
* ``write, no masking`` — the same with ``redact=False``: what the kit adds to the store's put
  besides redaction (preparing the frontier, encoding the new turn, splicing the rest);
* ``put`` — the store's ``put`` alone, given the exact bytes that write produced;
* ``raw`` — the same bytes on the same server without the kit, over the same kind of connection:
  ``SET key bytes`` on a client made like the stores' (``agentrun.stores._redis.open_client``: the
  same blocking pool, timeouts and protocol) on Redis; a single-statement upsert into a plain
  ``(key text PRIMARY KEY, value bytea)`` table whose column has the compression the store's
  checkpoint column (also ``bytea``) has on PostgreSQL; ``INSERT OR REPLACE`` in one
  ``BEGIN IMMEDIATE`` transaction on a connection with the store's pragmas on SQLite.

Other baselines for the same bytes, to show what each choice costs: on Redis a ``SET`` through
redis-py's default pool (cheaper to check out than the blocking pool, which waits rather than
fails when all connections are busy) and the same ``SET`` inside an ``EVALSHA`` (why the store
never hands a script the payload); on PostgreSQL an upsert into plain ``bytea`` and ``jsonb``
tables with the defaults (TOAST compresses large values with ``pglz``).

**Out of line**: a 200-turn conversation written with a ``HistoryStore``, one new turn per
boundary. Every byte handed to either store is counted, to show that the total grows with the
transcript and not with its square, as the same run written inline would (see
docs/architecture.md#where-we-go-beyond-the-reference-contract).

Medians and p99 (nearest rank, so with fewer than 100 samples the p99 is the largest) are in
milliseconds. The PostgreSQL test server runs with ``fsync=off`` (see ``tests/support``), so its
numbers leave out the disk flush; SQLite runs with the store's ``synchronous=FULL`` on the
machine's disk, for the store and its raw baseline alike.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Protocol, TypeVar, cast

import asyncpg
import pytest
from redis.asyncio import Redis
from tests.support.postgres_server import PostgresServer, postgres_server
from tests.support.redis_server import redis_server

from agentrun import Backend, open_backend
from agentrun._backend import CheckpointStore
from agentrun._checkpointing import DEFAULT_MAX_BYTES, Checkpointer
from agentrun._frontier import Boundary, Checkpoint, encode, encode_spliced
from agentrun._history import HistoryStore
from agentrun._messages import Message, TextPart, ToolCall, Usage
from agentrun._redaction import Redactor
from agentrun.stores._postgres import EXPECTED_CHECKPOINT_SCHEMA
from agentrun.stores._redis import open_client

T = TypeVar("T")

TENANT = "bench"
FENCE = 1
TARGET = 1.3
"""Issue 4's target: a checkpoint write costs at most 1.3 times the raw round trip."""

SIZES: tuple[tuple[str, int, int], ...] = (
    ("10 KB", 10_000, 500),
    ("100 KB", 100_000, 300),
    ("1 MiB", DEFAULT_MAX_BYTES - 8_192, 200),
)
"""Label, frontier size to reach, timed boundaries. 1 MiB stays a turn's margin under the cap."""
WARMUP = 5
OUT_OF_LINE_TURNS = 200
RESULTS_PER_TURN = 12

PROSE = (
    "the flight from Berlin to Lisbon departs at 09:40 and the return leg is on Friday; "
    "passenger record locator fare class economy baggage allowance two pieces seat 14C window "
    "aisle https://api.example.com/v2/flights?from=BER&to=LIS price EUR 214.90 refundable "
    "def fetch(session, url): return session.get(url, timeout=10).json() # retry on 503 "
    "status confirmed pending cancelled hotel near the station breakfast included transfer "
    "layover 55 minutes gate B12 terminal 1 operated by TAP Air Portugal codeshare LH1166"
)
VOCABULARY = PROSE.split()


# -- the conversation ------------------------------------------------------------------------


def _prose(rng: random.Random, length: int) -> str:
    words: list[str] = []
    size = 0
    while size < length:
        word = rng.choice(VOCABULARY)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:length]


def _opening(rng: random.Random) -> list[Message]:
    return [Message.of("system", _prose(rng, 1_500)), Message.of("user", _prose(rng, 400))]


def _turn(rng: random.Random, index: int) -> tuple[Message, Message]:
    """An assistant message calling a tool, and the tool's JSON result (about 4 KB)."""
    call_id = f"call_{index:06d}"
    call = ToolCall(
        id=call_id,
        name="search_flights",
        arguments={
            "query": _prose(rng, 80),
            "filters": {"max_price_eur": 500, "carriers": ["TP", "LH"], "date": "2025-03-14"},
            "page": index % 7,
        },
    )
    assistant = Message(
        role="assistant", parts=(TextPart(text=_prose(rng, 320)),), tool_calls=(call,)
    )
    offers = [
        {
            "id": f"offer-{index:06d}-{k:02d}",
            "summary": _prose(rng, 200),
            "url": f"https://api.example.com/v2/offers/{index:06d}-{k:02d}",
            "price_eur": 100 + 7 * k,
        }
        for k in range(RESULTS_PER_TURN)
    ]
    result = Message.tool_result(call_id, json.dumps({"offers": offers, "next_page": index + 1}))
    return assistant, result


def _frontier(run_id: str, messages: tuple[Message, ...], iteration: int) -> Checkpoint:
    return Checkpoint(
        run_id=run_id,
        tenant=TENANT,
        agent_name="booking",
        agent_revision="sha256:" + "ab" * 32,
        boundary=Boundary.AFTER_TOOL_RESULT,
        fence=FENCE,
        messages=messages,
        iteration=iteration,
        usage=Usage(input_tokens=1_900 * iteration, output_tokens=160 * iteration),
        cost_micros=2_100 * iteration,
        metadata={"trace_id": f"{iteration:032x}", "deployment": "eu-west-1"},
    )


@dataclass(frozen=True)
class Conversation:
    """A prefix of fixed message objects, and a fresh last turn for each boundary."""

    prefix: tuple[Message, ...]
    turns: int
    seed: int

    @classmethod
    def of_size(cls, size: int, seed: int = 7) -> Conversation:
        """Whole turns while they fit, then the user's request lengthened to make up the rest
        (less a margin: the fresh last turn varies by a few bytes)."""
        rng = random.Random(seed)
        prefix = _opening(rng)
        turns = 0
        while True:
            grown = [*prefix, *_turn(rng, turns)]
            if Conversation(tuple(grown), turns + 1, seed).size() > size:
                break
            prefix, turns = grown, turns + 1
        short = Conversation(tuple(prefix), turns, seed)
        request = Message.of("user", prefix[1].text + " " + _prose(rng, size - short.size() - 65))
        return Conversation((prefix[0], request, *prefix[2:]), turns, seed)

    def size(self) -> int:
        return len(encode(self.boundary("sizing", 0)))

    def boundary(self, run_id: str, index: int) -> Checkpoint:
        rng = random.Random(self.seed * 1_000_003 + index)
        fresh = _turn(rng, self.turns + index)
        return _frontier(run_id, (*self.prefix, *fresh), self.turns + index)


# -- what the kit hands the stores -----------------------------------------------------------


class RecordingCheckpoints:
    """A ``CheckpointStore`` in front of a real one, keeping every payload it was handed."""

    def __init__(self, store: CheckpointStore) -> None:
        self.store = store
        self.payloads: list[bytes] = []

    async def put(self, tenant: str, run_id: str, payload: bytes, *, fence: int) -> None:
        self.payloads.append(payload)
        await self.store.put(tenant, run_id, payload, fence=fence)

    async def latest(self, tenant: str, run_id: str) -> bytes | None:
        return await self.store.latest(tenant, run_id)

    async def forget(self, tenant: str, run_id: str) -> None:
        await self.store.forget(tenant, run_id)


class RecordingHistory:
    """A ``HistoryStore`` in front of a real one, keeping every segment it was handed."""

    def __init__(self, store: HistoryStore) -> None:
        self.store = store
        self.segments: list[bytes] = []

    async def put(self, tenant: str, run_id: str, segment: bytes, *, fence: int) -> str:
        self.segments.append(segment)
        return await self.store.put(tenant, run_id, segment, fence=fence)

    async def fetch(self, tenant: str, run_id: str, handle: str) -> bytes:
        return await self.store.fetch(tenant, run_id, handle)

    async def forget(self, tenant: str, run_id: str) -> None:
        await self.store.forget(tenant, run_id)


# -- the raw round trips ---------------------------------------------------------------------


class RawWriter(Protocol):
    label: str

    async def write(self, key: str, value: bytes) -> None: ...

    async def close(self) -> None: ...


class RawSqlite:
    """``INSERT OR REPLACE`` in one ``BEGIN IMMEDIATE`` transaction, off the event loop on one
    thread, on a connection with the store's pragmas (WAL, ``synchronous=FULL``)."""

    label = "raw INSERT OR REPLACE"

    def __init__(self, path: Path) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-sqlite")
        self._connection = self._executor.submit(self._connect, path).result()

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        connection = sqlite3.connect(path, timeout=5, isolation_level=None)
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = FULL")
        connection.execute(
            "CREATE TABLE IF NOT EXISTS bench_raw (key TEXT PRIMARY KEY, value BLOB NOT NULL)"
        )
        return connection

    def _write(self, rows: Sequence[tuple[str, bytes]]) -> None:
        self._connection.execute("BEGIN IMMEDIATE")
        self._connection.executemany(
            "INSERT OR REPLACE INTO bench_raw (key, value) VALUES (?, ?)", rows
        )
        self._connection.execute("COMMIT")

    async def write(self, key: str, value: bytes) -> None:
        await self.commit(((key, value),))

    async def commit(self, rows: Sequence[tuple[str, bytes]]) -> None:
        """Every row in one transaction: one fsync of the WAL, the floor of a durable write."""
        await asyncio.get_running_loop().run_in_executor(self._executor, self._write, rows)

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self._connection.close)
        self._executor.shutdown()


class RawRedis:
    """``SET key bytes`` on a client, or with ``through_lua`` the same ``SET`` inside an
    ``EVALSHA``."""

    LUA_SET = "return redis.call('SET', KEYS[1], ARGV[1])"

    def __init__(self, client: Redis, label: str, *, through_lua: bool = False) -> None:
        self._client = client
        self._through_lua = through_lua
        self._sha = ""
        self.label = label

    async def write(self, key: str, value: bytes) -> None:
        if not self._through_lua:
            await self._client.set(key, value)
            return
        if not self._sha:
            self._sha = await self._client.script_load(self.LUA_SET)
        await self._client.evalsha(self._sha, 1, key, value)

    async def close(self) -> None:
        await self._client.aclose()


class RawPostgres:
    """A single-statement upsert into a plain ``(key text PRIMARY KEY, value ...)`` table: ``bytea``
    or ``jsonb`` with PostgreSQL's defaults, or (``as_store``) ``bytea``, as the store's
    checkpoint column is, with the compression that column has in this database (the published
    DDL sets it). On one connection held throughout, as the stores keep theirs between calls
    (``open_backend``'s lane): the floor, no pool's acquire and release a write."""

    def __init__(
        self, connection: asyncpg.Connection, column: str, *, as_store: bool = False
    ) -> None:
        self._connection = connection
        self._as_store = as_store
        self._jsonb = column == "jsonb"
        self._table = f"bench_raw_{column}{'_as_store' if as_store else ''}"
        self._upsert = (
            f"INSERT INTO {self._table} (key, value) "
            f"VALUES ($1, {'$2::text::jsonb' if self._jsonb else '$2'}) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        )
        self._created = False
        settings = ", compression as the store's" if as_store else ", defaults"
        self.label = f"upsert into a plain {column} table{settings}"

    async def _create(self) -> None:
        column = "jsonb" if self._jsonb else "bytea"
        await self._connection.execute(
            f"CREATE TABLE IF NOT EXISTS {self._table} "
            f"(key text PRIMARY KEY, value {column} NOT NULL)"
        )
        if self._as_store:
            method = await self._connection.fetchval(
                "SELECT attcompression::text FROM pg_attribute "
                "WHERE attrelid = 'adk_checkpoints'::regclass AND attname = 'payload'"
            )
            names = {"l": "lz4", "p": "pglz", "": None}
            if method not in names:
                raise RuntimeError(f"adk_checkpoints.payload has compression {method!r}")
            if names[method] is not None:
                await self._connection.execute(
                    f"ALTER TABLE {self._table} ALTER COLUMN value SET COMPRESSION {names[method]}"
                )
        self._created = True

    async def write(self, key: str, value: bytes) -> None:
        if not self._created:
            await self._create()
        await self._connection.execute(self._upsert, key, value.decode() if self._jsonb else value)

    async def commit(self, rows: Sequence[tuple[str, bytes]]) -> None:
        """Every row upserted by one statement (``bytea`` only), so in one commit: one WAL flush
        with ``fsync`` on, the floor of a durable write."""
        if self._jsonb:
            raise ValueError("RawPostgres.commit writes bytea: build it with column='bytea'")
        if not self._created:
            await self._create()
        await self._connection.execute(
            f"INSERT INTO {self._table} (key, value) "
            "SELECT * FROM unnest($1::text[], $2::bytea[]) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            [key for key, _ in rows],
            [value for _, value in rows],
        )

    async def close(self) -> None:
        return None


@dataclass
class Target:
    """One server: the kit's backend on it, its raw baseline, and one attribution writer."""

    name: str
    backend: Backend
    raw: RawWriter
    others: tuple[RawWriter, ...] = ()
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)


# -- measuring --------------------------------------------------------------------------------


async def timed(call: Callable[[], Awaitable[T]]) -> tuple[T, float]:
    """The call's result and how long it took, in milliseconds."""
    start = time.perf_counter_ns()
    result = await call()
    return result, (time.perf_counter_ns() - start) / 1e6


def p99(samples: Sequence[float]) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


@dataclass(frozen=True)
class Cell:
    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def p99(self) -> float:
        return p99(self.samples)

    def __str__(self) -> str:
        return f"{self.median:8.3f} {self.p99:8.3f}"


def written(checkpointer: Checkpointer, what: str) -> None:
    """A write that was refused would time nothing: stop the bench instead."""
    if checkpointer.last_error is not None:
        raise RuntimeError(f"{what}: the checkpoint was not written ({checkpointer.last_error})")


@dataclass(frozen=True)
class InlineRow:
    target: str
    size: str
    payload: int
    raw: Cell
    others: tuple[tuple[str, Cell], ...]
    put: Cell
    write: Cell
    unmasked: Cell


async def inline(
    target: Target, label: str, conversation: Conversation, iterations: int
) -> InlineRow:
    recording = RecordingCheckpoints(target.backend.checkpoints)
    checkpointer = Checkpointer(recording)
    unmasking = Checkpointer(target.backend.checkpoints, redact=False)
    store = target.backend.checkpoints
    raw: list[float] = []
    others: list[list[float]] = [[] for _ in target.others]
    put: list[float] = []
    write: list[float] = []
    unmasked: list[float] = []
    gc.collect()
    for index in range(WARMUP + iterations):
        checkpoint = conversation.boundary(f"write-{label}", index)
        _, write_ms = await timed(partial(checkpointer.write, checkpoint))
        written(checkpointer, f"{target.name} {label}")
        payload = recording.payloads.pop()
        plain = checkpoint.model_copy(update={"run_id": f"unmasked-{label}"})
        _, unmasked_ms = await timed(partial(unmasking.write, plain))
        written(unmasking, f"{target.name} {label}, unmasked")
        _, put_ms = await timed(partial(store.put, TENANT, f"put-{label}", payload, fence=FENCE))
        _, raw_ms = await timed(partial(target.raw.write, f"raw-{label}", payload))
        other_ms = [
            (await timed(partial(other.write, f"other-{n}-{label}", payload)))[1]
            for n, other in enumerate(target.others)
        ]
        if index >= WARMUP:
            raw.append(raw_ms)
            put.append(put_ms)
            write.append(write_ms)
            unmasked.append(unmasked_ms)
            for samples, sample in zip(others, other_ms, strict=True):
                samples.append(sample)
    return InlineRow(
        target.name,
        label,
        len(payload),
        Cell(tuple(raw)),
        tuple(
            (other.label, Cell(tuple(samples)))
            for other, samples in zip(target.others, others, strict=True)
        ),
        Cell(tuple(put)),
        Cell(tuple(write)),
        Cell(tuple(unmasked)),
    )


@dataclass(frozen=True)
class InProcessRow:
    size: str
    mask_all: Cell
    persistable: Cell
    encode: Cell


class _Nowhere:
    async def put(self, tenant: str, run_id: str, payload: bytes, *, fence: int) -> None:
        return None

    async def latest(self, tenant: str, run_id: str) -> bytes | None:
        return None

    async def forget(self, tenant: str, run_id: str) -> None:
        return None


async def in_process(label: str, conversation: Conversation, iterations: int) -> InProcessRow:
    """Where ``Checkpointer.write``'s own time goes, with no server: masking the whole transcript
    (what every boundary would pay if nothing were remembered between boundaries), preparing the
    persisted checkpoint at a boundary (masking, copies), and encoding it."""
    redactor = Redactor.build()
    whole = conversation.boundary("in-process", 0).messages
    mask_all = [timed_sync(lambda: redactor.mask_messages(whole))[1] for _ in range(5)]
    checkpointer = Checkpointer(_Nowhere())
    persistable: list[float] = []
    encoding: list[float] = []
    gc.collect()
    for index in range(WARMUP + iterations):
        checkpoint = conversation.boundary("in-process", index)
        (prepared, messages, _), prepare_ms = timed_sync(
            partial(checkpointer._persistable, checkpoint)
        )
        _, encode_ms = timed_sync(partial(encode_spliced, prepared, messages))
        if index >= WARMUP:
            persistable.append(prepare_ms)
            encoding.append(encode_ms)
    return InProcessRow(
        label, Cell(tuple(mask_all)), Cell(tuple(persistable)), Cell(tuple(encoding))
    )


def timed_sync(call: Callable[[], T]) -> tuple[T, float]:
    start = time.perf_counter_ns()
    result = call()
    return result, (time.perf_counter_ns() - start) / 1e6


@dataclass(frozen=True)
class OutOfLineRow:
    target: str
    raw: Cell
    put: Cell
    write: Cell
    segments: tuple[int, ...]
    frontiers: tuple[int, ...]
    transcript: int
    inline_total: int


async def out_of_line(target: Target, turns: int) -> OutOfLineRow:
    """A run of ``turns`` boundaries with the transcript in the history store; then the same
    bytes again through the stores alone (another run id) and raw, two round trips a boundary."""
    checkpoints = RecordingCheckpoints(target.backend.checkpoints)
    history = RecordingHistory(target.backend.history)
    checkpointer = Checkpointer(checkpoints, history=history)
    rng = random.Random(11)
    messages = _opening(rng)
    write: list[float] = []
    inline_total = 0
    gc.collect()
    for index in range(turns):
        messages.extend(_turn(rng, index))
        checkpoint = _frontier("out-of-line", tuple(messages), index + 1)
        _, write_ms = await timed(partial(checkpointer.write, checkpoint))
        written(checkpointer, f"{target.name} out of line, turn {index + 1}")
        write.append(write_ms)
        inline_total += len(encode(checkpoint))
    put: list[float] = []
    raw: list[float] = []
    for index, (segment, frontier) in enumerate(
        zip(history.segments, checkpoints.payloads, strict=True)
    ):

        async def through_stores(segment: bytes = segment, frontier: bytes = frontier) -> None:
            await target.backend.history.put(TENANT, "out-of-line-put", segment, fence=FENCE)
            await target.backend.checkpoints.put(TENANT, "out-of-line-put", frontier, fence=FENCE)

        async def raw_trips(
            segment: bytes = segment, frontier: bytes = frontier, index: int = index
        ) -> None:
            await target.raw.write(f"raw-segment-{index}", segment)
            await target.raw.write("raw-out-of-line", frontier)

        put.append((await timed(through_stores))[1])
        raw.append((await timed(raw_trips))[1])
    return OutOfLineRow(
        target.name,
        Cell(tuple(raw)),
        Cell(tuple(put)),
        Cell(tuple(write)),
        tuple(map(len, history.segments)),
        tuple(map(len, checkpoints.payloads)),
        len(encode(checkpoint)),
        inline_total,
    )


# -- the servers ------------------------------------------------------------------------------


def _postgres_url(server: PostgresServer) -> str:
    url = server.create_database("agentrun_bench")
    server.psql(EXPECTED_CHECKPOINT_SCHEMA, "agentrun_bench")
    return url


@contextlib.asynccontextmanager
async def targets(folder: Path, names: Sequence[str]) -> AsyncIterator[list[Target]]:
    """The servers named, started on loopback, and stopped (by pid) on the way out."""
    with contextlib.ExitStack() as servers:
        async with contextlib.AsyncExitStack() as opened:
            found: list[Target] = []
            for name in names:
                if name == "sqlite":
                    path = folder / "sqlite" / "state.db"
                    backend = await open_backend(f"sqlite:///{path}")
                    opened.push_async_callback(backend.close)
                    raw = RawSqlite(path)
                    opened.push_async_callback(raw.close)
                    found.append(Target("SQLite", backend, raw))
                elif name == "redis":
                    redis = servers.enter_context(redis_server(folder / "redis"))
                    backend = await open_backend(redis.url)
                    opened.push_async_callback(backend.close)
                    own = cast(Redis, await open_client(redis.url))
                    raw_redis = RawRedis(own, "SET on a client like the stores'")
                    others: tuple[RawRedis, ...] = (
                        RawRedis(Redis.from_url(redis.url, protocol=2), "SET, redis-py's own pool"),
                        RawRedis(own, "EVALSHA of a Lua SET", through_lua=True),
                    )
                    opened.push_async_callback(raw_redis.close)
                    opened.push_async_callback(others[0].close)
                    found.append(Target("Redis", backend, raw_redis, others))
                elif name == "postgres":
                    url = _postgres_url(servers.enter_context(postgres_server()))
                    backend = await open_backend(url)
                    opened.push_async_callback(backend.close)
                    held = await asyncpg.connect(url)
                    opened.push_async_callback(held.close)
                    found.append(
                        Target(
                            "PostgreSQL",
                            backend,
                            RawPostgres(held, "bytea", as_store=True),
                            (RawPostgres(held, "bytea"), RawPostgres(held, "jsonb")),
                        )
                    )
            yield found


# -- printing ---------------------------------------------------------------------------------


def ratio(numerator: Cell, denominator: Cell) -> str:
    return f"{numerator.median / denominator.median:5.2f}x"


def print_inline(rows: Sequence[InlineRow]) -> None:
    print("\nInline frontier, per boundary (ms; median p99)")
    header = (
        f"{'server':<11}{'size':>7}{'bytes':>9} | {'raw':>17} | {'store put':>17} | "
        f"{'write':>17} | {'write, no masking':>17} | {'put':>5} {'write':>5} {'unmasked':>8}"
        f" | target {TARGET}x the raw"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        verdict = ", ".join(
            f"{name} {'met' if cell.median <= TARGET * row.raw.median else 'NOT met'}"
            for name, cell in (("put", row.put), ("write", row.write), ("unmasked", row.unmasked))
        )
        print(
            f"{row.target:<11}{row.size:>7}{row.payload:>9} | {row.raw} | {row.put} | "
            f"{row.write} | {row.unmasked} | {ratio(row.put, row.raw)} "
            f"{ratio(row.write, row.raw)} {ratio(row.unmasked, row.raw):>8} | {verdict}"
        )
    print("\nOther baselines for the same bytes (ms; median p99; ratio of raw, and of put, to it)")
    for row in rows:
        for label, cell in row.others:
            print(
                f"{row.target:<11}{row.size:>7}  {label:<40} {cell}  raw {ratio(row.raw, cell)}"
                f"  put {ratio(row.put, cell)}"
            )


def print_in_process(rows: Sequence[InProcessRow]) -> None:
    print("\nInside Checkpointer.write, no server (ms; median p99)")
    print(
        f"{'size':>7} | {'mask whole transcript':>21} | {'prepare (mask, copy)':>20} | "
        f"{'encode':>17}"
    )
    for row in rows:
        print(f"{row.size:>7} | {row.mask_all!s:>21} | {row.persistable!s:>20} | {row.encode}")


def print_out_of_line(rows: Sequence[OutOfLineRow]) -> None:
    print(f"\nOut of line, {OUT_OF_LINE_TURNS} turns, per boundary (ms; median p99)")
    print(
        f"{'server':<11} | {'raw (2 writes)':>17} | {'stores (2 puts)':>17} | "
        f"{'Checkpointer.write':>18} | {'put/raw':>7} {'write/raw':>9}"
    )
    for row in rows:
        print(
            f"{row.target:<11} | {row.raw} | {row.put} | {row.write} | "
            f"{ratio(row.put, row.raw):>7} {ratio(row.write, row.raw):>9}"
        )
    row = rows[0]
    handed = sum(row.segments) + sum(row.frontiers)
    print(f"\nBytes handed to the stores over the {OUT_OF_LINE_TURNS}-turn run")
    print(f"  final transcript, as one inline frontier  {row.transcript:>12,} bytes")
    print(
        f"  out of line: segments {sum(row.segments):,} + frontiers {sum(row.frontiers):,}"
        f"  = {handed:>12,} bytes ({handed / row.transcript:.2f}x the final transcript)"
    )
    print(
        f"  inline, the same run                       {row.inline_total:>12,} bytes "
        f"({row.inline_total / row.transcript:.1f}x the final transcript)"
    )
    step = max(1, len(row.segments) // 4)
    marks = [*range(step - 1, len(row.segments), step)]
    print(
        "  handed per boundary (segment + frontier) at turns "
        + ", ".join(f"{turn + 1}: {row.segments[turn] + row.frontiers[turn]:,}" for turn in marks)
    )


# -- main -------------------------------------------------------------------------------------


def scaled(quick: bool) -> tuple[list[tuple[str, int, int]], dict[str, Conversation]]:
    """``SIZES`` with a tenth of the iterations for ``--quick``, and a conversation per size."""
    sizes = [(label, size, max(10, n // 10) if quick else n) for label, size, n in SIZES]
    return sizes, {label: Conversation.of_size(size) for label, size, _ in sizes}


async def run(names: Sequence[str], quick: bool) -> None:
    started = time.monotonic()
    sizes, conversations = scaled(quick)
    turns = max(20, OUT_OF_LINE_TURNS // 10) if quick else OUT_OF_LINE_TURNS
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-") as folder:
        async with targets(Path(folder), names) as found:
            print(
                f"servers up after {time.monotonic() - started:.1f} s: "
                + ", ".join(t.name for t in found)
            )
            rows = [
                await inline(target, label, conversations[label], n)
                for target in found
                for label, _, n in sizes
            ]
            print_inline(rows)
            print_in_process(
                [await in_process(label, conversations[label], n) for label, _, n in sizes]
            )
            print_out_of_line([await out_of_line(target, turns) for target in found])
    print(f"\ndone in {time.monotonic() - started:.0f} s; servers stopped")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 -m bench.checkpoint_write", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--servers",
        default="sqlite,redis,postgres",
        help="comma-separated subset of sqlite,redis,postgres (default: all three)",
    )
    parser.add_argument("--quick", action="store_true", help="a tenth of the iterations")
    args = parser.parse_args(argv)
    names = chosen_servers(parser, args.servers, ("sqlite", "redis", "postgres"))
    return run_on_servers(run(names, args.quick))


def chosen_servers(parser: argparse.ArgumentParser, listed: str, known: Sequence[str]) -> list[str]:
    """The servers ``--servers`` names, refusing one this bench does not know."""
    names = [name.strip() for name in listed.split(",") if name.strip()]
    unknown = sorted(set(names) - set(known))
    if unknown:
        parser.error(f"unknown servers {unknown}; choose from {', '.join(known)}")
    return names


def run_on_servers(bench: Coroutine[object, object, None]) -> int:
    """Run the bench; 1, with the reason, if the test tooling could not start a server."""
    try:
        asyncio.run(bench)
    except pytest.fail.Exception as missing:
        print(f"bench: a server could not start: {missing}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
