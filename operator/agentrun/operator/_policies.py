"""An AgentRun's spec turned into the kit's policies: where to checkpoint, how to hold the lease.

What the spec leaves out falls back to the kit's defaults for checkpoints (the form of the
transcript's segments is the operator's setting, the chart's ``segmentForm``) and to the operator's
settings for leases (the Helm chart's ``leaseTTL``), renewed within a third of the TTL unless the
settings renew earlier: a holder must get more than one try at renewing before its lease lapses.
"""

from __future__ import annotations

from agentrun._checkpointing import CheckpointPolicy
from agentrun._frontier import Boundary
from agentrun._leases import LeasePolicy
from agentrun.operator._config import OperatorConfig
from agentrun.operator._resource import AgentRunSpec, CheckpointPolicySpec, LeasePolicySpec

DEFAULT_CHECKPOINTS = CheckpointPolicy()


def checkpoint_policy(spec: AgentRunSpec, config: OperatorConfig) -> CheckpointPolicy:
    declared = spec.checkpoint_policy or CheckpointPolicySpec()
    return CheckpointPolicy(
        boundaries=frozenset(Boundary(b) for b in declared.boundaries)
        if declared.boundaries
        else DEFAULT_CHECKPOINTS.boundaries,
        max_bytes=declared.max_bytes or DEFAULT_CHECKPOINTS.max_bytes,
        segment_form=config.segment_form,
    )


def lease_policy(spec: AgentRunSpec, config: OperatorConfig) -> LeasePolicy:
    declared = spec.lease_policy or LeasePolicySpec()
    ttl = float(declared.ttl_seconds or config.lease_ttl)
    renew_within = (
        float(declared.renew_within_seconds)
        if declared.renew_within_seconds
        else min(config.lease_renew_within, ttl / 3)
    )
    return LeasePolicy(ttl=ttl, renew_within=renew_within)
