"""The Redis stores against every conformance suite, on one server and on a Redis Cluster.

Time passes for real here (the store's clock is the server's ``TIME``), so the suites' short TTL
is what keeps this fast. Every test runs twice: ``[single]`` and ``[cluster]``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.typing import EncodableT, FieldT

from agentrun import Backend, QuotaStore, open_backend, testing
from agentrun._storecore.checked import CheckedLedger
from agentrun.stores._redis import DEFAULT_PREFIX, RedisLedger
from agentrun.stores._redis._shared import RunKeys
from agentrun.testing.quotas import quota_stores_on


class TestRedisCheckpoints(testing.CheckpointStoreConformance): ...


class TestRedisRunListing(testing.RunListerConformance): ...


class TestRedisLeases(testing.LeaseStoreConformance): ...


class TestRedisIdempotency(testing.IdempotencyStoreConformance): ...


class TestRedisHistory(testing.HistoryStoreConformance): ...


class TestRedisCommits(testing.CommitStoreConformance): ...


class TestRedisRunReader(testing.RunReaderConformance): ...


class TestRedisSegmentListing(testing.SegmentListerConformance): ...


class TestRedisLedger(testing.LedgerConformance):
    @pytest.fixture
    def store(self, backend: Backend) -> object:
        return backend.ledger

    async def preload_charges(self, store: object, tenant: str, run_id: str, count: int) -> None:
        assert isinstance(store, CheckedLedger)
        assert isinstance(store.inner, RedisLedger)
        keys = RunKeys.of(DEFAULT_PREFIX, tenant, run_id)
        client = store.inner._client
        for start in range(0, count, 10_000):
            fields: dict[FieldT, EncodableT] = {
                f"preloaded-{index}": 1 for index in range(start, min(count, start + 10_000))
            }
            await client.hset(keys.charges, mapping=fields)
        await client.incrby(keys.spent, count)


class TestRedisChargeListing(testing.ChargeListerConformance): ...


class TestRedisQuotas(testing.QuotaStoreConformance):
    @pytest.fixture
    async def racers(self, redis_url: str) -> AsyncIterator[list[QuotaStore]]:
        """Backends of their own on the server: each its own client, as separate replicas."""
        async with quota_stores_on(lambda: open_backend(redis_url)) as stores:
            yield stores
