"""Which install a run belongs to, and the names an install runs under."""

from __future__ import annotations

import pytest

from agentrun.errors import ConfigurationError
from agentrun.operator.claims import ours
from agentrun.operator.config import DEFAULT_CONTROLLER, OperatorConfig
from agentrun.operator.lifecycle import daemon_finalizer

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
