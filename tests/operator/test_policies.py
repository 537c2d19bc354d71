"""An AgentRun's spec turned into the kit's policies: what it says, else the defaults."""

from __future__ import annotations

import pytest

from agentrun._checkpointing import CheckpointPolicy
from agentrun._frontier import Boundary
from agentrun._history import SegmentForm
from agentrun.operator._config import OperatorConfig
from agentrun.operator._policies import checkpoint_policy, lease_policy
from agentrun.operator._resource import AgentRunSpec

CONFIG = OperatorConfig(store_url="memory://", worker_id="w", lease_ttl=60, lease_renew_within=20)


def spec(**fields: object) -> AgentRunSpec:
    return AgentRunSpec.model_validate({"agent": "booking", **fields})


def test_an_empty_spec_takes_the_kit_defaults_for_checkpoints() -> None:
    assert checkpoint_policy(spec(), CONFIG) == CheckpointPolicy()


def test_the_segment_form_is_the_operators_setting() -> None:
    older = CONFIG.model_copy(update={"segment_form": SegmentForm.ZLIB_JSON})
    assert checkpoint_policy(spec(), older).segment_form is SegmentForm.ZLIB_JSON


def test_the_spec_picks_boundaries_and_the_cap() -> None:
    policy = checkpoint_policy(
        spec(checkpointPolicy={"boundaries": ["after_tool_result"], "maxBytes": 4096}), CONFIG
    )
    assert policy.boundaries == frozenset({Boundary.AFTER_TOOL_RESULT})
    assert policy.max_bytes == 4096


@pytest.mark.parametrize(
    ("lease", "ttl", "renew_within"),
    [
        ({}, 60.0, 20.0),  # the operator's settings
        ({"ttlSeconds": 30}, 30.0, 10.0),  # a shorter TTL renews within a third of it
        ({"ttlSeconds": 300}, 300.0, 20.0),  # a longer one keeps the settings' earlier renewal
        ({"ttlSeconds": 30, "renewWithinSeconds": 25}, 30.0, 25.0),  # the spec's own
    ],
)
def test_the_lease_policy_comes_from_the_spec_else_the_settings(
    lease: dict[str, int], ttl: float, renew_within: float
) -> None:
    policy = lease_policy(spec(leasePolicy=lease), CONFIG)
    assert (policy.ttl, policy.renew_within) == (ttl, renew_within)
