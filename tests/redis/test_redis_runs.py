"""Whole runs, crashes and resumes on a Redis server and on a Redis Cluster
(``tests.support.run_scenarios``)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import cast

import pytest

from agentrun import Backend
from agentrun._storecore.checked import CheckedCheckpoints
from agentrun.stores._redis import DEFAULT_PREFIX, RedisCheckpointStore
from agentrun.stores._redis._shared import RunKeys
from tests.support.run_scenarios import RunScenarios


class TestRedisRuns(RunScenarios):
    @pytest.fixture
    def stores(self, backend: Backend) -> Backend:
        return backend

    async def kept(self, stores: Backend, tenant: str) -> list[str | bytes]:
        """Every key of the run (on every node of a Cluster), and every value and field in it."""
        checked = stores.checkpoints
        assert isinstance(checked, CheckedCheckpoints)
        assert isinstance(checked.inner, RedisCheckpointStore)
        client = checked.inner._client
        base = RunKeys.of(DEFAULT_PREFIX, tenant, "r").base
        kept: list[str | bytes] = []
        async for key in client.scan_iter(match=base + "*"):
            kept.append(key)
            kind = await client.type(key)
            if kind == b"hash":
                fields = await cast(Awaitable[dict[bytes, bytes]], client.hgetall(key))
                for field, value in fields.items():
                    kept.extend((field, value))
            elif kind == b"string":
                stored = await client.get(key)
                assert stored is not None
                kept.append(stored)
            else:
                raise AssertionError(f"the run has a {kind!r} key {key!r}: read it here too")
        return kept
