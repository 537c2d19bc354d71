"""``RedisIdempotencyStore``: one hash per run, a JSON record per idempotency key.

Every write is one script, so a claim is decided atomically (twenty concurrent ``begin`` calls
yield one winner) and each fenced write checks and raises the run's fence in the same step. A
claim given a TTL carries its expiry in the server's microseconds, compared with ``TIME`` inside
the script; an expired claim reads as None and is dropped the next time it is touched, as in the
memory store. Claims without a TTL never expire: an in-flight record is the evidence that a call
may have happened, and only its holder (under its fence) or a person (``settle``) may end it.

Records are JSON objects whose numbers are written as strings, because Lua's ``cjson`` would
round a 16-digit fence.
"""

from __future__ import annotations

from agentrun._base import FrozenModel
from agentrun._idempotency import (
    Claim,
    ClaimState,
    IdempotencyRecord,
    ListedRecord,
    not_holder,
)
from agentrun._storecore.classify import reading
from agentrun.stores._redis._shared import RedisStore, RunKeys, lua, text, ttl_micros

RECORDS = """
local function decoded(raw)
  local ok, record = pcall(cjson.decode, raw)
  if not ok or type(record) ~= 'table' or not tonumber(record.fence) then
    unreadable('an idempotency record is not a JSON object with a fence')
  end
  return record
end
local function live(claims, key, now)
  local raw = redis.call('HGET', claims, key)
  if not raw then return false end
  local record = decoded(raw)
  if record.expires and tonumber(record.expires) <= now then
    redis.call('HDEL', claims, key)
    return false
  end
  return raw, record
end
local function listed(claims, now)
  local out = {}
  local all = redis.call('HGETALL', claims)
  for index = 1, #all, 2 do
    local raw, record = live(claims, all[index], now)
    if raw then
      out[#out + 1] = all[index]
      out[#out + 1] = cjson.encode({state = record.state, holder = record.holder,
        fence = record.fence, call_id = record.call_id, tool = record.tool})
    end
  end
  return out
end
"""

BEGIN = lua(
    RECORDS,
    """
local current = refused(KEYS[1], tonumber(ARGV[3]))
if current then return {'stale', int(current)} end
local now = now_us()
local raw = live(KEYS[2], ARGV[1], now)
if raw then return {'held', raw, int(now)} end
local record = {state = 'in_flight', holder = ARGV[2], fence = ARGV[3]}
if ARGV[4] ~= '' then record.expires = int(now + tonumber(ARGV[4])) end
if ARGV[5] ~= '' then record.call_id = ARGV[5] end
if ARGV[6] ~= '' then record.tool = ARGV[6] end
raw = cjson.encode(record)
redis.call('HSET', KEYS[2], ARGV[1], raw)
return {'won', raw, int(now)}
""",
)

OWN = lua(
    RECORDS,
    """
local fence = tonumber(ARGV[3])
local current = refused(KEYS[1], fence)
if current then return {'stale', int(current)} end
local raw, record = live(KEYS[2], ARGV[1], now_us())
if not raw or record.state ~= 'in_flight' or record.holder ~= ARGV[2]
    or tonumber(record.fence) ~= fence then
  return {'not_holder', raw and record.fence or ARGV[3]}
end
if ARGV[4] == 'abandon' then
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  record.state = 'completed'
  record.outcome = ARGV[5]
  record.expires = nil
  redis.call('HSET', KEYS[2], ARGV[1], cjson.encode(record))
end
return {'ok'}
""",
)

READ = lua(
    RECORDS,
    """
local now = now_us()
local raw = live(KEYS[1], ARGV[1], now)
if not raw then return {'none'} end
return {'found', raw, int(now)}
""",
)

LIST = lua(RECORDS, "return listed(KEYS[1], now_us())")

SETTLE = lua(
    RECORDS,
    """
local previous = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[5] ~= '' then
  local claim = previous and decoded(previous)
  if not claim or claim.state ~= 'in_flight' or claim.holder ~= ARGV[5]
      or tonumber(claim.fence) ~= tonumber(ARGV[6]) then
    return {'moved'}
  end
end
if ARGV[4] == 'not_ran' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return {'ok'}
end
local fence = previous and decoded(previous).fence or '0'
redis.call('HSET', KEYS[1], ARGV[1],
  cjson.encode({state = 'completed', holder = ARGV[2], fence = fence, outcome = ARGV[3]}))
return {'ok'}
""",
)


class _Stored(FrozenModel):
    state: ClaimState
    holder: str
    fence: int
    outcome: str | None = None
    expires: int | None = None
    call_id: str | None = None
    tool: str | None = None


def listed_records(run: RunKeys, reply: object) -> tuple[ListedRecord, ...]:
    """The records the Lua ``listed`` returned (key, record, key, record...), as ``records``
    lists them; also read by ``RedisCommitStore.read_run_and_records``."""
    assert isinstance(reply, list), f"the listing was {type(reply).__name__}"
    keys = [text(key) for key in reply[::2]]
    return tuple(
        ListedRecord.of(key, _stored(run, key, raw))
        for key, raw in zip(keys, reply[1::2], strict=True)
    )


def _stored(run: RunKeys, key: str, raw: bytes | int) -> _Stored:
    with reading(RedisIdempotencyStore.name, run.tenant, run.run_id, f"idempotency record {key!r}"):
        return _Stored.model_validate_json(raw if isinstance(raw, bytes) else str(raw))


def _view(run: RunKeys, key: str, raw: bytes | int, now: bytes | int) -> IdempotencyRecord:
    stored = _stored(run, key, raw)
    remaining = (
        None if stored.expires is None else max(0.0, (stored.expires - int(text(now))) / 1_000_000)
    )
    return IdempotencyRecord(
        key=key,
        state=stored.state,
        holder=stored.holder,
        fence=stored.fence,
        outcome=stored.outcome,
        remaining=remaining,
        call_id=stored.call_id,
        tool=stored.tool,
    )


class RedisIdempotencyStore(RedisStore):
    name = "Redis idempotency store"

    async def begin(
        self,
        tenant: str,
        run_id: str,
        key: str,
        *,
        holder: str,
        fence: int,
        ttl: float | None = None,
        call_id: str | None = None,
        tool: str | None = None,
    ) -> Claim:
        micros = "" if ttl is None else str(ttl_micros(ttl))
        run = self._keys(tenant, run_id)
        reply = await self._run(
            BEGIN,
            "claim an idempotency key",
            run,
            [run.fence, run.claims],
            [key, holder, fence, micros, call_id or "", tool or ""],
        )
        self._admitted(reply, run, fence, f"claim of {key}")
        return Claim(won=reply[0] == b"won", record=_view(run, key, reply[1], reply[2]))

    async def _end_own(
        self,
        tenant: str,
        run_id: str,
        key: str,
        *,
        holder: str,
        fence: int,
        what: str,
        mode: str,
        outcome: str = "",
    ) -> None:
        run = self._keys(tenant, run_id)
        reply = await self._run(
            OWN, what, run, [run.fence, run.claims], [key, holder, fence, mode, outcome]
        )
        self._admitted(reply, run, fence, what)
        if reply[0] == b"not_holder":
            raise not_holder(
                tenant, run_id, what, holder=holder, fence=fence, claim_fence=int(text(reply[1]))
            )

    async def record(
        self, tenant: str, run_id: str, key: str, outcome: str, *, holder: str, fence: int
    ) -> None:
        await self._end_own(
            tenant,
            run_id,
            key,
            holder=holder,
            fence=fence,
            what=f"outcome of {key}",
            mode="record",
            outcome=outcome,
        )

    async def abandon(self, tenant: str, run_id: str, key: str, *, holder: str, fence: int) -> None:
        await self._end_own(
            tenant,
            run_id,
            key,
            holder=holder,
            fence=fence,
            what=f"abandoning {key}",
            mode="abandon",
        )

    async def read(self, tenant: str, run_id: str, key: str) -> IdempotencyRecord | None:
        run = self._keys(tenant, run_id)
        reply = await self._run(READ, "read an idempotency record", run, [run.claims], [key])
        return None if reply[0] == b"none" else _view(run, key, reply[1], reply[2])

    async def records(self, tenant: str, run_id: str) -> tuple[ListedRecord, ...]:
        run = self._keys(tenant, run_id)
        reply = await self._run(LIST, "list the idempotency records", run, [run.claims], [])
        return listed_records(run, reply)

    async def settle(
        self,
        tenant: str,
        run_id: str,
        key: str,
        outcome: str | None,
        *,
        by: str,
        claimed_by: tuple[str, int] | None = None,
    ) -> bool:
        run = self._keys(tenant, run_id)
        holder, fence = claimed_by if claimed_by is not None else ("", 0)
        reply = await self._run(
            SETTLE,
            "settle an idempotency record",
            run,
            [run.claims],
            [key, by, outcome or "", "not_ran" if outcome is None else "ran", holder, fence],
        )
        return reply[0] == b"ok"

    async def forget(self, tenant: str, run_id: str) -> None:
        run = self._keys(tenant, run_id)
        await self._call("forget idempotency records", run, self._client.delete(run.claims))
