"""``RedisCommitStore``: a whole boundary in one round trip and one script.

The frontier is staged and moved into place as the checkpoint store does (its bytes never pass
through Lua); the same script then stores the segment (deleting those a compacted one replaces) and
counts the charge, all keys in the run's slot (one hash tag, so Cluster-safe). A script runs whole
with nothing in between; a stale fence returns before anything is written, and the ``RENAME`` that
could fail (a staging key gone) comes before the other writes, so an error leaves none of them.

``read_run`` reads the frontier and the transcript's hash in one script, so in one round trip and
with no commit in between (``RunReader``); both keys are in the run's slot.
``read_run_and_records`` adds the run's idempotency records (its claims hash, in the same slot) to
that script (``RunAndRecordsReader``).
"""

from __future__ import annotations

from collections.abc import Mapping

from agentrun._commits import BoundaryCommit
from agentrun._history import committed_handle
from agentrun._idempotency import IdempotencyStore, ListedRecord
from agentrun.stores._redis._shared import Reply, as_bytes, lua, text
from agentrun.stores._redis.checkpoints import PLACED, RedisCheckpointStore
from agentrun.stores._redis.idempotency import RECORDS, RedisIdempotencyStore, listed_records

COMMIT = lua(
    PLACED,
    """
if ARGV[2] ~= '' then redis.call('HSET', KEYS[4], ARGV[2], ARGV[3]) end
if #ARGV > 5 then redis.call('HDEL', KEYS[4], unpack(ARGV, 6)) end
if ARGV[4] == '' then return {'ok'} end
if redis.call('HEXISTS', KEYS[5], ARGV[4]) == 1 then
  return {'ok', redis.call('GET', KEYS[6]) or '0'}
end
redis.call('HSET', KEYS[5], ARGV[4], ARGV[5])
return {'ok', redis.call('INCRBY', KEYS[6], ARGV[5])}
""",
)
READ_RUN = lua("""
local frontier = redis.call('GET', KEYS[1])
if not frontier then return {} end
return {frontier, redis.call('HGETALL', KEYS[2])}
""")
"""The frontier and every segment of the run, read in one script so that no commit lands between
the two (a compaction deletes segments the frontier read before it named)."""

READ_RUN_AND_RECORDS = lua(
    RECORDS,
    """
local frontier = redis.call('GET', KEYS[1])
if not frontier then return {} end
return {frontier, redis.call('HGETALL', KEYS[2]), listed(KEYS[3], now_us())}
""",
)
"""``READ_RUN`` and the run's live records (as ``LIST`` lists them), in one script."""


class RedisCommitStore(RedisCheckpointStore):
    """The checkpoint store's staged write, with the segment and the charge in its script."""

    name = "Redis commit store"

    async def commit(self, boundary: BoundaryCommit) -> int | None:
        tenant, run_id, fence = boundary.tenant, boundary.run_id, boundary.fence
        self._fits(run_id, boundary.frontier)
        charge = boundary.charge
        run = self._keys(tenant, run_id)
        segment = boundary.segment
        reply = await self._call(
            "commit a boundary",
            run,
            self._staged(
                run,
                boundary.frontier,
                fence,
                COMMIT,
                [run.history, run.charges, run.spent],
                [
                    committed_handle(boundary) or "",
                    b"" if segment is None else segment,
                    "" if charge is None else charge.charge_id,
                    0 if charge is None else charge.micros,
                    *boundary.dropped,
                ],
            ),
        )
        self._admitted(reply, run, fence, "boundary commit")
        return None if charge is None else int(text(reply[1]))

    async def read_run(self, tenant: str, run_id: str) -> tuple[bytes | None, Mapping[str, bytes]]:
        run = self._keys(tenant, run_id)
        reply = await self._run(
            READ_RUN, "read a checkpoint and its transcript", run, [run.checkpoint, run.history], []
        )
        return _frontier_and_segments(reply)

    def lists_records_of(self, idempotency: IdempotencyStore) -> bool:
        return isinstance(idempotency, RedisIdempotencyStore) and self.shares_keys_with(idempotency)

    async def read_run_and_records(
        self, tenant: str, run_id: str
    ) -> tuple[bytes | None, Mapping[str, bytes], tuple[ListedRecord, ...]]:
        run = self._keys(tenant, run_id)
        reply = await self._run(
            READ_RUN_AND_RECORDS,
            "read a checkpoint, its transcript and its records",
            run,
            [run.checkpoint, run.history, run.claims],
            [],
        )
        frontier, segments = _frontier_and_segments(reply[:2])
        return frontier, segments, listed_records(run, reply[2]) if reply else ()


def _frontier_and_segments(reply: Reply) -> tuple[bytes | None, Mapping[str, bytes]]:
    """``READ_RUN``'s reply: nothing (no frontier), or the frontier and the segments' hash."""
    if not reply:
        return None, {}
    frontier, listed = reply
    assert isinstance(frontier, bytes | str), f"the frontier was {frontier!r}"
    return as_bytes(frontier) or b"", {
        handle.decode() if isinstance(handle, bytes) else str(handle): as_bytes(segment) or b""
        for handle, segment in _pairs(listed)
        if isinstance(segment, bytes | str)
    }


def _pairs(flat: object) -> list[tuple[object, object]]:
    """``HGETALL``'s reply as RESP2 sends it (field, value, field, value...), in pairs."""
    assert isinstance(flat, list), f"HGETALL answered {type(flat).__name__}"
    return list(zip(flat[::2], flat[1::2], strict=True))
