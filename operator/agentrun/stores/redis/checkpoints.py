"""``RedisCheckpointStore``: one string key per run holding the newest frontier.

A put becomes visible in one script that checks the run's fence and sets the key, so a superseded
worker can never overwrite its successor's frontier. A payload up to ``STAGE_ABOVE`` bytes is
passed to that script directly. A larger one is not: handing a script a megabyte costs Redis
several times a plain ``SET`` of it (measured: ~5x at 1 MiB), so it is first ``SET`` under a
staging key of its own in the run's slot, and the script, pipelined in the same round trip,
checks the fence and ``RENAME``s it into place (or deletes it if the fence is stale). A staging
key whose script never ran (the writer died between the two) expires by itself.

``max_value_bytes`` is checked before anything is sent: an oversized payload is refused with
``CheckpointTooLargeError`` (not retryable, since the same bytes will be as large next time)
rather than sent to a server that would refuse it or, worse, hold up every other client while it
copies a huge value. The default is Redis's own limit on one value (``proto-max-bulk-len``,
512 MiB).
"""

from __future__ import annotations

import secrets

from redis.exceptions import NoScriptError

from agentrun.errors import CheckpointTooLargeError, ConfigurationError
from agentrun.stores.redis._shared import (
    DEFAULT_PREFIX,
    Client,
    RedisStore,
    Reply,
    RunKeys,
    as_bytes,
    lua,
)

DEFAULT_MAX_VALUE_BYTES = 512 * 1024 * 1024
STAGE_ABOVE = 64 * 1024
STAGED_TTL_MS = 60_000

PUT = lua("""
local current = refused(KEYS[1], tonumber(ARGV[1]))
if current then return {'stale', int(current)} end
redis.call('SET', KEYS[2], ARGV[2])
return {'ok'}
""")

PUT_STAGED = lua("""
local current = refused(KEYS[1], tonumber(ARGV[1]))
if current then
  redis.call('DEL', KEYS[3])
  return {'stale', int(current)}
end
redis.call('RENAME', KEYS[3], KEYS[2])
redis.call('PERSIST', KEYS[2])
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
        if len(payload) > STAGE_ABOVE:
            reply = await self._call("write a checkpoint", run, self._staged(run, payload, fence))
        else:
            reply = await self._run(
                PUT, "write a checkpoint", run, [run.fence, run.checkpoint], [fence, payload]
            )
        self._admitted(reply, run, fence, "checkpoint write")

    async def _staged(self, run: RunKeys, payload: bytes, fence: int) -> Reply:
        staged = run.staged(secrets.token_hex(8))
        keys, args = [run.fence, run.checkpoint, staged], [fence]
        pipe = self._client.pipeline(transaction=False)
        pipe.set(staged, payload, px=STAGED_TTL_MS)
        # By name: the driver refuses ``evalsha`` in a Cluster pipeline, as it cannot know a
        # script's keys share a slot; these do (one hash tag), and it routes them by the first.
        pipe.execute_command("EVALSHA", PUT_STAGED.sha, len(keys), *keys, *args)
        stored, reply = await pipe.execute(raise_on_error=False)
        if isinstance(stored, Exception):
            raise stored
        if isinstance(reply, NoScriptError):
            return await self._eval(PUT_STAGED, keys, args)
        if isinstance(reply, Exception):
            raise reply
        answer: Reply = reply
        return answer

    async def latest(self, tenant: str, run_id: str) -> bytes | None:
        run = self._keys(tenant, run_id)
        return as_bytes(
            await self._call("read a checkpoint", run, self._client.get(run.checkpoint))
        )

    async def forget(self, tenant: str, run_id: str) -> None:
        run = self._keys(tenant, run_id)
        await self._call("forget a checkpoint", run, self._client.delete(run.checkpoint))
