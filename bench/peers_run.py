"""A whole booking run through ``AgentRunner`` against the same run in a LangGraph graph.

``make bench-peers`` (``hack/bench-peers.sh``) runs this in a virtualenv of its own with
``langgraph`` and its PostgreSQL and SQLite checkpointers (LangGraph is no dependency of the
project). The conversation is ``bench.checkpoint_write``'s booking conversation: per turn the
model answers with a few hundred characters and one ``search_flights`` call, whose JSON result is
about 4 KB; a turn is two durable boundaries on either side (ours: after the model call, after the
tool result; LangGraph: the ``agent`` step and the ``tools`` step). The model and the tool are
scripted and cost nothing, so what the run costs beyond the same run without any checkpointing
is the checkpointing.

* ours -- ``AgentRunner`` as ``on_backend`` builds it (redaction on, transcript out of line, one
  commit per boundary; leases and the ledger on the same store), ``search_flights`` read-only;
* LangGraph -- a ``StateGraph`` of an ``agent`` and a ``tools`` node whose ``messages`` channel
  holds LangChain messages, compiled with ``AsyncPostgresSaver`` / ``AsyncSqliteSaver`` and run
  with ``durability="sync"`` (each step's checkpoint is written before the next step starts, as
  ours is): the default channel (a reducer that appends, the whole list stored at every step)
  and ``DeltaChannel`` (only each step's new messages stored, a full snapshot every 100 updates).

Ours and ``DeltaChannel`` run ``--rounds`` times (3) on every server, alternating, the order
swapped every other round: this machine's speed drifts by more than the gaps measured (the
default channel runs once). Per turn: the time spent checkpointing (ours: ``Checkpointer.write``,
which masks, encodes and commits; LangGraph: its saver's ``aput`` and ``aput_writes``), median
and p99 over every round's turns, and the median of each round's last 20 turns together. Per
run: the sum of that, and the end-to-end time less the same run with no checkpointing at all
(ours: memory stores and no boundary written; LangGraph: no checkpointer). Bytes handed to the
store (ours: frontier and segment of every commit; LangGraph: what its serializer produced),
bytes the store keeps for the run afterwards, and the resume (the median of eleven, each by a
fresh worker): ours ``read_and_plan`` (frontier, whole transcript, the run's records) from a
fresh backend, LangGraph ``aget_state`` on a freshly opened saver (its latest checkpoint, the
channel values, for ``DeltaChannel`` the replayed writes). Everything but the per-turn figures
is the median of the rounds. Ratios are within one run of this command. Beside our resume, the
part of it no store can take away: decoding the transcript already in memory (walking the chain,
verifying, decompressing and validating it; ``decoding_ms``), and of that, parsing the JSON into
plain objects and into validated messages (``parsing_ms``).

PostgreSQL is one server started by the test tooling with ``fsync`` on (as deployed), a database
for each side; SQLite files are WAL with ``synchronous=FULL`` on both sides.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib
import operator
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, TypedDict

import asyncpg
import pydantic_core
from pydantic import JsonValue, TypeAdapter
from tests.support.postgres_server import postgres_server
from tests.support.redis_server import redis_server

from agentrun import open_backend
from agentrun._backend import StoreSet
from agentrun._checkpointing import Checkpointer, CheckpointPolicy, WriteReceipt
from agentrun._commits import BoundaryCommit, CommitStore, RunReader
from agentrun._frontier import Checkpoint, decode
from agentrun._history import (
    CONTEXT_BYTES,
    HistoryStore,
    SegmentForm,
    decode_segment,
    header_length,
    load_chain,
    previous_of,
)
from agentrun._leases import LeasePolicy
from agentrun._messages import Message
from agentrun._resume import read_and_plan
from agentrun.runner import AgentDefinition, AgentRunner, ScriptedProvider, tool
from agentrun.runner._providers.base import ModelReply, Provider
from agentrun.stores._memory import MemoryBackend
from agentrun.stores._postgres import EXPECTED_CHECKPOINT_SCHEMA
from bench.boundaries import TRIPS, counted, stored_bytes
from bench.checkpoint_write import _opening, _turn, chosen_servers, run_on_servers

TURNS = (200, 1000)
QUICK_TURNS = (20, 100)
LAST = 20
ROUNDS = 3
"""Runs of ours and of ``DeltaChannel`` a server, alternating: one run's per-turn median moves
by 15 % from one run to the next on this machine (2026-12-01)."""
WARM_UP_TURNS = 10
RESUMES = 11
"""Fresh workers resuming, per side: the median of 11, as the machine is shared and a resume at
200 turns takes a few ms."""
TENANT = "bench"
SERVERS = ("sqlite", "redis", "postgres")
MISSING = (
    "bench.peers_run needs langgraph and its checkpointers, which the project does not depend "
    "on: run `make bench-peers` (hack/bench-peers.sh), which installs them in a virtualenv of "
    "its own"
)


def _langgraph(module: str) -> ModuleType:
    """A LangGraph module, imported when the bench runs (typed loosely: the main dev
    environment, where mypy checks this file, has no LangGraph)."""
    return importlib.import_module(module)


# -- the conversation ------------------------------------------------------------------------


@dataclass(frozen=True)
class Booking:
    """The scripted conversation: the opening, the model's replies, the tool's results."""

    system: str
    user: str
    replies: tuple[dict[str, JsonValue], ...]
    results: tuple[str, ...]

    @classmethod
    def of(cls, turns: int) -> Booking:
        rng = random.Random(11)
        system, user = _opening(rng)
        replies: list[dict[str, JsonValue]] = []
        results: list[str] = []
        for index in range(turns):
            assistant, result = _turn(rng, index)
            (call,) = assistant.tool_calls
            replies.append(
                {
                    "text": assistant.text,
                    "tool_calls": [{"id": call.id, "name": call.name, "arguments": call.arguments}],
                    "usage": {"input_tokens": 1_900, "output_tokens": 160},
                }
            )
            results.append(result.text)
        replies.append({"text": "Booked.", "usage": {"input_tokens": 1_900, "output_tokens": 5}})
        return cls(system.text, user.text, tuple(replies), tuple(results))

    @property
    def turns(self) -> int:
        return len(self.results)


class Turns:
    """Which turn the run is in (the model call that opens it counts it), and what each turn
    spent checkpointing."""

    def __init__(self) -> None:
        self.current = -1
        self.spent: list[float] = []
        self.handed = 0

    def next(self) -> None:
        self.current += 1
        self._reach(self.current)

    def add(self, seconds: float) -> None:
        """Count ``seconds`` to the current turn (to the first, before the first model call)."""
        turn = max(self.current, 0)
        self._reach(turn)
        self.spent[turn] += seconds

    def _reach(self, turn: int) -> None:
        self.spent.extend([0.0] * (turn + 1 - len(self.spent)))


@dataclass
class Measured:
    """One side's runs (``rounds`` of them, ``pooled``): checkpoint ms per turn, end to end,
    bytes, resume."""

    side: str
    server: str
    turns: int
    per_turn_ms: list[float]
    end_to_end_s: float
    baseline_s: float
    handed: int
    stored: int
    resume_ms: float
    resume_trips: str = ""
    once: tuple[int, int, int] | None = None
    """Ours only: the final transcript written once, as this server keeps it, and zlib -6 of it;
    and how many of the stored bytes are segment headers (``agentrun._history``)."""
    decode_ms: float | None = None
    """Ours only: of ``resume_ms``, decoding the transcript already in memory (``decoding_ms``)."""
    parse_ms: tuple[float, float] | None = None
    """Ours only: of ``decode_ms``, the segments' JSON parsed into plain Python objects, and
    into validated messages (``parsing_ms``)."""
    read_ms: float | None = None
    """Ours on SQLite only: the same rows read bare (``bare_read_ms``), the floor of the read."""
    syncs: float | None = None
    """PostgreSQL only: the server's WAL syncs over the run (``wal_syncs``), its durable
    commits."""
    rounds: int = 1
    """How many runs ``per_turn_ms`` holds, one after the other (``pooled``)."""

    def each_round(self) -> list[list[float]]:
        """``per_turn_ms`` cut into its rounds."""
        return [
            self.per_turn_ms[start : start + self.turns]
            for start in range(0, self.turns * self.rounds, self.turns)
        ]

    @property
    def checkpoint_s(self) -> float:
        """Checkpointing a run, in seconds (the median of the rounds)."""
        return statistics.median(sum(spent) for spent in self.each_round()) / 1000

    @property
    def median_ms(self) -> float:
        return statistics.median(self.per_turn_ms)

    @property
    def p99_ms(self) -> float:
        ordered = sorted(self.per_turn_ms)
        return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]

    @property
    def last_ms(self) -> float:
        """The median of the last ``LAST`` turns of every round."""
        return statistics.median(ms for spent in self.each_round() for ms in spent[-LAST:])


def pooled(rounds: Sequence[Measured]) -> Measured:
    """One side's rounds as one row: every round's turns (``per_turn_ms``, so the medians and
    the p99 are over all of them), and the median of the rounds' end-to-end times, bytes,
    resumes, decoding, reads and WAL syncs."""

    def middle(values: Sequence[float | None]) -> float | None:
        known = [value for value in values if value is not None]
        return statistics.median(known) if known else None

    first = rounds[0]
    if any(len(measured.per_turn_ms) != first.turns for measured in rounds):
        raise ValueError("pooled takes single rounds of one length")
    parsed = [measured.parse_ms for measured in rounds]
    plain = middle([None if times is None else times[0] for times in parsed])
    validated = middle([None if times is None else times[1] for times in parsed])
    return replace(
        first,
        per_turn_ms=[ms for measured in rounds for ms in measured.per_turn_ms],
        rounds=len(rounds),
        end_to_end_s=statistics.median(measured.end_to_end_s for measured in rounds),
        handed=int(statistics.median(measured.handed for measured in rounds)),
        stored=int(statistics.median(measured.stored for measured in rounds)),
        resume_ms=statistics.median(measured.resume_ms for measured in rounds),
        decode_ms=middle([measured.decode_ms for measured in rounds]),
        parse_ms=None if plain is None or validated is None else (plain, validated),
        read_ms=middle([measured.read_ms for measured in rounds]),
        syncs=middle([measured.syncs for measured in rounds]),
    )


# -- ours ------------------------------------------------------------------------------------


class CountingProvider:
    """The scripted model, counting turns."""

    def __init__(self, script: Sequence[dict[str, JsonValue]], turns: Turns) -> None:
        self.inner = ScriptedProvider(script)
        self.turns = turns

    async def complete(
        self,
        *,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[dict[str, JsonValue]],
    ) -> ModelReply:
        self.turns.next()
        return await self.inner.complete(model=model, messages=messages, tools=tools)


class CountingCommits:
    """The backend's ``CommitStore``, counting the bytes each commit hands it."""

    def __init__(self, inner: CommitStore, turns: Turns) -> None:
        self.inner = inner
        self.turns = turns

    async def commit(self, boundary: BoundaryCommit) -> int | None:
        self.turns.handed += len(boundary.frontier) + len(boundary.segment or b"")
        return await self.inner.commit(boundary)


def booking_agent(booking: Booking) -> AgentDefinition:
    results = iter(booking.results)

    @tool(read_only=True)
    async def search_flights(query: str, filters: dict[str, JsonValue], page: int) -> str:
        """Search flights (read-only)."""
        return next(results)

    return AgentDefinition(
        name="booking",
        instructions=booking.system,
        model="scripted",
        tools=(search_flights,),
        max_iterations=booking.turns + 1,
    )


def our_runner(
    backend: StoreSet, booking: Booking, turns: Turns, *, form: SegmentForm | None
) -> AgentRunner:
    """``on_backend``'s runner with the counting provider and commit store, writing segments in
    ``form``; None writes no boundary at all (the baseline)."""
    provider: Provider = CountingProvider(booking.replies, turns)

    async def observed(_: Checkpoint, receipt: WriteReceipt | None, __: Exception | None) -> None:
        if receipt is not None:
            turns.add(receipt.seconds)

    return AgentRunner(
        provider=provider,
        idempotency=backend.idempotency,
        checkpoints=Checkpointer(
            backend.checkpoints,
            CheckpointPolicy(boundaries=frozenset())
            if form is None
            else CheckpointPolicy(segment_form=form),
            history=backend.history,
            masker=backend.masker,
            commits=None if backend.commits is None else CountingCommits(backend.commits, turns),
        ),
        leases=backend.leases,
        ledger=backend.ledger,
        lease_policy=LeasePolicy(),
        holder="bench",
        on_boundary=observed,
    )


async def run_ours(
    backend: StoreSet, booking: Booking, run_id: str, *, form: SegmentForm | None
) -> Turns:
    turns = Turns()
    runner = our_runner(backend, booking, turns, form=form)
    result = await runner.run(booking_agent(booking), booking.user, tenant=TENANT, run_id=run_id)
    if result.status.value != "completed":
        raise RuntimeError(f"our run {run_id} stopped {result.status.value}: {result!r}")
    return turns


async def measure_ours(
    server: str, url: str, booking: Booking, baseline_s: float, form: SegmentForm, round_: int = 0
) -> Measured:
    run_id = f"ours-{booking.turns}-{round_}"
    synced = await wal_syncs(url) if server == "PostgreSQL" else None
    backend = await open_backend(url)
    assert isinstance(backend, StoreSet)
    try:
        gc.collect()
        started = time.perf_counter()
        turns = await run_ours(backend, booking, run_id, form=form)
        end_to_end = time.perf_counter() - started
        stored, once, zlibbed, _ = await stored_bytes(server, backend, url, run_id, form)
        assert isinstance(backend.commits, RunReader)
        payload, segments = await backend.commits.read_run(TENANT, run_id)
        headers = sum(header_length(segment) for segment in segments.values())
        assert payload is not None
        assert backend.history is not None
        decode_ms = await decoding_ms(backend.history, run_id, payload, segments)
        # ZLIB_JSON segments hold a whole ``Segment``'s JSON, not an array of messages.
        parse_ms = None if form is SegmentForm.ZLIB_JSON else parsing_ms(run_id, payload, segments)
    finally:
        await backend.close()
    syncs = None if synced is None else await wal_syncs(url) - synced
    read_ms = (
        bare_read_ms(Path(url.removeprefix("sqlite:///")), run_id) if server == "SQLite" else None
    )
    resumes: list[float] = []
    for _ in range(RESUMES):
        resumed = await open_backend(url)  # a fresh worker: nothing remembered
        assert isinstance(resumed, StoreSet)
        try:
            checkpointer = Checkpointer(
                resumed.checkpoints, history=resumed.history, commits=resumed.commits
            )
            gc.collect()
            with TRIPS.measure() as trips:
                started = time.perf_counter()
                _, messages, _ = await read_and_plan(
                    checkpointer, resumed.idempotency, TENANT, run_id, history=resumed.history
                )
                resumes.append((time.perf_counter() - started) * 1000)
        finally:
            await resumed.close()
        if len(messages) != 3 + 2 * booking.turns:
            raise RuntimeError(f"ours on {server}: resumed {len(messages)} messages")
    resume_ms = statistics.median(resumes)
    return Measured(
        "ours",
        server,
        booking.turns,
        [s * 1000 for s in turns.spent[: booking.turns]],
        end_to_end,
        baseline_s,
        turns.handed,
        stored,
        resume_ms,
        str(trips["round trips"]),
        (once, zlibbed, headers),
        decode_ms,
        parse_ms,
        read_ms,
        syncs,
    )


async def decoding_ms(
    history: HistoryStore, run_id: str, payload: bytes, segments: Mapping[str, bytes]
) -> float:
    """The part of our resume no store can take away: walking, verifying, decompressing and
    validating the transcript already in memory (``load_chain`` on the segments ``read_run``
    returned), the median of as many as resumes."""
    handle = decode(payload, run_id=run_id).history_handle
    assert handle is not None, "ours keeps its transcript out of line"
    spent: list[float] = []
    for _ in range(RESUMES):
        gc.collect()
        started = time.perf_counter()
        decoded = await load_chain(history, TENANT, run_id, handle, segments)
        spent.append((time.perf_counter() - started) * 1000)
        del decoded  # freed after the clock stops: a resumed transcript lives on
    return statistics.median(spent)


def parsing_ms(run_id: str, payload: bytes, segments: Mapping[str, bytes]) -> tuple[float, float]:
    """Of the decoding, what parsing the segments' JSON takes (each already decompressed): into
    plain Python objects (``pydantic_core.from_json``: no models, the least any JSON reader
    pays to hand Python its values) and into the validated messages a resume returns (the
    ``TypeAdapter`` ``agentrun._history`` validates with); the medians of as many as resumes,
    with the collector off as the kit decodes."""
    handle = decode(payload, run_id=run_id).history_handle
    chain: list[str] = []
    while handle is not None:
        chain.append(handle)
        handle = previous_of(run_id, handle, segments[handle])
    bodies: list[bytes] = []
    context = b""
    for handle in reversed(chain):
        _, body = decode_segment(run_id, handle, segments[handle], context)
        bodies.append(body)
        context = (context + body)[-CONTEXT_BYTES:]
    messages = TypeAdapter(tuple[Message, ...])

    def timed(parse: Callable[[bytes], object]) -> float:
        spent: list[float] = []
        for _ in range(RESUMES):
            gc.collect()
            gc.disable()
            try:
                started = time.perf_counter()
                parsed = [parse(body) for body in bodies]
                spent.append((time.perf_counter() - started) * 1000)
            finally:
                gc.enable()
            del parsed
        return statistics.median(spent)

    return timed(pydantic_core.from_json), timed(messages.validate_json)


async def wal_syncs(url: str) -> int:
    """How many times the PostgreSQL server has synced its WAL (``pg_stat_wal.wal_sync``): with
    ``fsync`` and ``synchronous_commit`` on, a transaction that wrote is one sync at its commit
    (a sync may carry several commits that land together; here one side writes at a time). Read
    from a connection of its own once the writer's have closed, which flushes their
    statistics. ``pg_stat_wal.wal_sync`` is PostgreSQL 14-17's (the test tooling runs 15).
    """
    connection = await asyncpg.connect(url)
    try:
        for _ in range(50):  # the closed connections' backends exit, flushing their counts
            others = await connection.fetchval(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            if not others:
                break
            await asyncio.sleep(0.05)
        return int(await connection.fetchval("SELECT wal_sync FROM pg_stat_wal"))
    finally:
        await connection.close()


def bare_read_ms(path: Path, run_id: str) -> float:
    """The floor of our resume's read on SQLite: the run's frontier and segment rows, as a fresh
    worker's store reads them (one transaction, on a thread of its own off the event loop) but
    on a bare ``sqlite3`` connection with nothing of the kit; the median of as many as resumes,
    each on a fresh connection (opened before the clock starts)."""

    def read(connection: sqlite3.Connection) -> int:
        connection.execute("BEGIN")
        try:
            rows = connection.execute(
                "SELECT payload FROM agentrun_checkpoints WHERE tenant = ? AND run_id = ? "
                "UNION ALL SELECT segment FROM agentrun_history WHERE tenant = ? AND run_id = ?",
                (TENANT, run_id, TENANT, run_id),
            ).fetchall()
        finally:
            connection.execute("COMMIT")
        return sum(len(row[0]) for row in rows)

    spent: list[float] = []
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-read") as thread:
        for _ in range(RESUMES):
            connection = thread.submit(sqlite3.connect, path, isolation_level=None).result()
            try:
                started = time.perf_counter()
                if not thread.submit(read, connection).result():
                    raise RuntimeError(f"nothing stored for {run_id} in {path}")
                spent.append((time.perf_counter() - started) * 1000)
            finally:
                thread.submit(connection.close).result()
    return statistics.median(spent)


async def ours_baseline(booking: Booking) -> float:
    """The same run with no checkpoint written, on memory stores."""
    gc.collect()
    started = time.perf_counter()
    await run_ours(MemoryBackend(), booking, "baseline", form=None)
    return time.perf_counter() - started


# -- LangGraph -------------------------------------------------------------------------------


def _append(state: list[Any], writes: Sequence[list[Any]]) -> list[Any]:
    """``DeltaChannel``'s reducer: append every batch (associative, as it must be)."""
    return [*state, *(message for batch in writes for message in batch)]


def graph_of(booking: Booking, delta: bool, turns: Turns) -> Any:
    """The ``agent`` / ``tools`` graph over ``messages``, uncompiled."""
    graph_module = _langgraph("langgraph.graph")
    core = _langgraph("langchain_core.messages")
    channel: Any = (
        _langgraph("langgraph.channels.delta").DeltaChannel(_append) if delta else operator.add
    )

    # Made by call: this module's annotations are strings, which LangGraph could not resolve.
    state_schema = TypedDict("state_schema", {"messages": Annotated[list[Any], channel]})  # noqa: UP013

    replies = iter(booking.replies)
    results = iter(booking.results)

    async def agent(state: Any) -> dict[str, Any]:
        turns.next()
        reply = next(replies)
        calls = reply.get("tool_calls") or []
        assert isinstance(calls, list)
        message = core.AIMessage(
            content=str(reply.get("text", "")),
            tool_calls=[
                {"id": c["id"], "name": c["name"], "args": c["arguments"]}
                for c in calls
                if isinstance(c, dict)
            ],
        )
        return {"messages": [message]}

    async def tools(state: Any) -> dict[str, Any]:
        (call,) = state["messages"][-1].tool_calls
        return {"messages": [core.ToolMessage(content=next(results), tool_call_id=call["id"])]}

    def route(state: Any) -> str:
        return "tools" if state["messages"][-1].tool_calls else graph_module.END

    graph = graph_module.StateGraph(state_schema)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_edge(graph_module.START, "agent")
    graph.add_conditional_edges("agent", route)
    graph.add_edge("tools", "agent")
    return graph


def timed_saver(saver: Any, turns: Turns) -> None:
    """Time the saver's writes into the turn they belong to; count its serializer's bytes."""

    def timing(original: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def call(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                turns.add(time.perf_counter() - started)

        return call

    saver.aput = timing(saver.aput)
    saver.aput_writes = timing(saver.aput_writes)
    dumps = saver.serde.dumps_typed

    def counting(value: Any) -> Any:
        kind, data = dumps(value)
        turns.handed += len(data)
        return kind, data

    saver.serde.dumps_typed = counting


async def run_graph(graph: Any, booking: Booking, checkpointer: Any, thread: str) -> int:
    core = _langgraph("langchain_core.messages")
    compiled = graph.compile(checkpointer=checkpointer)
    config = {
        "configurable": {"thread_id": thread},
        "recursion_limit": 2 * booking.turns + 10,
    }
    kwargs = {"durability": "sync"} if checkpointer is not None else {}
    final = await compiled.ainvoke(
        {"messages": [core.SystemMessage(booking.system), core.HumanMessage(booking.user)]},
        config,
        **kwargs,
    )
    return len(final["messages"])


async def langgraph_baseline(booking: Booking) -> float:
    gc.collect()
    started = time.perf_counter()
    await run_graph(graph_of(booking, False, Turns()), booking, None, "baseline")
    return time.perf_counter() - started


@dataclass(frozen=True)
class Saver:
    """How to open one of LangGraph's savers, and to count what it keeps for a thread."""

    server: str
    open: Callable[[], contextlib.AbstractAsyncContextManager[Any]]
    kept: Callable[[str], Awaitable[int]]
    url: str | None = None
    """PostgreSQL's database, to count its WAL syncs (``wal_syncs``)."""


async def measure_langgraph(
    saver: Saver, booking: Booking, delta: bool, baseline_s: float, round_: int = 0
) -> Measured:
    thread = f"{'delta' if delta else 'default'}-{booking.turns}-{round_}"
    turns = Turns()
    graph = graph_of(booking, delta, turns)
    synced = None if saver.url is None else await wal_syncs(saver.url)
    async with saver.open() as opened:
        timed_saver(opened, turns)
        gc.collect()
        started = time.perf_counter()
        count = await run_graph(graph, booking, opened, thread)
        end_to_end = time.perf_counter() - started
    syncs = None if saver.url is None or synced is None else await wal_syncs(saver.url) - synced
    if count != 3 + 2 * booking.turns:
        raise RuntimeError(f"LangGraph on {saver.server}: the run ended with {count} messages")
    resumes: list[float] = []
    for _ in range(RESUMES):
        async with saver.open() as fresh:  # a fresh worker: a saver of its own
            compiled = graph_of(booking, delta, Turns()).compile(checkpointer=fresh)
            gc.collect()
            started = time.perf_counter()
            state = await compiled.aget_state({"configurable": {"thread_id": thread}})
            resumes.append((time.perf_counter() - started) * 1000)
        if len(state.values["messages"]) != count:
            raise RuntimeError(
                f"LangGraph on {saver.server}: resumed {len(state.values['messages'])} messages"
            )
    resume_ms = statistics.median(resumes)
    return Measured(
        "LangGraph, DeltaChannel" if delta else "LangGraph",
        saver.server,
        booking.turns,
        [s * 1000 for s in turns.spent[: booking.turns]],
        end_to_end,
        baseline_s,
        turns.handed,
        await saver.kept(thread),
        resume_ms,
        syncs=syncs,
    )


def postgres_saver(url: str) -> Saver:
    saver_class = _langgraph("langgraph.checkpoint.postgres.aio").AsyncPostgresSaver

    async def kept(thread: str) -> int:
        connection = await asyncpg.connect(url)
        try:
            total = await connection.fetchval(
                "SELECT (SELECT coalesce(sum(pg_column_size(c.*)), 0) FROM checkpoints c "
                "WHERE thread_id = $1) + (SELECT coalesce(sum(pg_column_size(b.*)), 0) "
                "FROM checkpoint_blobs b WHERE thread_id = $1) + (SELECT "
                "coalesce(sum(pg_column_size(w.*)), 0) FROM checkpoint_writes w "
                "WHERE thread_id = $1)",
                thread,
            )
        finally:
            await connection.close()
        return int(total)

    return Saver("PostgreSQL", lambda: saver_class.from_conn_string(url), kept, url)


def sqlite_saver(path: Path) -> Saver:
    saver_class = _langgraph("langgraph.checkpoint.sqlite.aio").AsyncSqliteSaver

    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[Any]:
        async with saver_class.from_conn_string(str(path)) as saver:
            await saver.setup()
            await saver.conn.execute("PRAGMA journal_mode=WAL")
            await saver.conn.execute("PRAGMA synchronous=FULL")
            yield saver

    async def kept(thread: str) -> int:
        connection = sqlite3.connect(path)
        try:
            (checkpoints,) = connection.execute(
                "SELECT coalesce(sum(length(checkpoint) + length(metadata)), 0) "
                "FROM checkpoints WHERE thread_id = ?",
                (thread,),
            ).fetchone()
            (writes,) = connection.execute(
                "SELECT coalesce(sum(length(value)), 0) FROM writes WHERE thread_id = ?",
                (thread,),
            ).fetchone()
        finally:
            connection.close()
        return int(checkpoints) + int(writes)

    return Saver("SQLite", opened, kept)


# -- servers, runs, printing -----------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    name: str
    ours_url: str
    saver: Saver | None


@contextlib.contextmanager
def servers(folder: Path, names: Sequence[str]) -> Iterator[list[Server]]:
    """Each server named, started on loopback (PostgreSQL with fsync on) and stopped by pid."""
    with contextlib.ExitStack() as started:
        found: list[Server] = []
        for name in names:
            if name == "sqlite":
                (folder / "langgraph").mkdir()
                saver = sqlite_saver(folder / "langgraph" / "checkpoints.db")
                found.append(Server("SQLite", f"sqlite:///{folder / 'ours' / 'state.db'}", saver))
            elif name == "redis":
                found.append(
                    Server("Redis", started.enter_context(redis_server(folder / "redis")).url, None)
                )
            else:
                server = started.enter_context(postgres_server(durable=True))
                ours = server.create_database("agentrun_bench")
                server.psql(EXPECTED_CHECKPOINT_SCHEMA, "agentrun_bench")
                saver = postgres_saver(server.create_database("langgraph_bench"))
                found.append(Server("PostgreSQL", ours, saver))
        yield found


async def warm_up(found: Sequence[Server], form: SegmentForm) -> None:
    """A short run on each side of each server first, unmeasured: the first commits into fresh
    tables, a pool's first connections and LangGraph's first statements cost what no later one
    does, and would otherwise land in whichever side runs first."""
    booking = Booking.of(WARM_UP_TURNS)
    for server in found:
        await measure_ours(server.name, server.ours_url, booking, 0.0, form)
        if server.saver is not None:
            for delta in (False, True):
                await measure_langgraph(server.saver, booking, delta, 0.0)


async def setup_savers(found: Sequence[Server]) -> None:
    for server in found:
        if server.saver is not None:
            async with server.saver.open() as saver:
                await saver.setup()


def print_table(rows: Sequence[Measured], turns: int) -> None:
    print(
        f"\n{turns} turns (2 boundaries a turn); checkpoint ms per turn: median, p99, median of "
        f"the last {LAST}; per run in s"
    )
    header = (
        f"{'server':<11} {'side':<24}| {'median':>7} {'p99':>7} {'last':>7} | {'per run':>7} "
        f"{'e2e-none':>8} | {'handed':>12} {'stored':>12} | {'resume ms':>9} {'trips':>5}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row.server:<11} {row.side:<24}| {row.median_ms:>7.2f} {row.p99_ms:>7.2f} "
            f"{row.last_ms:>7.2f} | {row.checkpoint_s:>7.2f} "
            f"{row.end_to_end_s - row.baseline_s:>8.2f} | {row.handed:>12,} {row.stored:>12,} | "
            f"{row.resume_ms:>9.1f} {row.resume_trips:>5}"
        )
    print("\nRatios, ours / LangGraph's, same server (last-20 median, per run, bytes, resume)")
    peers = [r for r in rows if r.side != "ours"]
    for ours in (r for r in rows if r.side == "ours"):
        for peer in (p for p in peers if p.server == ours.server):
            print(
                f"{ours.server:<11} / {peer.side:<24} per turn {ours.last_ms / peer.last_ms:>5.2f}x"
                f" (median {ours.median_ms / peer.median_ms:.2f}x) | per run "
                f"{ours.checkpoint_s / peer.checkpoint_s:>5.2f}x | handed "
                f"{ours.handed / peer.handed:>6.3f}x | stored {ours.stored / peer.stored:>6.3f}x"
                f" | resume {ours.resume_ms / peer.resume_ms:>5.2f}x"
            )
    synced = [f"{row.side} {row.syncs / turns:.2f}" for row in rows if row.syncs is not None]
    if synced:
        print(
            "Durable commits a turn on PostgreSQL (the whole server's WAL syncs over the run, "
            "setup included, / turns): " + ", ".join(synced)
        )
    print("\nBytes stored, ours, against the final transcript written once (segments + frontier)")
    for row in rows:
        if row.once is None:
            continue
        once, zlibbed, headers = row.once
        how = "lz4 TOAST" if row.server == "PostgreSQL" else "uncompressed"
        print(
            f"{row.server:<11} stored {row.stored:>10,} | once, {how:<12} {once:>10,} "
            f"({row.stored / once:.2f}x) | zlib -6 once {zlibbed:>9,} ({row.stored / zlibbed:.2f}x)"
            f" | segment headers {headers:>8,}, "
            f"without them {(row.stored - headers) / zlibbed:.2f}x"
        )
    if peers:
        fastest = min(peers, key=lambda p: p.resume_ms)
        for ours in (r for r in rows if r.side == "ours"):
            decoding = ours.decode_ms or 0.0
            print(
                f"resume, ours on {ours.server} / LangGraph's fastest ({fastest.side} on "
                f"{fastest.server}, {fastest.resume_ms:.1f} ms): "
                f"{ours.resume_ms / fastest.resume_ms:.2f}x; of it, decoding the transcript in "
                f"memory {decoding:.1f} ms, {decoding / fastest.resume_ms:.2f}x"
            )
            if ours.parse_ms is not None:
                plain, validated = ours.parse_ms
                print(
                    f"  of decoding: the JSON into plain objects {plain:.1f} ms "
                    f"(pydantic_core.from_json), into validated messages {validated:.1f} ms; "
                    f"walking, digests and decompression {decoding - validated:.1f} ms"
                )
            if ours.read_ms is not None:
                floor = ours.read_ms + decoding
                print(
                    f"  floor on {ours.server}: the same rows read bare {ours.read_ms:.1f} ms + "
                    f"decoding {decoding:.1f} ms = {floor:.1f} ms, "
                    f"{floor / fastest.resume_ms:.2f}x"
                )
                if ours.parse_ms is not None:
                    bare = floor - ours.parse_ms[1] + ours.parse_ms[0]
                    print(
                        f"  the same with plain objects for messages, validating nothing: "
                        f"{bare:.1f} ms, {bare / fastest.resume_ms:.2f}x"
                    )


async def measure_server(
    server: Server,
    booking: Booking,
    rounds: int,
    full_at: int,
    form: SegmentForm,
    ours_none: float,
    langgraph_none: float,
) -> list[Measured]:
    """Ours and LangGraph's ``DeltaChannel`` on ``server``, ``rounds`` times each, alternating,
    the order swapped every other round (this machine's speed drifts over seconds by more than
    the gaps measured, and a steady drift would otherwise favour whichever side goes first);
    LangGraph's default channel once, up to ``full_at`` turns (it is far from any line)."""
    ours: list[Measured] = []
    delta: list[Measured] = []
    rows: list[Measured] = []

    async def measured(side: list[Measured], run: Awaitable[Measured]) -> None:
        side.append(await run)
        print(f"  {side[-1].side} on {server.name}: {side[-1].end_to_end_s:.1f} s", flush=True)

    for round_ in range(rounds):
        first_ours = server.saver is None or round_ % 2 == 0
        if first_ours:
            await measured(
                ours, measure_ours(server.name, server.ours_url, booking, ours_none, form, round_)
            )
        if server.saver is not None:
            if round_ == 0 and booking.turns <= full_at:
                await measured(
                    rows, measure_langgraph(server.saver, booking, False, langgraph_none)
                )
            await measured(
                delta, measure_langgraph(server.saver, booking, True, langgraph_none, round_)
            )
        if not first_ours:
            await measured(
                ours, measure_ours(server.name, server.ours_url, booking, ours_none, form, round_)
            )
    return [pooled(ours), *rows, *([pooled(delta)] if delta else [])]


async def run(
    names: Sequence[str],
    turn_counts: Sequence[int],
    full_at: int,
    form: SegmentForm,
    rounds: int,
) -> None:
    began = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="agentrun-bench-peers-run-") as folder,
        servers(Path(folder), names) as found,
        counted(),
    ):
        print(
            f"ours writes its transcript segments as {form.value}; ours and DeltaChannel each run "
            f"{rounds} times, alternating, the order swapped every other round (per turn: every "
            "round's turns; the rest: the median of the rounds)",
            flush=True,
        )
        await setup_savers(found)
        await warm_up(found, form)
        for turns in turn_counts:
            booking = Booking.of(turns)
            ours_none = await ours_baseline(booking)
            langgraph_none = await langgraph_baseline(booking)
            print(
                f"{turns} turns without checkpoints: ours {ours_none:.2f} s, "
                f"LangGraph {langgraph_none:.2f} s",
                flush=True,
            )
            rows: list[Measured] = []
            for server in found:
                rows.extend(
                    await measure_server(
                        server, booking, rounds, full_at, form, ours_none, langgraph_none
                    )
                )
            print_table(rows, turns)
    print(f"\ndone in {time.monotonic() - began:.0f} s; servers stopped")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.peers_run",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--servers", default=",".join(SERVERS), help="of sqlite,redis,postgres")
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_TURNS[0]} and {QUICK_TURNS[1]} turns"
    )
    parser.add_argument(
        "--full-up-to",
        type=int,
        default=TURNS[0],
        help="LangGraph's default channel (the whole list at every step: ~5 GB written at "
        "1,000 turns) only up to this many turns (default %(default)s)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=ROUNDS,
        help="runs of ours and of DeltaChannel on each server, alternating (default %(default)s)",
    )
    parser.add_argument(
        "--segment-form",
        choices=[form.value for form in SegmentForm],
        default=CheckpointPolicy().segment_form.value,
        help="the form ours writes its transcript segments in (default %(default)s)",
    )
    args = parser.parse_args(argv)
    names = chosen_servers(parser, args.servers, SERVERS)
    try:
        for module in ("langgraph.graph", "langgraph.checkpoint.postgres.aio"):
            _langgraph(module)
    except ImportError as missing:
        print(f"{MISSING} ({missing})", file=sys.stderr)
        return 2
    if args.rounds < 1:
        parser.error(f"--rounds is {args.rounds}; give 1 or more")
    turns = QUICK_TURNS if args.quick else TURNS
    form = SegmentForm(args.segment_form)
    return run_on_servers(run(names, turns, max(args.full_up_to, turns[0]), form, args.rounds))


if __name__ == "__main__":
    sys.exit(main())
