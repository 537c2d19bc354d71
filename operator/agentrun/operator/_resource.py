"""Typed models of the AgentRun custom resource's spec and status.

The CRD in ``crds/agentruns.agentrun.dev.yaml`` is what the API server enforces; these models are
what the operator reads and writes, so the two must say the same thing. They carry the same field
names (camelCase on the wire, snake_case in Python), the same required fields, enums and bounds,
and ``tests/kube/test_kube_models.py`` compares them property by property in both
directions. Rules the CRD states in CEL about a single object (a resolution's result, the lease
renewal window) are repeated here as validators; rules about a change from the old object
(immutability, append-only lists) only the API server can check.

Only pydantic and the kit's outcomes are imported: the models load without kopf or a Kubernetes
client.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from agentrun._outcomes import ConditionStatus

GROUP = "agentrun.dev"
VERSION = "v1alpha1"
KIND = "AgentRun"
PLURAL = "agentruns"
API_VERSION = f"{GROUP}/{VERSION}"

Boundary = Literal["after_model_call", "after_tool_result", "before_approval"]

_NAME_PATTERN = r"^[a-z0-9]([a-z0-9_.-]*[a-z0-9])?$"
CONTROLLER_PATTERN = (
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
    r"/[A-Za-z0-9]([-A-Za-z0-9_.]{0,54}[A-Za-z0-9])?$"
)
"""A controller name: a DNS subdomain, a slash, a name (``agentrun.dev/operator``). The name is
at most 56 characters so that ``<controller name>-daemon`` is a valid finalizer (the name kopf's
would have, per install: ``_lifecycle.daemon_finalizer``, which kopf drops from what carries it)."""
_CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
_CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"

Name = Annotated[str, Field(min_length=1, max_length=63, pattern=_NAME_PATTERN)]
CallId = Annotated[str, Field(min_length=1, max_length=128)]
Person = Annotated[str, Field(min_length=1, max_length=253)]
Count = Annotated[int, Field(ge=0)]
ControllerName = Annotated[str, Field(max_length=253, pattern=CONTROLLER_PATTERN)]


class ResourceModel(BaseModel):
    """Frozen, strict about unknown fields, camelCase on the wire and snake_case in Python."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )


class CheckpointPolicySpec(ResourceModel):
    boundaries: Annotated[list[Boundary], Field(min_length=1, max_length=3)] | None = None
    max_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] | None = None


class LeasePolicySpec(ResourceModel):
    ttl_seconds: Annotated[int, Field(ge=5, le=3600)] | None = None
    renew_within_seconds: Annotated[int, Field(ge=1, le=3599)] | None = None

    @model_validator(mode="after")
    def _renews_before_expiry(self) -> Self:
        if (
            self.ttl_seconds is not None
            and self.renew_within_seconds is not None
            and self.renew_within_seconds >= self.ttl_seconds
        ):
            raise ValueError("renewWithinSeconds must be less than ttlSeconds")
        return self


class BudgetSpec(ResourceModel):
    max_cost_micros: Annotated[int, Field(ge=1, le=1_000_000_000_000)] | None = None


class Approval(ResourceModel):
    """A person's decision on a call the run holds for approval."""

    request_id: CallId
    decision: Literal["approve", "deny"]
    by: Person
    reason: Annotated[str, Field(max_length=1024)] | None = None


Evidence = Annotated[str, Field(max_length=2000)]


class Resolution(ResourceModel):
    """An answer for an indeterminate call: it ran (with this result) or it did not. A
    person's, or the operator's when it settled the call by asking the tool's service: only
    then does it carry ``evidence`` (what was asked and answered, masked), which the chart's
    admission policy admits from the operator's ServiceAccount alone."""

    call_id: CallId
    outcome: Literal["ran", "didNotRun"]
    result: Annotated[str, Field(max_length=4096)] | None = None
    by: Person
    evidence: Evidence | None = None

    @model_validator(mode="after")
    def _result_iff_ran(self) -> Self:
        if (self.outcome == "ran") != (self.result is not None):
            raise ValueError(
                "result is required when outcome is ran and not allowed when outcome is didNotRun"
            )
        return self


class AgentRunSpec(ResourceModel):
    agent: Name
    input: Annotated[str, Field(max_length=16384)] | None = None
    tenant: Name | None = None
    controller_name: ControllerName | None = None
    checkpoint_policy: CheckpointPolicySpec | None = None
    lease_policy: LeasePolicySpec | None = None
    budget: BudgetSpec | None = None
    approvals: Annotated[list[Approval], Field(max_length=64)] | None = None
    resolutions: Annotated[list[Resolution], Field(max_length=64)] | None = None
    suspend: bool | None = None


class Condition(ResourceModel):
    """metav1.Condition, with the validation Kubernetes gives it."""

    type: Annotated[str, Field(max_length=316, pattern=_CONDITION_TYPE_PATTERN)]
    status: ConditionStatus
    observed_generation: Count | None = None
    last_transition_time: datetime
    reason: Annotated[str, Field(min_length=1, max_length=1024, pattern=_CONDITION_REASON_PATTERN)]
    message: Annotated[str, Field(max_length=32768)]


class CheckpointStatus(ResourceModel):
    boundary: Boundary | None = None
    iteration: Count | None = None
    bytes: Count | None = None
    written_at: datetime | None = None
    last_error: Annotated[str, Field(max_length=4096)] | None = None


class LeaseStatus(ResourceModel):
    holder: Annotated[str, Field(max_length=253)] | None = None
    fence: Count | None = None


class Usage(ResourceModel):
    input_tokens: Count | None = None
    output_tokens: Count | None = None
    cost_micros: Count | None = None


class PendingApproval(ResourceModel):
    request_id: Annotated[str, Field(max_length=128)]
    call_id: Annotated[str, Field(max_length=128)]
    tool: Annotated[str, Field(max_length=253)]


SettlementPhase = Literal["Waiting", "Asking", "LeftToPerson"]
"""Where the operator is with settling a call: waiting for its ``dueAt``, asking the service
(a replica holds the run's lease), or done asking without an answer (a person must resolve)."""

MAX_SETTLE_ATTEMPTS = 64
"""The CRD's bound on ``settlement.attempts``; the operator stops beginning far below it."""


class Settlement(ResourceModel):
    """What the operator does, and saw, about settling one indeterminate call itself."""

    due_at: datetime
    attempts: Annotated[int, Field(ge=0, le=MAX_SETTLE_ATTEMPTS)]
    phase: SettlementPhase
    message: Annotated[str, Field(max_length=2048)] | None = None


class IndeterminateCall(ResourceModel):
    call_id: Annotated[str, Field(max_length=128)]
    tool: Annotated[str, Field(max_length=253)]
    settlement: Settlement | None = None


class AgentRunStatus(ResourceModel):
    tenant: Name | None = None
    controller: ControllerName | None = None
    observed_generation: Count | None = None
    conditions: Annotated[list[Condition], Field(max_length=16)] | None = None
    checkpoint: CheckpointStatus | None = None
    lease: LeaseStatus | None = None
    usage: Usage | None = None
    iteration: Count | None = None
    resume_count: Count | None = None
    pending_approval: PendingApproval | None = None
    indeterminate_calls: Annotated[list[IndeterminateCall], Field(max_length=64)] | None = None
    trace_id: Annotated[str, Field(max_length=32, pattern=r"^[0-9a-f]{32}$")] | None = None
