"""The Redis stores against every conformance suite, on one server and on a Redis Cluster.

Time passes for real here (the store's clock is the server's ``TIME``), so the suites' short TTL
is what keeps this fast. Every test runs twice: ``[single]`` and ``[cluster]``.
"""

from __future__ import annotations

from agentrun import testing


class TestRedisCheckpoints(testing.CheckpointStoreConformance): ...


class TestRedisLeases(testing.LeaseStoreConformance): ...


class TestRedisIdempotency(testing.IdempotencyStoreConformance): ...


class TestRedisHistory(testing.HistoryStoreConformance): ...


class TestRedisLedger(testing.LedgerConformance): ...
