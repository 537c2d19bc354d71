"""``RedisHistoryStore``: one hash per run, from segment handle to segment bytes.

Segments are content-addressed (``handle_for``), so writing one twice is harmless and a fetch
proves what came back is what was written (``verified``). A put is one script that checks and
raises the run's fence with the write, so a superseded worker cannot graft segments onto the
transcript its successor is extending. The hash lives in the run's slot, and ``forget`` evicts
the whole transcript with one ``DEL``.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentrun._history import handle_for, verified
from agentrun.stores._redis._shared import RedisStore, as_bytes, lua

PUT = lua("""
local current = refused(KEYS[1], tonumber(ARGV[1]))
if current then return {'stale', int(current)} end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return {'ok'}
""")


class RedisHistoryStore(RedisStore):
    name = "Redis history store"

    async def put(self, tenant: str, run_id: str, segment: bytes, *, fence: int) -> str:
        handle = handle_for(segment)
        run = self._keys(tenant, run_id)
        reply = await self._run(
            PUT,
            "write a transcript segment",
            run,
            [run.fence, run.history],
            [fence, handle, segment],
        )
        self._admitted(reply, run, fence, "history write")
        return handle

    async def fetch(self, tenant: str, run_id: str, handle: str) -> bytes:
        run = self._keys(tenant, run_id)
        segment = await self._call(
            "read a transcript segment", run, self._client.hget(run.history, handle)
        )
        return verified(run_id, handle, as_bytes(segment))

    async def fetch_all(self, tenant: str, run_id: str) -> Mapping[str, bytes]:
        """Every segment of the run with one ``HGETALL`` of its hash (``SegmentLister``)."""
        run = self._keys(tenant, run_id)
        stored = await self._call("read a transcript", run, self._client.hgetall(run.history))
        return {
            handle.decode() if isinstance(handle, bytes) else handle: segment
            for handle, value in stored.items()
            if (segment := as_bytes(value)) is not None
        }

    async def forget(self, tenant: str, run_id: str) -> None:
        run = self._keys(tenant, run_id)
        await self._call("forget a transcript", run, self._client.delete(run.history))
