"""A run's place under its namespace's quota (``_admission``) and the namespace's budget per
model call (``_namespace_budget``), on the memory quota store (the store's own atomicity is
``QuotaStoreConformance``'s, on every store).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentrun import Backend, QuotaSpentError, StaleFenceError, Usage
from agentrun._leases import RunLease
from agentrun.operator._admission import TENANT, Queued, take_place, window_of
from agentrun.operator._namespace_budget import FIRST_CALL_SHARE, NamespaceBudget
from agentrun.operator._quota_resource import NamedQuota, effective_quota
from agentrun.stores import open_backend

NAMESPACE = "team-a"


@pytest.fixture
async def backend() -> AsyncIterator[Backend]:
    async with await open_backend("memory://") as opened:
        yield opened


def _quota(spec: dict[str, Any]) -> NamedQuota:
    body = {"metadata": {"name": "team", "namespace": NAMESPACE}, "spec": spec}
    quota = effective_quota([body])
    assert quota is not None
    return quota


def _lease(run_id: str, fence: int = 1) -> RunLease:
    return RunLease(tenant=NAMESPACE, run_id=run_id, holder="replica-a", fence=fence, remaining=5)


async def test_a_run_past_the_cap_is_queued_and_a_place_given_back_frees_one(
    backend: Backend,
) -> None:
    quota = _quota({"maxActiveRuns": 1})
    first = await take_place(backend.quotas, NAMESPACE, quota, _lease("a"), starting=True)
    assert first is not None
    with pytest.raises(Queued, match="RunQuota team: 1 runs may be active"):
        await take_place(backend.quotas, NAMESPACE, quota, _lease("b"), starting=True)
    # The run taken up again under a later fence keeps its one place.
    again = await take_place(backend.quotas, NAMESPACE, quota, _lease("a", 2), starting=False)
    assert again is not None
    assert await backend.quotas.admitted(TENANT, NAMESPACE) == {"a": 2}
    # The superseded holder's give-back leaves its successor's place alone.
    await first.give_back()
    assert await backend.quotas.admitted(TENANT, NAMESPACE) == {"a": 2}
    with pytest.raises(StaleFenceError):
        await take_place(backend.quotas, NAMESPACE, quota, _lease("a", 1), starting=False)
    await again.give_back()
    assert await take_place(backend.quotas, NAMESPACE, quota, _lease("b"), starting=True)


async def test_no_quota_or_no_cap_takes_no_place(backend: Backend) -> None:
    budget_only = _quota({"budget": {"maxTokens": 100}})
    assert await take_place(backend.quotas, NAMESPACE, None, _lease("a"), starting=True) is None
    assert (
        await take_place(backend.quotas, NAMESPACE, budget_only, _lease("a"), starting=True) is None
    )
    assert await backend.quotas.admitted(TENANT, NAMESPACE) == {}


async def test_a_pause_budget_refuses_the_call_that_finds_no_room(backend: Backend) -> None:
    quota = _quota({"budget": {"maxTokens": 1000}, "whenSpent": "Pause"})
    assert quota.spec.budget is not None
    gate = NamespaceBudget(backend.quotas, NAMESPACE, quota, quota.spec.budget, "run-a")
    window = window_of(quota.spec.budget)
    await gate.reserve()  # the first call: a hundredth of the budget
    spending = await backend.quotas.spending(TENANT, NAMESPACE, window)
    assert spending.reserved.tokens == 1000 // FIRST_CALL_SHARE
    await gate.settle(Usage(input_tokens=250, output_tokens=50), 7)
    spending = await backend.quotas.spending(TENANT, NAMESPACE, window)
    assert (spending.spent.tokens, spending.spent.micros, spending.reserved.tokens) == (300, 7, 0)
    # Later calls reserve what the costliest so far cost: 300, twice more fits, not a third.
    for _ in range(2):
        await gate.reserve()
        await gate.settle(Usage(input_tokens=300), 7)
    with pytest.raises(QuotaSpentError, match="RunQuota team's budget"):
        await gate.reserve()
    spending = await backend.quotas.spending(TENANT, NAMESPACE, window)
    assert (spending.spent.tokens, spending.reserved.tokens) == (900, 0)


async def test_a_failed_call_gives_its_reservation_back(backend: Backend) -> None:
    quota = _quota({"budget": {"maxCostMicros": 10_000}, "whenSpent": "Pause"})
    assert quota.spec.budget is not None
    gate = NamespaceBudget(backend.quotas, NAMESPACE, quota, quota.spec.budget, "run-a")
    await gate.reserve()
    await gate.settle(Usage(), 0)
    spending = await backend.quotas.spending(TENANT, NAMESPACE, window_of(quota.spec.budget))
    assert (spending.spent.micros, spending.reserved.micros) == (0, 0)


async def test_a_queue_budget_counts_calls_but_refuses_none_and_queues_new_runs(
    backend: Backend,
) -> None:
    quota = _quota({"budget": {"maxTokens": 100}, "whenSpent": "Queue"})
    assert quota.spec.budget is not None
    gate = NamespaceBudget(backend.quotas, NAMESPACE, quota, quota.spec.budget, "run-a")
    for _ in range(3):
        await gate.reserve()
        await gate.settle(Usage(input_tokens=60), 1)
    spending = await backend.quotas.spending(TENANT, NAMESPACE, window_of(quota.spec.budget))
    assert spending.spent.tokens == 180
    with pytest.raises(Queued, match="budget of namespace team-a for the window"):
        await take_place(backend.quotas, NAMESPACE, quota, _lease("b"), starting=True)
    # A run that has started (resumed) is not held back by it.
    assert await take_place(backend.quotas, NAMESPACE, quota, _lease("a"), starting=False) is None
