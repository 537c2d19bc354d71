"""Decisions are acted on only where the API server authenticates them.

The chart's ValidatingAdmissionPolicy is what makes ``by`` in an approval or a resolution the
user who appended it. Where nothing enforces it (an API server whose ValidatingAdmissionPolicy
plugin is off: the policy is listed and ignored; a release with ``accessControl.decisionPolicy``
false; a Kubernetes too old for the v1 policy), anyone who may patch a run can approve in
somebody else's name. This module's control plane is such a server: the chart's cluster-wide
objects are applied as on the session's plane, and kube-apiserver runs with the plugin
disabled. A user with ``agentrun-edit`` only appends ``by: alice`` to a run held for approval:
the operator must not make the held call, and the run must say why; an install that accepts
unauthenticated decisions (``AGENTRUN_ACCEPT_UNAUTHENTICATED_DECISIONS``, the chart's
``accessControl.acceptUnauthenticatedDecisions``) makes it. Where the policy is enforced (the
session's plane) approvals work as before: tests/kube/test_operator.py.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.support.agentruns import apply_run, count_effects, get_run, has_condition
from tests.support.chart import install_cluster_objects, private_cluster
from tests.support.kube import ControlPlane, Kube
from tests.support.operator import Operators, operator_pool, wait_for
from tests.support.redis_server import RedisServer

UNENFORCED = ("--disable-admission-plugins=ValidatingAdmissionPolicy",)
REASON = "DecisionsUnauthenticated"


@pytest.fixture(scope="module")
def unenforced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """A cluster with the chart's policy listed and nothing enforcing it."""
    workdir = tmp_path_factory.mktemp("unenforced-plane")
    with private_cluster(workdir, "held", UNENFORCED) as kube:
        install_cluster_objects(kube)
        listed = kube.kubectl("get", "validatingadmissionpolicies", "-o", "name").stdout
        assert "agentrun-decisions" in listed, listed
        yield kube


def _pool(
    kube: Kube,
    redis: RedisServer,
    effects: Path,
    tmp_path_factory: pytest.TempPathFactory,
    **env: str,
) -> Iterator[Operators]:
    pool = operator_pool(kube, redis, effects, tmp_path_factory, **env)
    pool.start("replica-a")
    try:
        yield pool
    finally:
        pool.stop_all()


@pytest.fixture(scope="module")
def guarded(
    unenforced: Kube, redis: RedisServer, effects: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operators]:
    """An operator as the chart installs it by default, on namespace held."""
    yield from _pool(unenforced, redis, effects, tmp_path_factory)


@pytest.fixture(scope="module")
def accepting(
    unenforced: Kube, redis: RedisServer, effects: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Kube, Operators]]:
    """An operator told to accept unauthenticated decisions, on a namespace of its own."""
    kube = Kube(unenforced.control_plane, "accepted", unenforced.kubectl_bin)
    kube.kubectl("create", "namespace", "accepted")
    env = {"AGENTRUN_ACCEPT_UNAUTHENTICATED_DECISIONS": "true"}
    for pool in _pool(kube, redis, effects, tmp_path_factory, **env):
        yield kube, pool


def _held_for_approval(kube: Kube, operators: Operators, name: str) -> str:
    """Apply a run of the approver agent; the request id it waits on."""
    apply_run(kube, name, "approver")
    wait_for(
        f"{name} to ask for approval",
        lambda: has_condition(kube, name, "AwaitingApproval", "True"),
        60,
        operators.logs,
    )
    return str(get_run(kube, name)["status"]["pendingApproval"]["requestId"])


def _approve_as_alice(bob: Kube, name: str, request: str) -> None:
    """bob, who may only edit runs, appends an approval in alice's name: nothing refuses it."""
    approval = {"requestId": request, "decision": "approve", "by": "alice"}
    patch = [{"op": "add", "path": "/spec/approvals", "value": [approval]}]
    bob.kubectl("patch", "agentrun", name, "--type=json", "-p", json.dumps(patch))


def test_an_approval_nothing_authenticated_is_not_acted_on(
    unenforced: Kube, guarded: Operators, effects: Path
) -> None:
    kube = unenforced
    request = _held_for_approval(kube, guarded, "refund-spoofed")
    refunds = count_effects(effects, "refund")
    _approve_as_alice(kube.grant("bob", "agentrun-edit"), "refund-spoofed", request)
    wait_for(
        "the run to say its decisions are not authenticated",
        lambda: has_condition(kube, "refund-spoofed", "Succeeded", "Unknown", REASON),
        60,
        guarded.logs,
    )
    described = kube.kubectl("describe", "agentrun", "refund-spoofed").stdout
    assert REASON in described, described
    message = str(
        next(
            each["message"]
            for each in get_run(kube, "refund-spoofed")["status"]["conditions"]
            if each["type"] == "Succeeded"
        )
    )
    assert "accessControl.acceptUnauthenticatedDecisions" in message, message
    assert has_condition(kube, "refund-spoofed", "AwaitingApproval", "True")

    # Held, and asking nothing more of the API server while nothing about the run changes.
    plane = kube.control_plane
    assert isinstance(plane, ControlPlane)
    asked = plane.requests()["PATCH agentruns"]
    time.sleep(3)
    assert count_effects(effects, "refund") == refunds, "the held call was made"
    assert plane.requests()["PATCH agentruns"] == asked
    assert has_condition(kube, "refund-spoofed", "Succeeded", "Unknown", REASON)


def test_a_resolution_nothing_authenticated_is_not_acted_on(
    unenforced: Kube, redis: RedisServer, effects: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """An SMS in flight when its holder died: a resolution ``didNotRun`` in alice's name would
    have it sent again. On a namespace of its own, where the one replica that takes the run
    dies with the text in flight and another starts only then."""
    kube = Kube(unenforced.control_plane, "texts", unenforced.kubectl_bin)
    kube.kubectl("create", "namespace", "texts")
    operators = operator_pool(kube, redis, effects, tmp_path_factory)
    try:
        lingering = operators.start("replica-slow", AGENTRUN_TEST_SMS_LINGER="30")
        apply_run(kube, "texted", "texter")
        wait_for("the text", lambda: count_effects(effects, "sms") == 1, 60, operators.logs)
        lingering.signal(signal.SIGKILL)
        lingering.wait()
        operators.start("replica-a")
        wait_for(
            "texted to be indeterminate",
            lambda: has_condition(kube, "texted", "Indeterminate", "True"),
            60,
            operators.logs,
        )
        [call] = get_run(kube, "texted")["status"]["indeterminateCalls"]
        answer = {"callId": call["callId"], "outcome": "didNotRun", "by": "alice"}
        patch = [{"op": "add", "path": "/spec/resolutions", "value": [answer]}]
        bob = kube.grant("bob", "agentrun-edit")
        bob.kubectl("patch", "agentrun", "texted", "--type=json", "-p", json.dumps(patch))
        wait_for(
            "texted to say its decisions are not authenticated",
            lambda: has_condition(kube, "texted", "Succeeded", "Unknown", REASON),
            60,
            operators.logs,
        )
        time.sleep(2)
        assert count_effects(effects, "sms") == 1, "the text was sent again"
        assert has_condition(kube, "texted", "Indeterminate", "True")
    finally:
        operators.stop_all()


def test_an_install_that_accepts_unauthenticated_decisions_acts_on_them(
    accepting: tuple[Kube, Operators], effects: Path
) -> None:
    kube, operators = accepting
    request = _held_for_approval(kube, operators, "refund-accepted")
    refunds = count_effects(effects, "refund")
    _approve_as_alice(kube.grant("bob", "agentrun-edit"), "refund-accepted", request)
    wait_for(
        "the accepted approval to be acted on",
        lambda: has_condition(kube, "refund-accepted", "Succeeded", "True", "Completed"),
        60,
        operators.logs,
    )
    assert count_effects(effects, "refund") == refunds + 1
