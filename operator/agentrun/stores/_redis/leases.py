"""``RedisLeaseStore``: run leases decided by Lua scripts on the server's clock.

Each operation is one script, so acquisition, renewal and release are atomic with the checks they
depend on, and every expiry is decided by ``TIME`` (microseconds included) inside the script: no
caller's clock takes part. The lease is a hash (holder, fence, expiry in server microseconds);
its Redis TTL only collects it some time after it lapsed and decides nothing.

A refused acquisition answers with the live holder and its fence, so ``RunLeaseError`` can name
who owns the run. Acquisition issues ``max(high-water + 1, TIME in microseconds)`` and stores it
as the run's fence high-water mark, which is what makes fences survive a restart of a Redis that
keeps nothing on disk (see ``_shared``).
"""

from __future__ import annotations

from agentrun._leases import RunLease, renewal_refused
from agentrun._storecore.fences import held_elsewhere
from agentrun.stores._redis._shared import (
    RedisStore,
    Reply,
    lua,
    text,
    ttl_micros,
)

LIVE = """
local function live(key, now)
  local lease = redis.call('HMGET', key, 'holder', 'fence', 'expires')
  if not lease[1] then return false end
  if not (tonumber(lease[2]) and tonumber(lease[3])) then
    unreadable('the lease hash has no numeric fence or expiry')
  end
  if tonumber(lease[3]) > now then return lease end
  return false
end
local function keep(key, holder, fence, expires, ttl)
  redis.call('HSET', key, 'holder', holder, 'fence', int(fence), 'expires', int(expires))
  redis.call('PEXPIRE', key, math.ceil(ttl / 1000) + 1000)
end
"""

ACQUIRE = lua(
    LIVE,
    """
local now = now_us()
local lease = live(KEYS[2], now)
if lease and lease[1] ~= ARGV[1] then return {'held', lease[1], lease[2]} end
local ttl = tonumber(ARGV[2])
local fence = math.max(high_water(KEYS[1]) + 1, now)
redis.call('SET', KEYS[1], int(fence))
keep(KEYS[2], ARGV[1], fence, now + ttl, ttl)
return {'ok', int(fence), int(ttl)}
""",
)

RENEW = lua(
    LIVE,
    """
local now = now_us()
local lease = live(KEYS[1], now)
if not lease then return {'lapsed'} end
if lease[1] ~= ARGV[1] or tonumber(lease[2]) ~= tonumber(ARGV[2]) then
  return {'taken', lease[1], lease[2]}
end
local ttl = tonumber(ARGV[3])
keep(KEYS[1], ARGV[1], tonumber(ARGV[2]), now + ttl, ttl)
return {'ok', int(ttl)}
""",
)

RELEASE = lua("""
local lease = redis.call('HMGET', KEYS[1], 'holder', 'fence')
if lease[1] == ARGV[1] and tonumber(lease[2]) == tonumber(ARGV[2]) then
  redis.call('DEL', KEYS[1])
end
return {'ok'}
""")

HELD = lua(
    LIVE,
    """
local now = now_us()
local lease = live(KEYS[1], now)
if not lease then return {'none'} end
return {'live', lease[1], lease[2], int(tonumber(lease[3]) - now)}
""",
)


def _seconds(micros: bytes | int) -> float:
    return int(text(micros)) / 1_000_000


class RedisLeaseStore(RedisStore):
    name = "Redis lease store"

    async def acquire(self, tenant: str, run_id: str, holder: str, *, ttl: float) -> RunLease:
        micros = ttl_micros(ttl)
        run = self._keys(tenant, run_id)
        reply = await self._run(
            ACQUIRE, "acquire a lease", run, [run.fence, run.lease], [holder, micros]
        )
        if reply[0] == b"held":
            raise held_elsewhere(
                tenant=tenant,
                run_id=run_id,
                requested_by=holder,
                holder=text(reply[1]),
                fence=int(text(reply[2])),
            )
        return RunLease(
            tenant=tenant,
            run_id=run_id,
            holder=holder,
            fence=int(text(reply[1])),
            remaining=_seconds(reply[2]),
        )

    async def renew(self, lease: RunLease, *, ttl: float) -> RunLease:
        micros = ttl_micros(ttl)
        run = self._keys(lease.tenant, lease.run_id)
        reply = await self._run(
            RENEW, "renew a lease", run, [run.lease], [lease.holder, lease.fence, micros]
        )
        if reply[0] == b"lapsed":
            raise renewal_refused(lease, None)
        if reply[0] == b"taken":
            raise renewal_refused(lease, (text(reply[1]), int(text(reply[2]))))
        return lease.model_copy(update={"remaining": _seconds(reply[1])})

    async def release(self, lease: RunLease) -> None:
        run = self._keys(lease.tenant, lease.run_id)
        await self._run(RELEASE, "release a lease", run, [run.lease], [lease.holder, lease.fence])

    async def held(self, tenant: str, run_id: str) -> RunLease | None:
        run = self._keys(tenant, run_id)
        reply: Reply = await self._run(HELD, "read a lease", run, [run.lease], [])
        if reply[0] == b"none":
            return None
        return RunLease(
            tenant=tenant,
            run_id=run_id,
            holder=text(reply[1]),
            fence=int(text(reply[2])),
            remaining=_seconds(reply[3]),
        )
