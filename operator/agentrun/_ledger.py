"""What a run has spent, kept apart from the checkpoint because it must outlive it.

Spend is a number that only goes up. The checkpoint carries usage and cost for reporting; the
ledger is the authority on what a run may still spend. A second copy of that number in the
frontier would be a second copy to disagree with, and the one restored from an older frontier
would hand a resumed run budget it already spent.

Each charge names itself (``charge_id``) so a charge retried after an unclear failure is counted
once; a charge that would take the run past its budget is refused whole.

``ChargeLister`` is the optional capability of a ledger that lists the charges it counted.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


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


@runtime_checkable
class ChargeLister(Protocol):
    """A ``Ledger`` that can list the charges it counted for a run, each with its micros.

    A worker never needs this: the run's total (``spent``) is all a budget is decided on. A
    person does: a run's cost drawn over its iterations shows where its money went, and the
    ledger is the authority on spend (the checkpoint's copy is for reporting, and an older
    frontier's may be behind), so a console (or a script) lists the charges here. A charge
    refused over budget was never counted and is not listed, a charge id counted twice is
    listed once, and a forgotten run (``forget``) lists nothing. The runner names a model
    call's charge ``model:{execution}:{iteration}``, so the iteration is read off the id.

    It is optional, as ``RunLister`` is for checkpoint stores: ask
    ``isinstance(ledger, ChargeLister)``. The four ledgers the kit ships are listers, and the
    checks every ``StoreSet`` puts in front of a store keep the capability visible
    (``agentrun._storecore.checked``).
    """

    async def charges(self, tenant: str, run_id: str) -> tuple[tuple[str, int], ...]:
        """Every charge counted for the run, in order of charge id by code point.

        The order is the same on every store (none of them keeps the order charges came in:
        a Redis hash and a table keyed by charge id do not), so it is by text, not by number:
        ``model:e:10`` comes before ``model:e:2``; a console that draws iterations orders
        them itself. A charge counted by a boundary commit (``CommitStore.commit``) is listed
        as one counted by ``charge`` is: both write the same charges.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.

        Returns:
            (charge id, micros) pairs, each charge id once with the micros it was first
            counted with; empty for a run never charged or forgotten.

        Raises:
            ConfigurationError: A tenant or run id no store can key on (see
                ``agentrun._identifiers``).
            UnreadableRecordError: A charge's micros as the store holds them are no number.
            StoreUnavailableError: The store could not be reached or answered with an error.
        """
