"""What a run's model calls are held to beyond the run's own budget: a share of a larger one.

A run's own budget is decided by its ledger, which only its holder charges. A budget shared by
many runs at once (a namespace's, in a RunQuota), in several replicas, is not: no run can tell
from its own spend what is left of it, and two runs that each read "enough left" and both call
the model overrun it by both calls. So before each model call the run asks its ``SpendGate`` to
reserve what the call may cost, atomically, against the shared budget; and after the call it
tells the gate what the call did cost, which turns the reservation into spend. Runs calling at
once can then overrun the shared budget by no more than what each call cost beyond its
reservation.

A gate that finds no room raises ``QuotaSpentError`` before the call: nothing was sent, the run
stops there with its checkpoint kept, as over its own budget, and carries on when the budget
has room again. A call that failed is settled as costing nothing, so its reservation goes back.
"""

from __future__ import annotations

from typing import Protocol

from agentrun._messages import Usage


class SpendGate(Protocol):
    """Reserves a model call's cost against a shared budget before it, settles it after."""

    async def reserve(self) -> None:
        """Reserve what the next model call may cost.

        Raises:
            QuotaSpentError: The shared budget has no room for it; nothing was reserved.
        """

    async def settle(self, used: Usage, cost_micros: int) -> None:
        """The call the last reservation was for used ``used`` and cost ``cost_micros``.

        Never raises for a store that cannot be reached: the reservation then stays reserved
        (spent, as far as the budget knows) until its window ends, which errs on the side of
        spending less, and the call's reply, paid for, is kept."""
