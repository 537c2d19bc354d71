"""``RedisBoundaryStore``: a whole boundary in one round trip and one script.

The frontier is staged and moved into place as the checkpoint store does (its bytes never pass
through Lua); the same script then stores the segment and counts the charge, all keys in the
run's slot (one hash tag, so Cluster-safe). A script runs whole with nothing in between; a stale
fence returns before anything is written, and the ``RENAME`` that could fail (a staging key gone)
comes before the other writes, so an error leaves none of them.

``read_run`` sends the frontier's ``GET`` and the transcript's ``HGETALL`` in one write, answered
in one round trip (``RunReader``); both keys are in the run's slot.
"""

from __future__ import annotations

from collections.abc import Mapping

from agentrun.boundary import BoundaryCommit
from agentrun.history import handle_for
from agentrun.identifiers import check_key
from agentrun.stores.redis._shared import as_bytes, lua, text
from agentrun.stores.redis.checkpoints import PLACED, RedisCheckpointStore

COMMIT = lua(
    PLACED,
    """
if ARGV[2] ~= '' then redis.call('HSET', KEYS[4], ARGV[2], ARGV[3]) end
if ARGV[4] == '' then return {'ok'} end
if redis.call('HEXISTS', KEYS[5], ARGV[4]) == 1 then
  return {'ok', redis.call('GET', KEYS[6]) or '0'}
end
redis.call('HSET', KEYS[5], ARGV[4], ARGV[5])
return {'ok', redis.call('INCRBY', KEYS[6], ARGV[5])}
""",
)


class RedisBoundaryStore(RedisCheckpointStore):
    """The checkpoint store's staged write, with the segment and the charge in its script."""

    name = "Redis boundary store"

    async def commit(self, boundary: BoundaryCommit) -> int | None:
        tenant, run_id, fence = boundary.tenant, boundary.run_id, boundary.fence
        self._fits(run_id, boundary.frontier)
        charge = boundary.charge
        if charge is not None:
            check_key("charge id", charge.charge_id)
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
                    "" if segment is None else handle_for(segment),
                    b"" if segment is None else segment,
                    "" if charge is None else charge.charge_id,
                    0 if charge is None else charge.micros,
                ],
            ),
        )
        self._admitted(reply, run, fence, "boundary commit")
        return None if charge is None else int(text(reply[1]))

    async def read_run(self, tenant: str, run_id: str) -> tuple[bytes | None, Mapping[str, bytes]]:
        run = self._keys(tenant, run_id)

        async def both() -> list[object]:
            replies = await self._together(("GET", run.checkpoint), ("HGETALL", run.history))
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
            return replies

        replies = await self._call("read a checkpoint and its transcript", run, both())
        frontier, listed = _bulk(replies[0]), replies[1]
        if frontier is None:
            return None, {}
        pairs = list(listed.items()) if isinstance(listed, dict) else _pairs(listed)
        return frontier, {
            handle.decode() if isinstance(handle, bytes) else str(handle): segment
            for handle, value in pairs
            if (segment := _bulk(value)) is not None
        }


def _bulk(value: object) -> bytes | None:
    """A bulk reply read off the connection, where no response callback typed it."""
    assert value is None or isinstance(value, bytes | str), f"a bulk reply was {value!r}"
    return as_bytes(value)


def _pairs(flat: object) -> list[tuple[object, object]]:
    """``HGETALL``'s reply as RESP2 sends it (field, value, field, value...), in pairs."""
    assert isinstance(flat, list), f"HGETALL answered {type(flat).__name__}"
    return list(zip(flat[::2], flat[1::2], strict=True))
