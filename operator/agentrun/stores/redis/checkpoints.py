"""``RedisCheckpointStore``: one string key per run holding the newest frontier.

A put is one script: it checks the run's fence and sets the key, so a superseded worker can
never overwrite its successor's frontier. ``max_value_bytes`` is checked before anything is sent:
an oversized payload is refused with ``CheckpointTooLargeError`` (not retryable, since the same
bytes will be as large next time) rather than sent to a server that would refuse or, worse,
block every other client while it copies a huge value. The default is Redis's own limit on one
value (``proto-max-bulk-len``, 512 MiB).
"""

from __future__ import annotations

from agentrun.errors import CheckpointTooLargeError, ConfigurationError
from agentrun.stores.redis._shared import DEFAULT_PREFIX, Client, RedisStore, as_bytes, lua

DEFAULT_MAX_VALUE_BYTES = 512 * 1024 * 1024

PUT = lua("""
local current = refused(KEYS[1], tonumber(ARGV[1]))
if current then return {'stale', int(current)} end
redis.call('SET', KEYS[2], ARGV[2])
return {'ok'}
""")


class RedisCheckpointStore(RedisStore):
    name = "Redis checkpoint store"

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = DEFAULT_PREFIX,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        super().__init__(client, prefix=prefix)
        if max_value_bytes <= 0:
            raise ConfigurationError(
                f"max_value_bytes must be a positive number of bytes, got {max_value_bytes}"
            )
        self.max_value_bytes = max_value_bytes

    async def put(self, tenant: str, run_id: str, payload: bytes, *, fence: int) -> None:
        if len(payload) > self.max_value_bytes:
            raise CheckpointTooLargeError(run_id, len(payload), self.max_value_bytes)
        run = self._keys(tenant, run_id)
        reply = await self._run(
            PUT, "write a checkpoint", run, [run.fence, run.checkpoint], [fence, payload]
        )
        self._admitted(reply, run, fence, "checkpoint write")

    async def latest(self, tenant: str, run_id: str) -> bytes | None:
        run = self._keys(tenant, run_id)
        return as_bytes(
            await self._call("read a checkpoint", run, self._client.get(run.checkpoint))
        )

    async def forget(self, tenant: str, run_id: str) -> None:
        run = self._keys(tenant, run_id)
        await self._call("forget a checkpoint", run, self._client.delete(run.checkpoint))
