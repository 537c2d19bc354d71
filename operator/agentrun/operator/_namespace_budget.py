"""A namespace's budget per window (its RunQuota's ``spec.budget``), spent by its runs' model
calls: the ``SpendGate`` a run's worker hands its runner.

Every model call of every run of the namespace reserves its cost in the quota store before it
is sent and settles it after (``agentrun.runner._spend_gate``), so replicas and runs calling at
once never see "room left" twice for the same room. What a call reserves is what the run's
costliest call so far cost (tokens and micros alike); its first, a hundredth of the budget. A
call costing more than it reserved can take the budget past its limit by the difference, and
no further: the next reservation finds no room.

What happens then is the quota's ``whenSpent``:

* ``Pause``: a run's next model call finds no room and is not sent: the run stops there as
  ``QuotaSpent``, its checkpoint kept, and waits (``_quota_queue``) for the window to turn or
  the budget to be raised.
* ``Queue``: runs that have started go on, their calls counted but not refused; runs that have
  not started yet wait as ``Queued`` (``_admission``).

Windows are aligned on the Unix epoch (``window_start``), so every replica counts the same one,
and each window's record outlives the window by as long again, so a quota's status can still
say what the last one spent.
"""

from __future__ import annotations

import logging

from agentrun._errors import AgentRunError, QuotaSpentError
from agentrun._messages import Usage
from agentrun._quotas import QuotaStore, Spend
from agentrun.operator._admission import TENANT, allowance, window_of
from agentrun.operator._quota_resource import Budget, NamedQuota, WhenSpent

FIRST_CALL_SHARE = 100
"""A run's first call reserves the budget divided by this (nothing is known of its cost yet)."""

log = logging.getLogger(__name__)


class NamespaceBudget:
    """One attempt's gate on its namespace's budget (a ``SpendGate``)."""

    def __init__(
        self, quotas: QuotaStore, namespace: str, quota: NamedQuota, budget: Budget, run_id: str
    ) -> None:
        self.quotas = quotas
        self.namespace = namespace
        self.quota = quota
        self.budget = budget
        self.run_id = run_id
        self.limit = allowance(budget)
        self.ttl = 2 * budget.window.total_seconds()
        self._largest = Spend(
            micros=(self.limit.micros or 0) // FIRST_CALL_SHARE,
            tokens=(self.limit.tokens or 0) // FIRST_CALL_SHARE,
        )
        self._reserved: tuple[str, Spend] | None = None

    async def reserve(self) -> None:
        window = window_of(self.budget)
        if self.quota.spec.when_spent is not WhenSpent.PAUSE:
            self._reserved = (window, Spend(micros=0, tokens=0))  # counted, never refused
            return
        ask = self._largest
        if not await self.quotas.reserve(
            TENANT, self.namespace, window, ask=ask, limit=self.limit, ttl=self.ttl
        ):
            raise QuotaSpentError(
                run_id=self.run_id,
                budget=f"RunQuota {self.quota.name}'s budget for the window {window}",
            )
        self._reserved = (window, ask)

    async def settle(self, used: Usage, cost_micros: int) -> None:
        if self._reserved is None:
            return
        (window, reserved), self._reserved = self._reserved, None
        spent = Spend(micros=cost_micros, tokens=used.input_tokens + used.output_tokens)
        self._largest = Spend(
            micros=max(self._largest.micros, spent.micros),
            tokens=max(self._largest.tokens, spent.tokens),
        )
        try:
            await self.quotas.settle(
                TENANT, self.namespace, window, reserved=reserved, used=spent, ttl=self.ttl
            )
        except AgentRunError as error:
            log.warning(
                "could not settle run %s's model call with %s's budget (it stays reserved): %s",
                self.run_id,
                self.namespace,
                error,
            )
