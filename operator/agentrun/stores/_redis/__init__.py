"""The Redis backend: its stores share one client and one key prefix, and the five of a run one
fence key.

URL forms accepted by ``open_backend``::

    redis://[user:password@]host:port/db           one server
    rediss://...                                   the same over TLS
    redis://host:port/0?cluster=true               a Redis Cluster, found from this one node

and these query options, which the kit reads and removes before the driver sees the URL:

* ``cluster=true`` — talk to a Redis Cluster (``redis.asyncio.cluster.RedisCluster``); the
  database must be 0. Every key of a run shares one hash tag, so the stores need nothing else.
* ``prefix=NAME`` — the key namespace (default ``agentrun``; no braces).
* ``max_value_bytes=N`` — the largest checkpoint payload sent (default 512 MiB).

Any other query option (``socket_timeout=5``, ``max_connections=200``, ...) is the driver's. A
single server is reached through a blocking pool of ``POOL_SIZE`` connections: a call beyond
that waits for a free one (up to ``POOL_WAIT_S``) rather than failing, which is what an operator
with a thousand runs in flight needs. Sockets time out after
``SOCKET_TIMEOUT_S`` by default and a failed call is not retried by the driver, so a dead or
frozen server fails a call in seconds with ``StoreUnavailableError`` instead of hanging the run;
whether to try again is the caller's decision, made on ``retryable``. The clients speak RESP2:
over RESP3, redis-py 8 skips its check for a pooled connection that the server has closed, so the
first call after a Redis restart would fail although the server is back.

Key layout (one run; ``T`` and ``R`` are the percent-encoded tenant and run id, see ``_shared``)::

    agentrun:{T:R}:fence        string  the fence high-water mark shared by all five stores
    agentrun:{T:R}:checkpoint   string  the newest frontier
    agentrun:{T:R}:staged:HEX   string  a frontier on its way in (renamed, or expires in 60 s)
    agentrun:{T:R}:lease        hash    holder, fence, expires (server microseconds)
    agentrun:{T:R}:claims       hash    idempotency key -> JSON record
    agentrun:{T:R}:history      hash    segment handle -> segment bytes
    agentrun:{T:R}:charges      hash    charge id -> micros
    agentrun:{T:R}:spent        string  the run's total, in micros

``forget`` on any store drops that store's keys and never the fence key, so fences keep rising.
The quota store keeps its keys per (tenant, scope), not per run (see ``quotas``).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from agentrun.stores._drivers import driver

with driver("redis", extra="redis"):
    from redis.asyncio import BlockingConnectionPool, Redis
    from redis.asyncio.cluster import RedisCluster
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

from agentrun._backend import StoreSet, closed_on_failure
from agentrun._errors import ConfigurationError
from agentrun._storecore.classify import REDIS, classified
from agentrun.stores._redis._shared import DEFAULT_PREFIX, DRIVER_ERRORS, Client, reply_code
from agentrun.stores._redis.checkpoints import DEFAULT_MAX_VALUE_BYTES, RedisCheckpointStore
from agentrun.stores._redis.commits import RedisCommitStore
from agentrun.stores._redis.eviction import refuse_evicting_server
from agentrun.stores._redis.history import RedisHistoryStore
from agentrun.stores._redis.idempotency import RedisIdempotencyStore
from agentrun.stores._redis.leases import RedisLeaseStore
from agentrun.stores._redis.ledger import RedisLedger
from agentrun.stores._redis.quotas import RedisQuotaStore

__all__ = [
    "DEFAULT_MAX_VALUE_BYTES",
    "DEFAULT_PREFIX",
    "SOCKET_TIMEOUT_S",
    "RedisCheckpointStore",
    "RedisCommitStore",
    "RedisHistoryStore",
    "RedisIdempotencyStore",
    "RedisLeaseStore",
    "RedisLedger",
    "RedisQuotaStore",
    "backend_on",
    "open_backend",
    "open_client",
]

SOCKET_TIMEOUT_S = 2.0
POOL_SIZE = 512
"""Connections per client. An operator replica holding a thousand runs renews their leases and
writes their boundaries through one client: with 64, renewals queued behind writes past their
lease's TTL and 87 leases were lost in ``make bench-agents`` at 1,000 runs; with 512 none were.
Connections are opened only when needed, and a Redis server accepts 10,000 by default."""
POOL_WAIT_S = 20.0
_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")


def backend_on(
    client: Client,
    *,
    prefix: str = DEFAULT_PREFIX,
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    url: str = "redis://",
) -> StoreSet:
    """The stores on ``client``; closing the backend closes the client."""
    return StoreSet(
        checkpoints=RedisCheckpointStore(client, prefix=prefix, max_value_bytes=max_value_bytes),
        leases=RedisLeaseStore(client, prefix=prefix),
        idempotency=RedisIdempotencyStore(client, prefix=prefix),
        history=RedisHistoryStore(client, prefix=prefix),
        ledger=RedisLedger(client, prefix=prefix),
        quotas=RedisQuotaStore(client, prefix=prefix),
        commits=RedisCommitStore(client, prefix=prefix, max_value_bytes=max_value_bytes),
        url=url,
        closer=client.aclose,
    )


def _flag(url: str, value: str) -> bool:
    if value.lower() in _TRUE + _FALSE:
        return value.lower() in _TRUE
    raise ConfigurationError(f"store URL {url!r}: cluster={value!r} is not true or false")


def _size(url: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ConfigurationError(
            f"store URL {url!r}: max_value_bytes={value!r} is not a whole number of bytes"
        ) from None


async def open_backend(url: str) -> StoreSet:
    """Open the Redis stores ``url`` names (the forms are in this module's docstring).

    The server is asked for its ``maxmemory-policy`` first, and one that may evict keys is
    refused with ``ConfigurationError`` (see ``eviction``). A Cluster's slot map is read here
    too, once: left to the first calls, many of them racing the driver's lazy start-up
    (redis-py 8) can break each other's connections. A server that cannot be reached raises
    ``StoreUnavailableError`` (retryable).
    """
    options = _StoreURL.parse(url)
    client = await options.client()
    backend = backend_on(
        client, prefix=options.prefix, max_value_bytes=options.max_value_bytes, url=url
    )
    async with closed_on_failure(backend.close):
        await refuse_evicting_server(client, options.where)
    return backend


async def open_client(url: str) -> Client:
    """The client ``open_backend(url)`` would give its stores (pool, timeouts, no retries), for
    a caller that wants the same connections without the stores: a raw baseline, a tool."""
    return await _StoreURL.parse(url).client()


@dataclass(frozen=True)
class _StoreURL:
    """What a Redis store URL says: the driver's part, and the options the kit reads itself."""

    driver_url: str
    driver_query: dict[str, str]
    cluster: bool
    prefix: str
    max_value_bytes: int

    @property
    def where(self) -> str:
        """host:port, for messages: the URL itself may carry a password."""
        parts = urlsplit(self.driver_url)
        return f"{parts.hostname}:{parts.port or 6379}"

    @classmethod
    def parse(cls, url: str) -> _StoreURL:
        parts = urlsplit(url)
        driver_query: list[tuple[str, str]] = []
        cluster, prefix, max_value_bytes = False, DEFAULT_PREFIX, DEFAULT_MAX_VALUE_BYTES
        for name, value in parse_qsl(parts.query, keep_blank_values=True):
            if name == "cluster":
                cluster = _flag(url, value)
            elif name == "prefix":
                prefix = value
            elif name == "max_value_bytes":
                max_value_bytes = _size(url, value)
            else:
                driver_query.append((name, value))
        if cluster and parts.path not in ("", "/", "/0"):
            raise ConfigurationError(
                f"store URL {url!r}: a Redis Cluster has only database 0; drop {parts.path!r}"
            )
        driver_url = urlunsplit(parts._replace(query=urlencode(driver_query)))
        return cls(driver_url, dict(driver_query), cluster, prefix, max_value_bytes)

    async def client(self) -> Client:
        if self.cluster:
            cluster_client = RedisCluster.from_url(
                self.driver_url,
                socket_timeout=SOCKET_TIMEOUT_S,
                socket_connect_timeout=SOCKET_TIMEOUT_S,
                protocol=2,
            )
            try:
                await cluster_client.initialize()
            except DRIVER_ERRORS as error:
                await cluster_client.aclose()
                code = reply_code(error)
                operation = "read its slot map"
                raise classified(REDIS, "Redis Cluster", operation, error, code) from error
            return cluster_client
        # Blocking: past ``max_connections`` (default POOL_SIZE) a call waits its turn for up
        # to POOL_WAIT_S instead of failing at once, as the default pool does under load.
        pool = BlockingConnectionPool.from_url(
            self.driver_url,
            **({} if "max_connections" in self.driver_query else {"max_connections": POOL_SIZE}),
            timeout=POOL_WAIT_S,
            socket_timeout=SOCKET_TIMEOUT_S,
            socket_connect_timeout=SOCKET_TIMEOUT_S,
            retry=Retry(NoBackoff(), 0),
            protocol=2,
        )
        return Redis.from_pool(pool)
