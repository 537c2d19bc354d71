"""``LedgerConformance``: charges counted once per id, a budget that refuses whole charges,
fenced writes, isolated runs."""

from __future__ import annotations

import time

import pytest

from agentrun._errors import BudgetExceededError, ConfigurationError, StaleFenceError
from agentrun._identifiers import MAX_ID_BYTES, MAX_KEY_BYTES
from agentrun._ledger import Ledger
from agentrun.testing._base import ConformanceBase, refuses_unusable_ids
from agentrun.testing.hostile import longest


class LedgerConformance(ConformanceBase):
    role = "ledger"

    async def test_charges_add_up_once_each(self, store: Ledger, tenant: str) -> None:
        assert await store.spent(tenant, "run") == 0
        assert await store.charge(tenant, "run", "c1", 100, budget=None, fence=1) == 100
        assert await store.charge(tenant, "run", "c2", 50, budget=None, fence=1) == 150
        assert await store.charge(tenant, "run", "c1", 100, budget=None, fence=1) == 150
        assert await store.spent(tenant, "run") == 150

    async def test_a_charge_over_budget_is_refused_whole(self, store: Ledger, tenant: str) -> None:
        await store.charge(tenant, "run", "c1", 900, budget=1000, fence=1)
        with pytest.raises(BudgetExceededError) as caught:
            await store.charge(tenant, "run", "c2", 200, budget=1000, fence=1)
        assert (caught.value.spent, caught.value.charge, caught.value.budget) == (900, 200, 1000)
        assert await store.spent(tenant, "run") == 900
        assert await store.charge(tenant, "run", "c3", 100, budget=1000, fence=1) == 1000

    async def test_refuses_a_lower_fence(self, store: Ledger, tenant: str) -> None:
        await store.charge(tenant, "run", "c1", 1, budget=None, fence=2)
        with pytest.raises(StaleFenceError):
            await store.charge(tenant, "run", "c2", 1, budget=None, fence=1)
        assert await store.spent(tenant, "run") == 1

    async def test_runs_are_isolated_and_forgotten(
        self, store: Ledger, tenant: str, other_tenant: str
    ) -> None:
        await store.charge(tenant, "run", "c1", 10, budget=None, fence=1)
        await store.charge(other_tenant, "run", "c1", 20, budget=None, fence=1)
        await store.charge(tenant, "run:x", "c1", 30, budget=None, fence=1)
        await store.forget(tenant, "run")
        assert await store.spent(tenant, "run") == 0
        assert await store.spent(other_tenant, "run") == 20
        assert await store.spent(tenant, "run:x") == 30

    charges_before: int = 200_000
    """How many charges ``test_a_charge_costs_the_same_however_many_came_before`` puts on a run."""

    async def preload_charges(self, store: Ledger, tenant: str, run_id: str, count: int) -> None:
        """Give the run ``count`` charges of one micro each, as fast as the store allows.

        This default goes through ``charge`` and so takes as long as ``count`` charges do;
        override it with the store's bulk write (the suites for the kit's stores do).
        """
        for index in range(count):
            await store.charge(tenant, run_id, f"preloaded-{index}", 1, budget=None, fence=1)

    async def test_a_charge_costs_the_same_however_many_came_before(
        self, store: Ledger, tenant: str
    ) -> None:
        """A charge must not re-read the run's earlier charges: summing them at every charge
        makes a run's charges cost the square of their number."""
        await self.preload_charges(store, tenant, "long", self.charges_before)
        for run_id in ("long", "short"):  # whatever a store sets up on a run's first charge
            await store.charge(tenant, run_id, "first", 1, budget=10**12, fence=1)
        long, short = await _fastest_charge_seconds(store, tenant, ("long", "short"))
        assert long < 4 * short + 0.00002, (
            f"a charge on a run with {self.charges_before} charges took {long * 1000:.3f} ms, "
            f"on a run with one {short * 1000:.3f} ms"
        )
        assert await store.spent(tenant, "long") == self.charges_before + 1 + _TIMED

    async def test_ids_as_long_as_the_limit_are_kept(self, store: Ledger, tenant: str) -> None:
        tenant, run_id = longest(MAX_ID_BYTES, tenant), longest(MAX_ID_BYTES, "run")
        charge_id = longest(MAX_KEY_BYTES, "charge")
        assert await store.charge(tenant, run_id, charge_id, 7, budget=None, fence=1) == 7
        assert await store.spent(tenant, run_id) == 7
        await store.forget(tenant, run_id)

    async def test_ids_no_store_can_key_on_are_refused(self, store: Ledger, tenant: str) -> None:
        await refuses_unusable_ids(lambda t, r: store.charge(t, r, "c1", 1, budget=None, fence=1))
        await refuses_unusable_ids(store.spent)
        await refuses_unusable_ids(store.forget)
        with pytest.raises(ConfigurationError, match=r"^charge id"):
            await store.charge(tenant, "run", "c" * (MAX_KEY_BYTES + 1), 1, budget=None, fence=1)
        assert await store.spent(tenant, "run") == 0


_TIMED = 25


async def _fastest_charge_seconds(
    store: Ledger, tenant: str, run_ids: tuple[str, str]
) -> tuple[float, float]:
    """The fastest of ``_TIMED`` charges on each run, the runs' charges taken in turn.

    Taking turns puts a busy machine's pauses on both runs alike, and the fastest charge is the
    one nothing else delayed: a store that re-reads the run's charges cannot be fast even once,
    so the comparison stays sharp while a median of charges under load made it flaky."""
    took: dict[str, list[float]] = {run_id: [] for run_id in run_ids}
    for index in range(_TIMED):
        for run_id in run_ids:
            started = time.perf_counter()
            await store.charge(tenant, run_id, f"timed-{index}", 1, budget=10**12, fence=1)
            took[run_id].append(time.perf_counter() - started)
    first, second = run_ids
    return min(took[first]), min(took[second])
