"""Refusing a Redis that may evict keys, before any run is stored in it.

Under a ``maxmemory-policy`` other than ``noeviction`` a full Redis drops keys to make room:
``allkeys-*`` any key, ``volatile-*`` any key with a TTL — a run's lease among them. The kit
cannot tell a key that was evicted from one that never existed: a lost fence key admits a
superseded worker's write, a lost claim makes a call that may have run look as if it never did,
and a lost checkpoint makes a run look new. So the backend is not opened on such a server.

The policy is read with ``INFO memory`` (field ``maxmemory_policy``), which managed services
generally allow where they refuse ``CONFIG GET``; on a Cluster, from every primary, since each
has its own configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from agentrun._errors import ConfigurationError
from agentrun._storecore.classify import REDIS, classified
from agentrun.stores._redis._shared import DRIVER_ERRORS, Client, reply_code

SAFE_POLICY = "noeviction"


async def refuse_evicting_server(client: Client, where: str) -> None:
    """Raise ``ConfigurationError`` unless every server behind ``client`` runs ``noeviction``.

    ``where`` names the server in the message (host and port: never the URL, which may carry a
    password). A server that cannot be reached is ``StoreUnavailableError`` (retryable), one
    that refuses the kit's password ``StoreRefusedError`` (``classify.REDIS``).
    """
    try:
        if isinstance(client, RedisCluster):
            answers: Mapping[str, Any] = await client.info(
                "memory", target_nodes=RedisCluster.PRIMARIES
            )
        else:
            answers = {where: await client.info("memory")}
    except ResponseError as error:
        raise ConfigurationError(
            f"Redis at {where} refused INFO memory ({error}), so the kit cannot check that it "
            f"never evicts keys; allow INFO for the kit's user (ACL +info)"
        ) from error
    except DRIVER_ERRORS as error:
        code = reply_code(error)
        raise classified(
            REDIS, f"Redis at {where}", "read its maxmemory-policy", error, code
        ) from error
    for node, info in answers.items():
        policy = info.get("maxmemory_policy") if isinstance(info, Mapping) else None
        if policy != SAFE_POLICY:
            raise ConfigurationError(
                f"Redis at {node} runs maxmemory-policy {policy}: when full it evicts keys, and "
                "a run's fence, lease, claims or checkpoint evicted is a call made twice or a run "
                f"started over. Set maxmemory-policy {SAFE_POLICY} (redis.conf, or CONFIG SET "
                f"maxmemory-policy {SAFE_POLICY}): a full server then refuses writes, which the "
                "kit reports as refused (OOM) until memory is freed"
            )
