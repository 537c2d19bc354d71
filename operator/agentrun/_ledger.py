"""What a run has spent, kept apart from the checkpoint because it must outlive it.

Spend is a number that only goes up. The checkpoint carries usage and cost for reporting; the
ledger is the authority on what a run may still spend. A second copy of that number in the
frontier would be a second copy to disagree with, and the one restored from an older frontier
would hand a resumed run budget it already spent.

Each charge names itself (``charge_id``) so a charge retried after an unclear failure is counted
once; a charge that would take the run past its budget is refused whole.
"""

from __future__ import annotations

from typing import Protocol


class Ledger(Protocol):
    """What each run has spent, charged once per charge id and refused past a budget."""

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
        """Add ``micros`` once per ``charge_id`` and return the run's total; refuse
        (``BudgetExceededError``) a charge that would exceed ``budget``.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.
            charge_id: Names the charge; a second charge under it adds nothing.
            micros: The cost, in millionths of the currency unit.
            budget: The most the run may spend, in micros; None for no limit.
            fence: The writer's fence.

        Returns:
            The run's total spend after the charge, in micros.

        Raises:
            BudgetExceededError: The charge would take the total past ``budget``; nothing added.
            StaleFenceError: ``fence`` is below the run's fence mark (another worker has the run).
            ConfigurationError: An id or key no store can keep (see ``agentrun._identifiers``).
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def spent(self, tenant: str, run_id: str) -> int:
        """The run's total so far, in micros.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.

        Returns:
            The total, in micros (0 for a run never charged).

        Raises:
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def forget(self, tenant: str, run_id: str) -> None:
        """Drop the run's charges.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.

        Raises:
            StoreUnavailableError: The store could not be reached or answered with an error.
        """
