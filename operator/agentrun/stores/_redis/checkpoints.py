"""``RedisCheckpointStore``: one string key per run holding the newest frontier.

A put is two commands sent in one write and answered in one round trip: a plain ``SET`` of the
payload under a staging key of its own in the run's slot (with a TTL), then a script that checks
the run's fence and ``RENAME``s the staging key into place, or deletes it if the fence is stale.
So a superseded worker can never overwrite its successor's frontier, and the payload never passes
through Lua: handing a script the bytes costs Redis a copy into the Lua heap and another out of
it, a cost that grows with the payload well past a plain ``SET``'s (``bench/README.md``), where
staging costs
about what one more small command does. A staging key whose script never ran (the writer died
between the two, or the connection broke) expires by itself. Each put stages under a fresh random
name, so a stale writer and its successor writing at once cannot take each other's bytes.

``max_value_bytes`` is checked before anything is sent: an oversized payload is refused with
``CheckpointTooLargeError`` (not retryable, since the same bytes will be as large next time)
rather than sent to a server that would refuse it or, worse, hold up every other client while it
copies a huge value. The default is Redis's own limit on one value (``proto-max-bulk-len``,
512 MiB).

The runs are listed (``runs``) from the keys themselves: Redis keeps no index of them, so a page
is a ``SCAN`` of the whole keyspace (every primary of a Cluster) for checkpoint keys, read back
into runs (``_shared.run_of_key``), sorted by code point and cut here. That costs a pass over
every key of the database for every page, a round trip per thousand keys: it is for
a person's listing of runs, never for a worker's hot path.
"""

from __future__ import annotations

import heapq
import secrets
from collections.abc import Sequence
from typing import cast

from redis.exceptions import NoScriptError

from agentrun._errors import CheckpointTooLargeError, ConfigurationError
from agentrun._storecore.checked import DEFAULT_RUNS_PAGE
from agentrun.stores._redis._shared import (
    DEFAULT_PREFIX,
    Client,
    RedisStore,
    Reply,
    RunKeys,
    Script,
    as_bytes,
    lua,
    run_of_key,
    run_pattern,
)

DEFAULT_MAX_VALUE_BYTES = 512 * 1024 * 1024
STAGED_TTL_MS = 60_000
SCAN_COUNT = 1000
"""How many keys one ``SCAN`` call of ``runs`` asks a server to look at (a hint)."""

Run = tuple[str, str]

PLACED = """
local current = refused(KEYS[1], tonumber(ARGV[1]))
if current then
  redis.call('DEL', KEYS[3])
  return {'stale', int(current)}
end
redis.call('RENAME', KEYS[3], KEYS[2])
redis.call('PERSIST', KEYS[2])
"""
"""The fence check and the staged frontier moved into place: how every script that writes a
frontier (``PUT``, the commit store's ``COMMIT``) begins. KEYS: fence, frontier, staging key."""
PUT = lua(PLACED, "return {'ok'}")


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
        self._fits(run_id, payload)
        run = self._keys(tenant, run_id)
        reply = await self._call("write a checkpoint", run, self._staged(run, payload, fence))
        self._admitted(reply, run, fence, "checkpoint write")

    async def _staged(
        self,
        run: RunKeys,
        payload: bytes,
        fence: int,
        script: Script = PUT,
        keys_after: Sequence[str] = (),
        args_after: Sequence[str | bytes | int] = (),
    ) -> Reply:
        """Stage ``payload`` and run ``script`` (``PUT`` or one that does more in the same
        step) with the fence, the frontier's key and the staging key first, in one round trip."""
        staged = run.staged(secrets.token_hex(8))
        keys = [run.fence, run.checkpoint, staged, *keys_after]
        args = [fence, *args_after]
        stored, reply = await self._together(
            ("SET", staged, payload, "PX", STAGED_TTL_MS),
            ("EVALSHA", script.sha, len(keys), *keys, *args),
        )
        if isinstance(stored, Exception):
            raise stored
        if isinstance(reply, NoScriptError):
            return await self._eval(script, keys, args)
        if isinstance(reply, Exception):
            raise reply
        return cast(Reply, reply)

    def _fits(self, run_id: str, payload: bytes) -> None:
        if len(payload) > self.max_value_bytes:
            raise CheckpointTooLargeError(
                run_id=run_id, size=len(payload), limit=self.max_value_bytes
            )

    async def latest(self, tenant: str, run_id: str) -> bytes | None:
        run = self._keys(tenant, run_id)
        return as_bytes(
            await self._call("read a checkpoint", run, self._client.get(run.checkpoint))
        )

    async def forget(self, tenant: str, run_id: str) -> None:
        run = self._keys(tenant, run_id)
        await self._call("forget a checkpoint", run, self._client.delete(run.checkpoint))

    async def runs(
        self, tenant: str | None = None, *, after: Run | None = None, limit: int = DEFAULT_RUNS_PAGE
    ) -> tuple[Run, ...]:
        """``RunLister.runs``, by a scan of the whole keyspace (see the module)."""
        pattern = run_pattern(self._prefix, "checkpoint", tenant)
        keys = await self._call("list the runs with a checkpoint", None, self._scanned(pattern))
        found = (run_of_key(self._prefix, "checkpoint", key) for key in keys)
        listed = (
            run
            for run in found
            if run is not None
            and (tenant is None or run[0] == tenant)
            and (after is None or run > after)
        )
        return tuple(heapq.nsmallest(limit, listed))

    async def _scanned(self, pattern: str) -> set[bytes]:
        """Every key ``pattern`` matches, each once (a ``SCAN`` may return a key twice)."""
        return {key async for key in self._client.scan_iter(match=pattern, count=SCAN_COUNT)}
