"""``RedisLedger``: what a run has spent, as a hash of charges and a running total.

A charge is one script: it checks and raises the run's fence, returns the total unchanged for a
``charge_id`` already counted (a retry after an unclear failure), refuses a charge that would take
the total past the budget, and otherwise records the charge and adds it with ``INCRBY`` (64-bit
integer arithmetic on the server, not Lua's doubles). Both keys live in the run's slot.

A run's charges are listed (``charges``) with one ``HGETALL`` of its hash of charges, which a
boundary commit (``RedisCommitStore``) writes too. A hash keeps no order, so the charges are
sorted here, by charge id in code point order, as every ledger lists them.
"""

from __future__ import annotations

from agentrun._errors import BudgetExceededError
from agentrun._storecore.classify import reading
from agentrun.stores._redis._shared import RedisStore, as_bytes, lua, text

CHARGE = lua("""
local current = refused(KEYS[1], tonumber(ARGV[1]))
if current then return {'stale', int(current)} end
local spent = redis.call('GET', KEYS[3]) or '0'
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then return {'ok', spent} end
if ARGV[4] ~= '' and tonumber(spent) + tonumber(ARGV[3]) > tonumber(ARGV[4]) then
  return {'over', spent}
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return {'ok', redis.call('INCRBY', KEYS[3], ARGV[3])}
""")


class RedisLedger(RedisStore):
    name = "Redis ledger"

    async def charge(
        self,
        tenant: str,
        run_id: str,
        charge_id: str,
        micros: int,
        *,
        budget: int | None,
        fence: int,
    ) -> int:
        run = self._keys(tenant, run_id)
        reply = await self._run(
            CHARGE,
            "record a charge",
            run,
            [run.fence, run.charges, run.spent],
            [fence, charge_id, micros, "" if budget is None else budget],
        )
        self._admitted(reply, run, fence, "ledger charge")
        spent = int(text(reply[1]))
        if reply[0] == b"over":
            assert budget is not None
            raise BudgetExceededError(run_id=run_id, spent=spent, charge=micros, budget=budget)
        return spent

    async def spent(self, tenant: str, run_id: str) -> int:
        run = self._keys(tenant, run_id)
        total = as_bytes(
            await self._call("read what a run spent", run, self._client.get(run.spent))
        )
        if total is None:
            return 0
        with reading(self.name, tenant, run_id, f"the total spent, {total[:40]!r}"):
            return int(total)

    async def charges(self, tenant: str, run_id: str) -> tuple[tuple[str, int], ...]:
        """``ChargeLister.charges``, from the run's hash of charges (see the module)."""
        run = self._keys(tenant, run_id)
        stored = await self._call("list a run's charges", run, self._client.hgetall(run.charges))
        listed: list[tuple[str, int]] = []
        for field, value in stored.items():
            with reading(self.name, tenant, run_id, f"the charge {field[:60]!r}, {value[:40]!r}"):
                listed.append((field.decode() if isinstance(field, bytes) else field, int(value)))
        return tuple(sorted(listed))

    async def forget(self, tenant: str, run_id: str) -> None:
        run = self._keys(tenant, run_id)
        await self._call("forget a run's charges", run, self._client.delete(run.charges, run.spent))
