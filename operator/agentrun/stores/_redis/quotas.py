"""``RedisQuotaStore``: admissions and budgets of a scope, one Lua script per atomic step.

Every key of a scope is ``<prefix>:quota:{<tenant>:<scope>}:<kind>``, percent-encoded as a run's
keys are (``_shared``), so a Redis Cluster keeps a scope in one slot and every script runs
unchanged on it; the ``quota:`` before the tag keeps a scope's keys apart from a run's::

    agentrun:quota:{T:S}:admitted    hash    run id -> the fence it was admitted under
    agentrun:quota:{T:S}:window:W    hash    spent and reserved micros and tokens of window W
    agentrun:quota:{T:S}:windows     set     the scope's window names, for ``forget``

A script counts the admitted hash and adds to it in one step, so however many replicas race, at
most ``limit`` runs are in it. A window is a hash whose ``PEXPIRE`` every write pushes ``ttl``
ahead: the server expires it on its own clock, and a read after that finds nothing, so an
expired window starts from zero. Sums are added with ``HINCRBY`` (64-bit integers on the
server); the check against the allowance is done in Lua's doubles, exact below 2**53 micros.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass
from typing import cast

from agentrun._quotas import Allowance, Spend, Spending, refuse_superseded
from agentrun.stores._redis._shared import (
    RedisStore,
    lua,
    part,
    text,
    ttl_micros,
)

ADMIT = lua("""
local recorded = redis.call('HGET', KEYS[1], ARGV[1])
if recorded then
  if tonumber(ARGV[2]) < tonumber(recorded) then return {'stale', recorded} end
elseif redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then
  return {'full'}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return {'ok'}
""")

LEAVE = lua("""
local recorded = redis.call('HGET', KEYS[1], ARGV[1])
if not recorded then return {'ok'} end
if tonumber(ARGV[2]) < tonumber(recorded) then return {'stale', recorded} end
redis.call('HDEL', KEYS[1], ARGV[1])
return {'ok'}
""")

WINDOW = """
local function sum(field)
  return tonumber(redis.call('HGET', KEYS[1], field) or '0')
end
local function touch(ttl_us)
  local ttl_ms = math.ceil(tonumber(ttl_us) / 1000)
  redis.call('PEXPIRE', KEYS[1], ttl_ms)
  redis.call('SADD', KEYS[2], ARGV[1])
  if redis.call('PTTL', KEYS[2]) < ttl_ms then redis.call('PEXPIRE', KEYS[2], ttl_ms) end
end
"""

RESERVE = lua(
    WINDOW,
    """
local ask_micros, ask_tokens = tonumber(ARGV[2]), tonumber(ARGV[3])
if ARGV[4] ~= '' and sum('spent_micros') + sum('reserved_micros') + ask_micros
    > tonumber(ARGV[4]) then
  return {'over'}
end
if ARGV[5] ~= '' and sum('spent_tokens') + sum('reserved_tokens') + ask_tokens
    > tonumber(ARGV[5]) then
  return {'over'}
end
redis.call('HINCRBY', KEYS[1], 'reserved_micros', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'reserved_tokens', ARGV[3])
touch(ARGV[6])
return {'ok'}
""",
)

SETTLE = lua(
    WINDOW,
    """
local function lower(field, by)
  redis.call('HSET', KEYS[1], field, int(math.max(0, sum(field) - tonumber(by))))
end
lower('reserved_micros', ARGV[2])
lower('reserved_tokens', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'spent_micros', ARGV[4])
redis.call('HINCRBY', KEYS[1], 'spent_tokens', ARGV[5])
touch(ARGV[6])
return {'ok'}
""",
)

_SUMS = ("spent_micros", "spent_tokens", "reserved_micros", "reserved_tokens")


@dataclass(frozen=True)
class ScopeKeys:
    """The keys of one scope, all in one Cluster slot."""

    base: str

    @classmethod
    def of(cls, prefix: str, tenant: str, scope: str) -> ScopeKeys:
        return cls(f"{prefix}:quota:{{{part(tenant)}:{part(scope)}}}:")

    @property
    def admitted(self) -> str:
        return self.base + "admitted"

    @property
    def windows(self) -> str:
        return self.base + "windows"

    def window(self, name: str) -> str:
        return f"{self.base}window:{part(name)}"

    def for_window(self, name: str) -> list[str]:
        """The keys a window's script names: the window's, then the scope's set of windows."""
        return [self.window(name), self.windows]


class RedisQuotaStore(RedisStore):
    name = "Redis quota store"

    def _scope(self, tenant: str, scope: str) -> ScopeKeys:
        return ScopeKeys.of(self._prefix, tenant, scope)

    async def admit(self, tenant: str, scope: str, run_id: str, *, fence: int, limit: int) -> bool:
        keys = self._scope(tenant, scope)
        reply = await self._run(ADMIT, "admit a run", None, [keys.admitted], [run_id, fence, limit])
        if reply[0] == b"stale":
            refuse_superseded(
                tenant=tenant,
                scope=scope,
                run_id=run_id,
                fence=fence,
                recorded=int(text(reply[1])),
                leaving=False,
            )
        return reply[0] == b"ok"

    async def leave(self, tenant: str, scope: str, run_id: str, *, fence: int) -> None:
        keys = self._scope(tenant, scope)
        reply = await self._run(LEAVE, "let a run leave", None, [keys.admitted], [run_id, fence])
        if reply[0] == b"stale":
            refuse_superseded(
                tenant=tenant,
                scope=scope,
                run_id=run_id,
                fence=fence,
                recorded=int(text(reply[1])),
                leaving=True,
            )

    async def admitted(self, tenant: str, scope: str) -> dict[str, int]:
        keys = self._scope(tenant, scope)
        found = await self._call(
            "read the runs admitted",
            None,
            cast(Awaitable[dict[bytes, bytes]], self._client.hgetall(keys.admitted)),
        )
        return {run_id.decode(): int(fence) for run_id, fence in found.items()}

    async def reserve(
        self, tenant: str, scope: str, window: str, *, ask: Spend, limit: Allowance, ttl: float
    ) -> bool:
        keys = self._scope(tenant, scope)
        reply = await self._run(
            RESERVE,
            "reserve in a window",
            None,
            keys.for_window(window),
            [
                window,
                ask.micros,
                ask.tokens,
                "" if limit.micros is None else limit.micros,
                "" if limit.tokens is None else limit.tokens,
                ttl_micros(ttl),
            ],
        )
        return reply[0] == b"ok"

    async def settle(
        self, tenant: str, scope: str, window: str, *, reserved: Spend, used: Spend, ttl: float
    ) -> None:
        keys = self._scope(tenant, scope)
        await self._run(
            SETTLE,
            "settle in a window",
            None,
            keys.for_window(window),
            [window, reserved.micros, reserved.tokens, used.micros, used.tokens, ttl_micros(ttl)],
        )

    async def spending(self, tenant: str, scope: str, window: str) -> Spending:
        keys = self._scope(tenant, scope)
        sums = await self._call(
            "read a window",
            None,
            cast(
                Awaitable[list[bytes | None]],
                self._client.hmget(keys.window(window), list(_SUMS)),
            ),
        )
        spent_micros, spent_tokens, reserved_micros, reserved_tokens = (
            int(value or 0) for value in sums
        )
        return Spending(
            spent=Spend(micros=spent_micros, tokens=spent_tokens),
            reserved=Spend(micros=reserved_micros, tokens=reserved_tokens),
        )

    async def forget(self, tenant: str, scope: str) -> None:
        """Two steps: the window names, then every key at once. A window first written between
        them is left, to expire on its own."""
        keys = self._scope(tenant, scope)
        names = await self._call(
            "read a scope's windows",
            None,
            cast(Awaitable[set[bytes]], self._client.smembers(keys.windows)),
        )
        windows = [keys.window(name.decode()) for name in names]
        await self._call(
            "forget a scope", None, self._client.delete(keys.admitted, keys.windows, *windows)
        )
