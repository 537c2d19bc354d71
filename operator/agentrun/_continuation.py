"""Starting the execution again without losing the run.

A workflow engine's history is finite, and so is a worker's patience with a transcript it
replays. ``ContinuationPolicy.due`` says when an execution has gone on long enough to be worth
starting again; ``continued`` builds the ``Continuation`` that crosses over.

What crosses: the transcript as a handle (never inline), the counters as numbers, and the
authority the run acts under (its grant and approval). What deliberately does not: the steps
themselves — their results are already folded into the state, and replaying them is the cost being
cut. A ``Continuation`` whose ``grant`` or ``approval`` differs from the one its ``acting_under``
names cannot be constructed (``ConfigurationError``): the new execution would otherwise carry on
unapproved. ``continued`` fills ``acting_under`` from the frontier, so what it builds keeps the
frontier's grant and approval; the model checks nothing else (a ``Continuation`` made directly with
the default, empty ``acting_under`` is not checked, and ``scopes`` and ``user`` are copied by
``continued`` but never compared).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from agentrun._base import FrozenModel
from agentrun._errors import ConfigurationError
from agentrun._frontier import Checkpoint, PendingApproval
from agentrun._messages import Usage


class ContinuationPolicy(FrozenModel):
    """When an execution has gone on long enough to start again (``due``): steps or bytes."""

    max_steps: int = Field(default=200, gt=0)
    max_history_bytes: int = Field(default=1_500_000, gt=0)

    def due(self, steps: int, *, history_bytes: int = 0) -> bool:
        return steps >= self.max_steps or history_bytes >= self.max_history_bytes


DEFAULT_CONTINUATION = ContinuationPolicy()


class Authority(FrozenModel):
    """What a run is acting under; a continuation must carry all of it across."""

    grant: str | None = None
    approval: PendingApproval | None = None


class Continuation(FrozenModel):
    """What crosses into the next execution of a run: the transcript's handle, the counters and
    the authority the run acts under; never the steps themselves.

    The one check: ``grant`` and ``approval`` must equal those of ``acting_under`` where it names
    one (``ConfigurationError`` otherwise). ``acting_under`` is what the caller passes
    (``continued`` passes the frontier's); left at its default it names nothing and nothing is
    checked.
    """

    run_id: str = Field(min_length=1)
    tenant: str = Field(min_length=1)
    agent_name: str = Field(min_length=1)
    agent_revision: str = Field(min_length=1)
    history_handle: str = Field(min_length=1)
    history_length: int = Field(ge=0)
    iteration: int = Field(ge=0)
    usage: Usage
    cost_micros: int = Field(ge=0)
    grant: str | None = None
    approval: PendingApproval | None = None
    scopes: tuple[str, ...] = ()
    user: str | None = None
    acting_under: Authority = Authority()

    @model_validator(mode="after")
    def _keeps_authority(self) -> Continuation:
        held = self.acting_under
        if held.grant is not None and self.grant != held.grant:
            raise ConfigurationError(
                f"continuation of run {self.run_id!r} drops grant {held.grant!r} the run acts "
                "under; carry it across (grant=...) or the new execution runs without it"
            )
        if held.approval is not None and self.approval != held.approval:
            raise ConfigurationError(
                f"continuation of run {self.run_id!r} drops approval "
                f"{held.approval.request_id!r} the run acts under; carry it across"
            )
        return self


def continued(state: Checkpoint, *, tenant: str, agent_name: str) -> Continuation:
    """The ``Continuation`` of the run at ``state``, whose transcript must be out of line and
    which must have no call outstanding (the new execution would carry it without its result)."""
    if state.pending:
        raise ConfigurationError(
            f"run {state.run_id!r} has calls outstanding at {state.boundary.value}; continue from "
            "a frontier written after their results"
        )
    if state.history_handle is None:
        raise ConfigurationError(
            f"run {state.run_id!r} keeps its transcript inline; a continuation carries it as a "
            "handle, so give the Checkpointer a history store before continuing"
        )
    if tenant != state.tenant or agent_name != state.agent_name:
        raise ConfigurationError(
            f"run {state.run_id!r} belongs to tenant {state.tenant!r} and agent "
            f"{state.agent_name!r}; it cannot continue as {tenant!r}/{agent_name!r}"
        )
    return Continuation(
        run_id=state.run_id,
        tenant=tenant,
        agent_name=agent_name,
        agent_revision=state.agent_revision,
        history_handle=state.history_handle,
        history_length=state.history_length,
        iteration=state.iteration,
        usage=state.usage,
        cost_micros=state.cost_micros,
        grant=state.grant,
        approval=state.approval,
        scopes=state.scopes,
        user=state.user,
        acting_under=Authority(grant=state.grant, approval=state.approval),
    )
