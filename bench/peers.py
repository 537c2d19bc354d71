"""Our checkpoint writes against the peer users would pick instead: LangGraph's checkpointers.

``make bench-peers`` (``hack/bench-peers.sh``) runs this in a virtualenv of its own with
``langgraph-checkpoint-postgres`` and ``langgraph-checkpoint-sqlite`` installed: LangGraph is no
dependency of the project or of its dev environment. It starts a throwaway PostgreSQL server
with the test tooling (``tests/support``) and SQLite files in a temporary folder, measures,
prints, and stops them (by pid). It is a command, never a test: timings on a shared 2-core
machine are evidence to read, not a threshold to assert.

The conversation is ``bench.checkpoint_write``'s booking conversation of about 10 KB, 100 KB and
1 MiB: at every boundary the same message objects plus one turn built afresh. Per boundary,
interleaved, on the same server:

* ``ours`` -- ``Checkpointer.write`` as deployed (redaction on, default cap);
* ``ours, no masking`` -- the same with ``redact=False``, on another run id;
* ``LangGraph`` -- ``AsyncPostgresSaver.aput`` / ``AsyncSqliteSaver.aput`` of the same
  conversation as a LangGraph checkpoint whose ``messages`` channel holds every message as a plain
  dict (``model_dump(mode="json")``, converted once per message object, outside the timing), the
  channel bumped to a new version at every boundary as a graph step does, one thread per size.

Medians and p99 (nearest rank) are in milliseconds; the bytes are what each side wrote for the
last boundary: our payload (``WriteReceipt.size``) and LangGraph's serialized checkpoint (SQLite)
or its ``messages`` blob plus the checkpoint row (PostgreSQL). The PostgreSQL test server runs
with ``fsync=off`` for both sides.

Only SQLite and PostgreSQL: LangGraph's Redis saver (``langgraph-checkpoint-redis``) needs the
RedisJSON and RediSearch modules, which Debian's ``redis-server`` does not have.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import sqlite3
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import asyncpg
from tests.support.postgres_server import postgres_server

from agentrun import Backend, open_backend
from agentrun._checkpointing import Checkpointer
from agentrun._messages import Message
from bench.checkpoint_write import (
    WARMUP,
    Cell,
    Conversation,
    _postgres_url,
    chosen_servers,
    ratio,
    run_on_servers,
    scaled,
    timed,
    written,
)

SERVERS = ("sqlite", "postgres")
REDIS_NOTE = (
    "Redis: not compared. LangGraph's Redis saver (langgraph-checkpoint-redis) needs the "
    "RedisJSON and RediSearch modules, which Debian's redis-server lacks."
)
MISSING = (
    "bench.peers needs LangGraph's checkpointers (langgraph-checkpoint-postgres, "
    "langgraph-checkpoint-sqlite), which the project does not depend on: run `make bench-peers` "
    "(hack/bench-peers.sh), which installs them in a virtualenv of its own"
)
DIFFERENCES = (
    "What each side does that the other does not:",
    "  ours       masks secrets in every new message (not in 'no masking'); fences every write "
    "against a superseded worker (the store compares the run's fence in the same statement); "
    "checks the size cap; keeps only the latest checkpoint of a run (one row, overwritten).",
    "  LangGraph  keeps every checkpoint version (history: a new row, and on PostgreSQL a new "
    "messages blob, at every boundary); serializes with msgpack (JsonPlusSerializer); no "
    "fencing, masking or size cap. A graph step also calls aput_writes for its tasks' writes, "
    "which is not timed here, so its column is a lower bound for a step.",
)


def _langgraph(module: str) -> ModuleType:
    """A LangGraph module, imported only when the bench runs (typed loosely: the main dev
    environment, where mypy checks this file, has no LangGraph)."""
    return importlib.import_module(module)


# -- the conversation as LangGraph holds it ---------------------------------------------------


class AsDicts:
    """Each of our messages as a plain dict, converted once per message object: the prefix is the
    same objects at every boundary, so only the fresh turn is converted (outside the timing)."""

    def __init__(self) -> None:
        self._memo: dict[int, tuple[Message, dict[str, Any]]] = {}

    def __call__(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        kept: dict[int, tuple[Message, dict[str, Any]]] = {}
        for message in messages:
            hit = self._memo.get(id(message))
            if hit is None or hit[0] is not message:
                hit = (message, message.model_dump(mode="json"))
            kept[id(message)] = hit
        self._memo = kept
        return [converted for _, converted in kept.values()]


class GraphThread:
    """One LangGraph thread written as a graph's steps would write it: the ``messages`` channel
    at a new version each step, the parent checkpoint's id in the config."""

    def __init__(self, saver: Any, thread_id: str) -> None:
        self.saver = saver
        self.config: dict[str, Any] = {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ""}
        }
        self.version: Any = None
        self._dicts = AsDicts()
        self._base = _langgraph("langgraph.checkpoint.base")

    def step(self, messages: Sequence[Message], step: int) -> tuple[Any, Any, Any]:
        """The checkpoint, metadata and new versions of the next step (built untimed)."""
        previous, self.version = self.version, self.saver.get_next_version(self.version, None)
        checkpoint = self._base.empty_checkpoint()
        checkpoint["channel_values"] = {"messages": self._dicts(messages)}
        checkpoint["channel_versions"] = {"messages": self.version}
        if previous is not None:
            checkpoint["versions_seen"] = {"agent": {"messages": previous}}
        checkpoint = self._base.create_checkpoint(checkpoint, None, step)
        metadata = {"source": "loop", "step": step, "parents": {}}
        return checkpoint, metadata, {"messages": self.version}

    async def put(self, checkpoint: Any, metadata: Any, versions: Any) -> None:
        self.config = await self.saver.aput(self.config, checkpoint, metadata, versions)

    async def verify(self, messages: Sequence[Message]) -> None:
        """Read the last checkpoint back: it must hold the whole conversation."""
        found = await self.saver.aget_tuple(self.config)
        stored = [] if found is None else found.checkpoint["channel_values"].get("messages", [])
        expected = self._dicts(messages)
        if len(stored) != len(expected) or stored[0] != expected[0] or stored[-1] != expected[-1]:
            raise RuntimeError(
                f"LangGraph stored {len(stored)} messages for a {len(expected)}-message "
                "conversation: the comparison would not be honest"
            )

    @property
    def checkpoint_id(self) -> str:
        return str(self.config["configurable"]["checkpoint_id"])


# -- the servers -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stored:
    """What LangGraph wrote for the last boundary, and what it keeps for the thread."""

    last: int
    rows: int
    kept: int


@dataclass
class Target:
    name: str
    backend: Backend
    unmasked: Backend
    """Where the unmasked writes go: on SQLite a file of their own, so that each of the three
    series pays the WAL checkpoint (every ~4 MB of WAL) at the same cadence; else ``backend``."""
    saver: Any
    stored: Callable[[GraphThread], Awaitable[Stored]]
    note: str = ""


async def _postgres_stored(url: str, thread: GraphThread) -> Stored:
    connection = await asyncpg.connect(url)
    try:
        thread_id = thread.config["configurable"]["thread_id"]
        blob = await connection.fetchval(
            "SELECT length(blob) FROM checkpoint_blobs WHERE thread_id = $1 "
            "AND checkpoint_ns = '' AND channel = 'messages' AND version = $2",
            thread_id,
            thread.version,
        )
        row = await connection.fetchval(
            "SELECT octet_length(checkpoint::text) + octet_length(metadata::text) "
            "FROM checkpoints WHERE thread_id = $1 AND checkpoint_ns = '' AND checkpoint_id = $2",
            thread_id,
            thread.checkpoint_id,
        )
        rows, kept = await connection.fetchrow(
            "SELECT count(*), coalesce(sum(length(blob)), 0) FROM checkpoint_blobs "
            "WHERE thread_id = $1",
            thread_id,
        )
        return Stored(int(blob) + int(row), int(rows), int(kept))
    finally:
        await connection.close()


async def _sqlite_stored(path: Path, thread: GraphThread) -> Stored:
    connection = sqlite3.connect(path)
    try:
        thread_id = thread.config["configurable"]["thread_id"]
        (last,) = connection.execute(
            "SELECT length(checkpoint) + length(metadata) FROM checkpoints "
            "WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
            (thread_id, thread.checkpoint_id),
        ).fetchone()
        rows, kept = connection.execute(
            "SELECT count(*), coalesce(sum(length(checkpoint)), 0) FROM checkpoints "
            "WHERE thread_id = ?",
            (thread_id,),
        ).fetchone()
        return Stored(int(last), int(rows), int(kept))
    finally:
        connection.close()


@contextlib.asynccontextmanager
async def targets(folder: Path, names: Sequence[str]) -> AsyncIterator[list[Target]]:
    """Our backend and LangGraph's saver side by side on each server named; servers started on
    loopback and stopped (by pid) on the way out."""
    with contextlib.ExitStack() as servers:
        async with contextlib.AsyncExitStack() as opened:
            found: list[Target] = []
            for name in names:
                if name == "sqlite":
                    backend = await open_backend(f"sqlite:///{folder / 'sqlite' / 'state.db'}")
                    opened.push_async_callback(backend.close)
                    unmasked = await open_backend(f"sqlite:///{folder / 'unmasked' / 'state.db'}")
                    opened.push_async_callback(unmasked.close)
                    path = folder / "langgraph-sqlite" / "checkpoints.db"
                    path.parent.mkdir(parents=True)
                    saver_class = _langgraph("langgraph.checkpoint.sqlite.aio").AsyncSqliteSaver
                    saver = await opened.enter_async_context(
                        saver_class.from_conn_string(str(path))
                    )
                    await saver.setup()
                    async with saver.conn.execute("PRAGMA synchronous") as cursor:
                        (synchronous,) = await cursor.fetchone()
                    modes = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
                    note = (
                        "SQLite: ours with WAL, synchronous=FULL; LangGraph's connection with WAL, "
                        f"synchronous={modes.get(synchronous, synchronous)}; a file each (ours, "
                        "ours unmasked, LangGraph), same disk."
                    )
                    found.append(
                        Target(
                            "SQLite", backend, unmasked, saver, partial(_sqlite_stored, path), note
                        )
                    )
                elif name == "postgres":
                    server = servers.enter_context(postgres_server())
                    backend = await open_backend(_postgres_url(server))
                    opened.push_async_callback(backend.close)
                    url = server.create_database("langgraph_bench")
                    saver_class = _langgraph("langgraph.checkpoint.postgres.aio").AsyncPostgresSaver
                    saver = await opened.enter_async_context(saver_class.from_conn_string(url))
                    await saver.setup()
                    connection = await asyncpg.connect(url)
                    try:
                        toast = await connection.fetchval("SHOW default_toast_compression")
                    finally:
                        await connection.close()
                    note = (
                        "PostgreSQL: one server (fsync=off), a database each; ours through an "
                        "asyncpg pool, LangGraph through one psycopg connection "
                        "(from_conn_string); TOAST compression: ours lz4 (our DDL), "
                        f"LangGraph's blobs the server's default ({toast})."
                    )
                    found.append(
                        Target(
                            "PostgreSQL",
                            backend,
                            backend,
                            saver,
                            partial(_postgres_stored, url),
                            note,
                        )
                    )
            yield found


# -- measuring ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    target: str
    size: str
    ours_bytes: int
    write: Cell
    unmasked: Cell
    langgraph: Cell
    stored: Stored
    messages: int


async def compare(target: Target, label: str, conversation: Conversation, iterations: int) -> Row:
    checkpointer = Checkpointer(target.backend.checkpoints)
    unmasking = Checkpointer(target.unmasked.checkpoints, redact=False)
    thread = GraphThread(target.saver, f"peers-{label}")
    write: list[float] = []
    unmasked: list[float] = []
    langgraph: list[float] = []
    ours_bytes = 0
    gc.collect()
    for index in range(WARMUP + iterations):
        checkpoint = conversation.boundary(f"peers-{label}", index)
        plain = checkpoint.model_copy(update={"run_id": f"peers-unmasked-{label}"})
        step = thread.step(checkpoint.messages, index)
        receipt, write_ms = await timed(partial(checkpointer.write, checkpoint))
        written(checkpointer, f"{target.name} {label}")
        _, unmasked_ms = await timed(partial(unmasking.write, plain))
        written(unmasking, f"{target.name} {label}, unmasked")
        _, langgraph_ms = await timed(partial(thread.put, *step))
        ours_bytes = receipt.size if receipt is not None else 0
        if index >= WARMUP:
            write.append(write_ms)
            unmasked.append(unmasked_ms)
            langgraph.append(langgraph_ms)
    await thread.verify(checkpoint.messages)
    return Row(
        target.name,
        label,
        ours_bytes,
        Cell(tuple(write)),
        Cell(tuple(unmasked)),
        Cell(tuple(langgraph)),
        await target.stored(thread),
        len(checkpoint.messages),
    )


# -- printing ----------------------------------------------------------------------------------


def print_rows(rows: Sequence[Row], targets: Sequence[Target]) -> None:
    print("\nPer boundary, ours against LangGraph (ms; median p99)")
    header = (
        f"{'server':<11}{'size':>7} | {'ours bytes':>10} {'LG bytes':>9} | {'ours write':>17} | "
        f"{'ours, no masking':>17} | {'LangGraph aput':>17} | {'write/LG':>8} {'unmasked/LG':>11}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row.target:<11}{row.size:>7} | {row.ours_bytes:>10} {row.stored.last:>9} | "
            f"{row.write} | {row.unmasked} | {row.langgraph} | "
            f"{ratio(row.write, row.langgraph):>8} {ratio(row.unmasked, row.langgraph):>11}"
        )
    print("\nWhat LangGraph keeps for each thread after the run (ours: the latest checkpoint only)")
    for row in rows:
        what = "checkpoints" if row.target == "SQLite" else "messages blobs"
        print(
            f"{row.target:<11}{row.size:>7} | {row.stored.rows:>4} {what}, "
            f"{row.stored.kept:>13,} bytes | read back: the last holds all {row.messages} messages"
        )
    print()
    for target in targets:
        print(target.note)
    print(REDIS_NOTE)
    print()
    print("\n".join(DIFFERENCES))


# -- main --------------------------------------------------------------------------------------


async def run(names: Sequence[str], quick: bool) -> None:
    started = time.monotonic()
    sizes, conversations = scaled(quick)
    with tempfile.TemporaryDirectory(prefix="agentrun-bench-peers-") as folder:
        async with targets(Path(folder), names) as found:
            print(
                f"servers up after {time.monotonic() - started:.1f} s: "
                + ", ".join(t.name for t in found)
            )
            rows = []
            for target in found:
                for label, _, n in sizes:
                    rows.append(await compare(target, label, conversations[label], n))
                    print(f"  {target.name} {label}: {n} boundaries", flush=True)
            print_rows(rows, found)
    print(f"\ndone in {time.monotonic() - started:.0f} s; servers stopped")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.peers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--servers",
        default=",".join(SERVERS),
        help="comma-separated subset of sqlite,postgres (default: both; no redis, see above)",
    )
    parser.add_argument("--quick", action="store_true", help="a tenth of the iterations")
    args = parser.parse_args(argv)
    if "redis" in args.servers:
        parser.error(REDIS_NOTE)
    names = chosen_servers(parser, args.servers, SERVERS)
    try:
        for module in ("langgraph.checkpoint.postgres.aio", "langgraph.checkpoint.sqlite.aio"):
            _langgraph(module)
    except ImportError as missing:
        print(f"{MISSING} ({missing})", file=sys.stderr)
        return 2
    return run_on_servers(run(names, args.quick))


if __name__ == "__main__":
    sys.exit(main())
