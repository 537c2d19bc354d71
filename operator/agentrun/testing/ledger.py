"""``LedgerConformance``: charges counted once per id, a budget that refuses whole charges,
fenced writes, isolated runs."""

from __future__ import annotations

import pytest

from agentrun.errors import BudgetExceededError, StaleFenceError
from agentrun.ledger import Ledger
from agentrun.testing._base import ConformanceBase


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
