"""Settling every undecidable call of one run in a store: what ``agentrun settle`` does.

For each call a resume would refuse (``plan_for``: in flight from a tenure now gone), whose tool
declares a settlement, the service is asked (``settle_call``) and a conclusive verdict is
recorded as a person's answer is (``resolve``), under ``by``: the next resume replays the result
(it ran) or makes the call (it did not run). The rest are left to a person, each with why.

It holds the run's lease throughout, as ``answer_call`` does, renewing it while the services are
asked (a replay waiting out a 409 can take a while): no worker carries the run on meanwhile,
and a verdict is recorded only while the lease is still held. It runs when asked, so it does not
wait the ``delay_seconds`` a tool declares: that delay is for a settler that acts on its own (the
operator's), to let a person already looking answer first.
"""

from __future__ import annotations

import asyncio
from enum import StrEnum

from agentrun._backend import Backend
from agentrun._base import FrozenModel
from agentrun._checkpointing import Checkpointer
from agentrun._decisions import ANSWER_LEASE_TTL, plan_for, resolve
from agentrun._errors import NothingCheckpointedError, RevisionMismatchError
from agentrun._frontier import Checkpoint, PendingCall
from agentrun._leases import Leaseholder, LeasePolicy, default_holder
from agentrun._redaction import Masker, SecretValues
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._settling import Sleep, settle_call


class Settled(StrEnum):
    """What became of one undecidable call."""

    RAN = "ran"
    """Settled: it ran; its result is recorded."""
    DID_NOT_RUN = "did_not_run"
    """Settled: it did not run; the next resume makes it."""
    LEFT_TO_A_PERSON = "left_to_a_person"
    """Asked, and the answer settles nothing: the evidence says what was seen."""
    NO_SETTLEMENT = "no_settlement"
    """Its tool declares no way to settle it (or no frontier names it): a person answers."""
    ANSWERED_MEANWHILE = "answered_meanwhile"
    """Somebody answered for it while the service was asked; nothing was written."""


class SettledCall(FrozenModel):
    """One undecidable call, what became of it, and what the service was asked and said."""

    call_id: str
    tool: str
    settled: Settled
    result: str | None = None
    evidence: str = ""


async def settle_run(
    backend: Backend,
    agent: AgentDefinition,
    tenant: str,
    run_id: str,
    *,
    by: str,
    secrets: SecretValues | None = None,
    sleep: Sleep = asyncio.sleep,
) -> tuple[SettledCall, ...]:
    """Settle every undecidable call of run ``run_id`` whose tool declares how, holding its lease.

    Args:
        backend: The run's stores.
        agent: The agent the run's frontier pins (its tools say how to settle their calls).
        tenant: The run's tenant.
        run_id: The run's id.
        by: Who the answers are recorded as given by.
        secrets: The values of the secrets the agent's requests read, masked wherever they
            appear (a registered agent's ``secrets``).
        sleep: How to wait between attempts.

    Returns:
        One entry per undecidable call, in the order a resume meets them.

    Raises:
        NothingCheckpointedError: The run has no frontier.
        RevisionMismatchError: ``agent`` is not the revision the run pins.
        RunLeaseError: A worker holds the run; settle once its lease is free.
        StoreUnavailableError: The store could not be reached or answered with an error.
    """
    policy = LeasePolicy(ttl=ANSWER_LEASE_TTL, renew_within=ANSWER_LEASE_TTL / 3)
    lease = await Leaseholder.acquire(backend.leases, tenant, run_id, default_holder(), policy)
    async with lease:
        checkpoint = await Checkpointer(backend.checkpoints).latest(tenant, run_id)
        if checkpoint is None:
            raise NothingCheckpointedError(run_id=run_id, tenant=tenant)
        if checkpoint.agent_revision != agent.revision:
            raise RevisionMismatchError(
                run_id=run_id, pinned=checkpoint.agent_revision, offered=agent.revision
            )
        plan = await plan_for(backend.idempotency, checkpoint, backend.history)
        masker = backend.masker.with_secrets(secrets or SecretValues())
        settled = [
            await _settled(backend, agent, checkpoint, pending, lease, by, masker, sleep)
            for pending in plan.indeterminate
        ]
        settled.extend(
            SettledCall(
                call_id=record.call_id or record.key,
                tool=record.tool or "",
                settled=Settled.NO_SETTLEMENT,
                evidence="no frontier names this call, so its arguments are unknown and the "
                "service cannot be asked about it",
            )
            for record in plan.unaccounted
        )
    return tuple(settled)


async def _settled(
    backend: Backend,
    agent: AgentDefinition,
    checkpoint: Checkpoint,
    pending: PendingCall,
    lease: Leaseholder,
    by: str,
    masker: Masker,
    sleep: Sleep,
) -> SettledCall:
    call = pending.call
    tool = agent.tool(call.name)
    if tool is None or tool.settlement is None:
        return SettledCall(
            call_id=call.id,
            tool=call.name,
            settled=Settled.NO_SETTLEMENT,
            evidence=f"{call.name} declares no way to settle its calls",
        )
    verdict = await settle_call(
        tool,
        pending,
        tenant=checkpoint.tenant,
        run_id=checkpoint.run_id,
        masker=masker,
        sleep=sleep,
    )
    if verdict.outcome is None:
        return SettledCall(
            call_id=call.id,
            tool=call.name,
            settled=Settled.LEFT_TO_A_PERSON,
            evidence=verdict.evidence,
        )
    lease.ensure_held()
    ran = verdict.outcome == "ran"
    recorded = await resolve(
        backend.idempotency,
        checkpoint,
        call.id,
        ran=ran,
        result=verdict.result,
        by=by,
        history=backend.history,
    )
    if not recorded:
        settled = Settled.ANSWERED_MEANWHILE
    else:
        settled = Settled.RAN if ran else Settled.DID_NOT_RUN
    return SettledCall(
        call_id=call.id,
        tool=call.name,
        settled=settled,
        result=verdict.result,
        evidence=verdict.evidence,
    )
