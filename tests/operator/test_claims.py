"""Which install a run belongs to, and the names an install runs under."""

from __future__ import annotations

import pytest

from agentrun._errors import ConfigurationError
from agentrun.operator._claims import claim_patch, ours
from agentrun.operator._config import DEFAULT_CONTROLLER, OperatorConfig
from agentrun.operator._lifecycle import daemon_finalizer

MINE = "example.com/mine"


@pytest.mark.parametrize(
    ("spec", "status", "expected"),
    [
        ({}, {}, True),  # unclaimed: any install may claim it
        ({}, {"controller": MINE}, True),
        ({}, {"controller": "example.com/other"}, False),
        ({"controllerName": MINE}, {}, True),
        ({"controllerName": "example.com/other"}, {}, False),
    ],
)
def test_an_install_runs_only_runs_it_claimed_or_may_claim(
    spec: dict[str, str], status: dict[str, str], expected: bool
) -> None:
    assert ours({"spec": spec, "status": status}, MINE) is expected


def test_each_install_has_a_kopf_finalizer_of_its_own() -> None:
    assert daemon_finalizer(DEFAULT_CONTROLLER) == "agentrun.dev/daemon"
    assert daemon_finalizer(MINE) == "example.com/mine-daemon"


def test_a_controller_name_that_cannot_be_one_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENTRUN_STORE_URL", "memory://")
    monkeypatch.setenv("AGENTRUN_CONTROLLER_NAME", "no-slash")
    with pytest.raises(ConfigurationError, match="AGENTRUN_CONTROLLER_NAME='no-slash'"):
        OperatorConfig.from_environment()
    monkeypatch.setenv("AGENTRUN_CONTROLLER_NAME", "example.com/" + "n" * 57)
    with pytest.raises(ConfigurationError, match="is not a controller name"):
        OperatorConfig.from_environment()
    monkeypatch.setenv("AGENTRUN_CONTROLLER_NAME", MINE)
    assert OperatorConfig.from_environment().controller_name == MINE


def _run(status: dict[str, object] | None) -> dict[str, object]:
    body: dict[str, object] = {"metadata": {"generation": 2}, "spec": {"agent": "a"}}
    if status is not None:
        body["status"] = status
    return body


def test_a_new_runs_claim_and_first_conditions_are_one_patch_tested_against_absence() -> None:
    [absent, generation, write] = claim_patch(_run(None), MINE)
    assert absent == {"op": "test", "path": "/status", "value": None}
    assert generation == {"op": "test", "path": "/metadata/generation", "value": 2}
    assert write["path"] == "/status"
    status = write["value"]
    assert (status["controller"], status["observedGeneration"]) == (MINE, 2)
    assert "tenant" not in status  # pinned with the first lease, by the replica that takes it
    reasons = [c["reason"] for c in status["conditions"]]
    assert reasons == ["Pending", "NotWaiting", "Decided", "NotYet"]


def test_only_what_is_missing_is_written_and_each_write_tests_its_field_absent() -> None:
    seen = _run({"conditions": [{"type": "Succeeded"}]})
    assert claim_patch(seen, MINE) == [
        {"op": "test", "path": "/status/controller", "value": None},
        {"op": "add", "path": "/status/controller", "value": MINE},
    ]
    claimed = _run({"controller": MINE, "conditions": [{"type": "Succeeded"}]})
    assert claim_patch(claimed, MINE) == []
