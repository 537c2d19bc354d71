"""Writing a run's frontier at a boundary, and the one refused write that stops the run.

A frontier that cannot be written never fails the live run (``Checkpointer.write`` keeps the
error), with one exception: the frontier naming a call that is not safe to repeat. Without it a
resume could not know the call may have been made, and would make it again; so the run stops
there, before making the call, and a resume repeats the model call instead.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import JsonValue

from agentrun._checkpointing import Checkpointer, WriteReceipt
from agentrun._commits import Charge
from agentrun._errors import CheckpointEncodingError
from agentrun._frontier import Boundary, Checkpoint, PendingApproval, PendingCall
from agentrun._ledger import Ledger
from agentrun.runner._state import RunState
from agentrun.runner._tracing import checkpoint_event

logger = logging.getLogger(__name__)

BoundaryObserver = Callable[[Checkpoint, WriteReceipt | None, Exception | None], Awaitable[None]]
"""Hears of every frontier the runner hands to its ``Checkpointer``: written (a receipt) or not
(the error, or neither when the policy skipped the boundary)."""


async def charge_alone(ledger: Ledger, state: RunState, charge: Charge) -> None:
    """Charge a model call to the ledger in a commit of its own; the run's total is its answer."""
    state.cost_micros = await ledger.charge(
        state.tenant, state.run_id, charge.charge_id, charge.micros, budget=None, fence=state.fence
    )


@dataclass
class CheckpointWriter:
    """Builds the frontier of a run at a boundary and hands it to the ``Checkpointer``, with
    the charge of the model call it follows when the ``Checkpointer`` can commit it too."""

    checkpoints: Checkpointer
    on_boundary: BoundaryObserver | None
    ledger: Ledger | None = None

    async def write(
        self,
        state: RunState,
        boundary: Boundary,
        *,
        pending: tuple[PendingCall, ...] = (),
        approval: PendingApproval | None = None,
        charge: Charge | None = None,
    ) -> bool:
        """Write the frontier (as the policy says); whether it was written.

        ``charge`` (given only when ``Checkpointer.carries_charges``) goes in the frontier's
        commit; if the frontier was skipped or not written, it is charged to the ledger on its
        own before anything else happens, so a model call is charged whatever became of its
        boundary, as when it was always charged on its own."""
        metadata: dict[str, JsonValue] = {}
        if state.budget_micros is not None:
            metadata["budget_micros"] = state.budget_micros
        checkpoint = Checkpoint(
            run_id=state.run_id,
            tenant=state.tenant,
            agent_name=state.agent.name,
            agent_revision=state.agent.revision,
            boundary=boundary,
            fence=state.fence,
            messages=tuple(state.messages),
            pending=pending,
            usage=state.usage,
            cost_micros=state.cost_micros,
            iteration=state.iteration,
            approval=approval,
            grant=state.grant,
            scopes=state.scopes,
            user=state.user,
            metadata=metadata,
        )
        try:
            receipt = await self.checkpoints.write(checkpoint, charge=charge)
        except CheckpointEncodingError:
            await self._charge(state, charge, None)  # the model call was made all the same
            raise
        await self._charge(state, charge, receipt)
        checkpoint_event(boundary, written=receipt is not None, fence=state.fence)
        if self.on_boundary is not None:
            await self.on_boundary(checkpoint, receipt, self.checkpoints.last_error)
        if receipt is None and checkpoint.holds_intent and self.checkpoints.last_error:
            # The one refused write that stops the run: without this frontier a resume could
            # not know these calls may have been made, and would make them again. Stopping
            # here costs a model call on resume; the calls themselves were not made.
            logger.warning(
                "run %s: the frontier naming calls %s could not be written; stopping before "
                "making them",
                state.run_id,
                ", ".join(p.call.id for p in pending if not p.safe_to_repeat),
            )
            raise self.checkpoints.last_error
        return receipt is not None

    async def _charge(
        self, state: RunState, charge: Charge | None, receipt: WriteReceipt | None
    ) -> None:
        """Charge the model call ``charge`` is for: taken by the frontier's commit (the receipt
        says what the run spent), else on its own."""
        if charge is None:
            return
        if receipt is not None and receipt.spent is not None:
            state.cost_micros = receipt.spent
        else:
            assert self.ledger is not None, "a charge is carried only for a runner's ledger"
            await charge_alone(self.ledger, state, charge)
