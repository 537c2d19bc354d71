"""A run's place among its namespace's active runs: taken in the store under the run's fence.

A namespace's RunQuota may cap the runs doing work at once (``spec.maxActiveRuns``). Counting
them from the watch would let two replicas, or one replica reading a view a moment old, start
one run too many; so each run takes its place in the quota store (``agentrun._quotas``) as its
worker takes the run's lease, in one atomic step that counts the places taken, under the
lease's fence: a holder superseded since cannot take a place, nor give back the place of the
holder after it. A run that finds no place is refused as ``Queued`` before it does anything: it
gives its lease back and waits, holding nothing, until the scheduler lets it go again
(``_quota_queue``).

A namespace's budget is kept in the same store (``_namespace_budget``): while it is spent, a run
that has not started yet is refused as ``Queued`` too, whatever its quota's ``whenSpent``.

A worker gives the place back when its attempt ends (the run waits, is over, or is handed to
another replica). One that dies first leaves it taken; the scheduler frees such places once the
watch shows the run stopped under that fence (``QuotaQueue``), and a run taken over re-takes its
own place under the new fence, counted once.

Places are kept under ``TENANT``, one scope per namespace: whichever quota a namespace has, by
whatever name, counts the same runs.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from agentrun._errors import AgentRunError, StaleFenceError
from agentrun._leases import RunLease
from agentrun._outcomes import Outcome
from agentrun._quotas import Allowance, QuotaStore, Spend, Spending
from agentrun.operator._quota_resource import Budget, NamedQuota, window_key, window_start

TENANT = "agentrun.dev/quotas"
"""The tenant the places are kept under: no namespace or tenant label can take this name (it
holds a ``/``), so no run's records share a key with them."""

QUOTA_REASONS = frozenset({Outcome.QUEUED, Outcome.QUOTA_SPENT})
"""The outcomes of a run that waits on its namespace's quota (``_quota_queue`` lets it go)."""

log = logging.getLogger(__name__)


class Queued(AgentRunError):
    """The namespace's quota has no room for the run now; it waits, holding no lease."""

    outcome = Outcome.QUEUED

    def __init__(self, quota: NamedQuota, why: str) -> None:
        self.quota = quota.name
        super().__init__(f"RunQuota {quota.name}: {why}")


def allowance(budget: Budget) -> Allowance:
    return Allowance(micros=budget.max_cost_micros, tokens=budget.max_tokens)


def window_of(budget: Budget, now: datetime | None = None) -> str:
    """The key of the budget's window ``now`` falls in (windows are aligned on the epoch, so
    every replica counts the same one)."""
    return window_key(window_start(now or datetime.now(UTC), budget.window))


SMALLEST = Spend(micros=1, tokens=1)


def exhausted(spending: Spending, limit: Allowance) -> bool:
    """Whether nothing more can be reserved: spent and reserved reach a limit."""
    return not limit.leaves_room(spending, SMALLEST)


class Place:
    """One run's place under its namespace's quota, taken under one lease's fence."""

    def __init__(self, quotas: QuotaStore, namespace: str, lease: RunLease) -> None:
        self.quotas = quotas
        self.namespace = namespace
        self.lease = lease

    async def give_back(self) -> None:
        """Give the place back; a later holder's place (a higher fence) is left alone, and a
        store that cannot be reached leaves it to the scheduler's sweep."""
        try:
            await self.quotas.leave(
                TENANT, self.namespace, self.lease.run_id, fence=self.lease.fence
            )
        except StaleFenceError:
            pass  # a later holder took the place again under its fence: it is theirs
        except AgentRunError as error:
            log.warning(
                "could not give back run %s's place in %s's quota (freed later): %s",
                self.lease.run_id,
                self.namespace,
                error,
            )


async def take_place(
    quotas: QuotaStore,
    namespace: str,
    quota: NamedQuota | None,
    lease: RunLease,
    *,
    starting: bool,
) -> Place | None:
    """Take the run's place under ``quota``: None when the quota caps no active runs (or there
    is none). A run ``starting`` (not resumed) waits too while the quota's budget is spent.

    Raises:
        Queued: Every place is taken, or the budget is spent and the run has not started.
        StaleFenceError: A later holder of the run holds its place.
    """
    if quota is None:
        return None
    budget = quota.spec.budget
    if starting and budget is not None:
        window = window_of(budget)
        if exhausted(await quotas.spending(TENANT, namespace, window), allowance(budget)):
            raise Queued(
                quota,
                f"the budget of namespace {namespace} for the window {window} is spent; the "
                "run starts when the window turns or the budget is raised",
            )
    limit = quota.spec.max_active_runs
    if limit is None:
        return None
    if not await quotas.admit(TENANT, namespace, lease.run_id, fence=lease.fence, limit=limit):
        raise Queued(
            quota,
            f"{limit} runs may be active at once in namespace {namespace}, and {limit} are; "
            "the run starts when one of them stops",
        )
    return Place(quotas, namespace, lease)
