"""The connection ``open_backend``'s stores keep between calls (``_lane``): kept while calls come
one after another, handed back to the pool whenever a call on it fails, is cancelled, finds it
closed, or the backend closes, and never kept for a pool the application owns."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import pytest

from agentrun._backend import StoreSet
from agentrun._errors import StoreRefusedError, StoreUnavailableError
from agentrun._storecore.checked import CheckedCheckpoints
from agentrun.stores._postgres import PostgresCheckpointStore, open_backend
from agentrun.stores._postgres._lane import Lane, _closed
from agentrun.stores._postgres._shared import Database, create_pool


def _database(backend: StoreSet) -> Database:
    """The ``Database`` of the backend's checkpoint store (every store of it shares the pool)."""
    checked = backend.checkpoints
    assert isinstance(checked, CheckedCheckpoints)
    assert isinstance(checked.inner, PostgresCheckpointStore)
    return checked.inner._db


async def _pid(database: Database) -> int:
    row = await database.fetchrow("read the backend pid", "SELECT pg_backend_pid() AS p")
    return int(row["p"])


async def _connections(url: str, application_name: str) -> int:
    connection = await asyncpg.connect(url)
    try:
        return int(
            await connection.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                application_name,
            )
        )
    finally:
        await connection.close()


def _named(url: str) -> tuple[str, str]:
    """``url`` with an application name of its own, to count its connections on the server."""
    name = f"lane-{uuid.uuid4().hex[:8]}"
    return f"{url}?application_name={name}", name


async def test_calls_one_after_another_keep_one_connection_out_of_the_pool(
    postgres_url: str,
) -> None:
    async with await open_backend(postgres_url) as backend:
        database = _database(backend)
        assert database._lane is not None
        pids = {await _pid(database) for _ in range(5)}
        await backend.checkpoints.put(f"t-{uuid.uuid4().hex[:8]}", "run", b"{}", fence=1)
        pids.add(await _pid(database))
        assert len(pids) == 1
        assert database.pool.get_idle_size() == 0  # the one connection is kept, not idle


async def test_calls_at_once_take_pooled_connections_and_keep_one(postgres_url: str) -> None:
    url, name = _named(postgres_url)
    async with await open_backend(url) as backend:
        database = _database(backend)
        await _pid(database)  # one is kept: the first call below has it, the others may not
        pids = await asyncio.gather(
            *(
                database.fetchrow("sleep", "SELECT pg_backend_pid() AS p, pg_sleep(0.2)")
                for _ in range(4)
            )
        )
        assert len({row["p"] for row in pids}) == 4
        assert database.pool.get_idle_size() == 3  # three handed back, one kept
        assert await _connections(postgres_url, name) == 4
    assert await _connections(postgres_url, name) == 0


@pytest.mark.parametrize("failure", ["refused", "cancelled"])
async def test_a_call_that_fails_on_the_kept_connection_hands_it_back(
    postgres_url: str, failure: str
) -> None:
    async with await open_backend(postgres_url) as backend:
        database = _database(backend)
        await _pid(database)
        kept = database.pool.get_idle_size()
        if failure == "refused":
            with pytest.raises(StoreRefusedError):
                await database.fetchrow("divide", "SELECT 1 / 0 AS x")
        else:
            sleeping = asyncio.create_task(database.fetchrow("sleep", "SELECT pg_sleep(30)"))
            await asyncio.sleep(0.3)
            sleeping.cancel()
            with pytest.raises(asyncio.CancelledError):
                await sleeping
        assert database.pool.get_idle_size() == kept + 1  # back in the pool, not kept
        # The next call works at once (no "another operation is in progress"), and is kept.
        async with asyncio.timeout(5):
            row = await database.fetchrow("select", "SELECT 41 + 1 AS x")
        assert row["x"] == 42
        assert database.pool.get_idle_size() == kept


async def test_a_pooled_connection_a_call_failed_on_is_not_kept(postgres_url: str) -> None:
    async with await open_backend(postgres_url) as backend:
        database = _database(backend)
        lane = database._lane
        assert lane is not None
        assert lane._kept is None  # nothing kept yet
        with pytest.raises(StoreRefusedError):
            await database.fetchrow("divide", "SELECT 1 / 0 AS x")
        assert lane._kept is None
        assert database.pool.get_idle_size() == database.pool.get_size()


async def test_a_full_pool_gets_the_kept_connection_back_for_a_waiting_call(
    postgres_url: str,
) -> None:
    """Every connection the pool may open is lent, one of them the kept one, and a call waits
    in ``acquire``: when the kept one's call ends it goes back to the pool, so the waiting call
    has it then, not when one of the long calls ends."""
    async with await open_backend(postgres_url) as backend:
        database = _database(backend)
        await _pid(database)
        pool = database.pool
        short = asyncio.create_task(database.fetchrow("short", "SELECT pg_sleep(0.5) AS x"))
        await asyncio.sleep(0)  # it takes the kept connection
        long = [
            asyncio.create_task(database.fetchrow("long", "SELECT pg_sleep(4) AS x"))
            for _ in range(pool.get_max_size() - 1)
        ]
        await asyncio.sleep(0.3)  # they connect and start, well before the short one ends
        assert pool.get_size() == pool.get_max_size()
        assert not pool.get_idle_size()
        started = asyncio.get_running_loop().time()
        async with asyncio.timeout(3):
            row = await database.fetchrow("waits", "SELECT 1 AS x")
        assert row["x"] == 1
        assert asyncio.get_running_loop().time() - started < 2  # the long calls take 4 s
        await short
        await asyncio.gather(*long)


async def test_a_kept_connection_the_server_ended_is_not_used(postgres_url: str) -> None:
    async with await open_backend(postgres_url) as backend:
        database = _database(backend)
        ended = await _pid(database)
        lane = database._lane
        assert lane is not None
        kept: Any = lane._kept
        seen = asyncio.Event()
        kept.add_termination_listener(lambda *_: seen.set())
        other = await asyncpg.connect(postgres_url)
        try:
            assert await other.fetchval("SELECT pg_terminate_backend($1)", ended)
        finally:
            await other.close()
        async with asyncio.timeout(5):
            await seen.wait()  # the client has seen the server end it
        assert _closed(kept)
        assert await _pid(database) != ended


async def test_a_call_on_a_connection_ended_unnoticed_fails_retryable_then_recovers(
    postgres_url: str,
) -> None:
    """The server ends the kept connection and the next call is sent before the client has
    seen it: that call fails as on any pooled connection (retryable), the next one works."""
    async with await open_backend(postgres_url) as backend:
        database = _database(backend)
        ended = await _pid(database)
        with pytest.raises(StoreUnavailableError) as caught:
            await database.fetchrow(
                "end itself", "SELECT pg_terminate_backend(pg_backend_pid()) AS x"
            )
        assert caught.value.retryable
        assert await _pid(database) != ended


@pytest.mark.parametrize("mid_call", [False, True], ids=["idle", "mid-call"])
async def test_closing_the_backend_hands_the_kept_connection_back(
    postgres_url: str, mid_call: bool
) -> None:
    url, name = _named(postgres_url)
    backend = await open_backend(url)
    database = _database(backend)
    await _pid(database)
    sleeping = (
        asyncio.create_task(database.fetchrow("sleep", "SELECT pg_sleep(0.3) AS x"))
        if mid_call
        else None
    )
    await asyncio.sleep(0.05)  # the call, if any, has the kept connection
    async with asyncio.timeout(5):  # a pool's close waits for every connection it lent
        await backend.close()
        if sleeping is not None:
            await sleeping
    assert await _connections(postgres_url, name) == 0


async def test_the_kept_connection_goes_back_to_the_pool_every_so_often(postgres_url: str) -> None:
    pool = await create_pool(postgres_url)
    try:
        lane = Lane(pool, return_every=3)
        lent = await pool.acquire()
        await lane.done(lent, succeeded=True)
        assert pool.get_idle_size() == 0
        for _ in range(2):
            assert await lane.take() is lent
            await lane.done(lent, succeeded=True)
        assert pool.get_idle_size() == 0
        assert await lane.take() is lent
        await lane.done(lent, succeeded=True)  # the third use: handed back
        assert pool.get_idle_size() == 1
        assert await lane.take() is None
    finally:
        await pool.close()


async def test_a_pool_the_application_owns_keeps_nothing(postgres_url: str) -> None:
    pool = await asyncpg.create_pool(postgres_url, min_size=1, max_size=2)
    try:
        store = PostgresCheckpointStore(pool)
        assert store._db._lane is None
        await store.put(f"t-{uuid.uuid4().hex[:8]}", "run", b"{}", fence=1)
        assert pool.get_idle_size() == pool.get_size()
    finally:
        async with asyncio.timeout(5):
            await pool.close()


async def test_a_store_built_on_a_backends_pool_without_its_lane_keeps_nothing(
    postgres_url: str,
) -> None:
    """The lane is the backend's, handed to the stores it builds: another store on the same pool
    does not find it (no table of lanes by pool) and takes pooled connections."""
    async with await open_backend(postgres_url) as backend:
        database = _database(backend)
        kept = await _pid(database)
        other = PostgresCheckpointStore(database.pool)
        assert other._db._lane is None
        assert await _pid(other._db) != kept
        assert await _pid(database) == kept
