"""Approvals and resolutions: who may append one, in whose name, and that none can be taken back.

A decision in ``spec.approvals`` makes the operator execute a refund; a resolution tells it a call
ran. So the API server itself, not the operator reading the object later, refuses what would make
the object lie: removing or rewriting a recorded entry (the CRD's CEL transition rules), an entry
whose ``by`` is not the user who appends it, and an entry appended by a user without the verb
``approve`` / ``resolve`` (the chart's ValidatingAdmissionPolicy ``agentrun-decisions``, installed
by the session fixture as ``helm template`` renders it). People are impersonated with ``--as``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.support.kube import REPO, Kube

from agentrun.operator._resource import API_VERSION, KIND

Manifest = dict[str, Any]
APPROVER = ("agentrun-edit", "agentrun-approve")
PENDING = {"requestId": "apr-1", "callId": "call-1", "tool": "refund"}


def _create(kube: Kube, name: str, **spec: Any) -> None:
    manifest = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {"agent": "approver", "input": "refund order 7", **spec},
    }
    kube.kubectl("create", "-f", "-", stdin=json.dumps(manifest))


def _patch(kube: Kube, name: str, operations: list[Manifest]) -> str:
    """The API server's refusal, or "" when it took the patch."""
    result = kube.kubectl(
        "patch", "agentrun", name, "--type=json", "-p", json.dumps(operations), check=False
    )
    return result.stderr if result.returncode else ""


def _append(field: str, entry: Manifest) -> list[Manifest]:
    return [{"op": "add", "path": f"/spec/{field}/-", "value": entry}]


def _approval(by: str, decision: str = "approve", request: str = "apr-1") -> Manifest:
    return {"requestId": request, "decision": decision, "by": by}


def _recorded(kube: Kube, name: str, field: str) -> list[Manifest]:
    found = kube.kubectl("get", "agentrun", name, "-o", f"jsonpath={{.spec.{field}}}").stdout
    return list(json.loads(found or "[]"))


@pytest.fixture(scope="module")
def alice(kube: Kube) -> Kube:
    """May approve and resolve."""
    return kube.grant("alice", *APPROVER)


@pytest.fixture(scope="module")
def bob(kube: Kube) -> Kube:
    """May create and patch runs, but not decide for them."""
    return kube.grant("bob", "agentrun-edit")


@pytest.fixture(scope="module")
def mallory(kube: Kube) -> Kube:
    """May approve, and would like to do so as somebody else."""
    return kube.grant("mallory", *APPROVER)


def test_roles_separate_deciding_from_editing(kube: Kube, alice: Kube, bob: Kube) -> None:
    def can(person: Kube, verb: str) -> bool:
        answer = person.kubectl("auth", "can-i", verb, "agentruns.agentrun.dev", check=False)
        return answer.stdout.strip() == "yes"

    assert [can(alice, v) for v in ("approve", "resolve", "patch", "get")] == [True] * 4
    assert [can(bob, v) for v in ("create", "patch", "delete")] == [True] * 3
    assert [can(bob, v) for v in ("approve", "resolve")] == [False, False]
    viewer = kube.grant("victor", "agentrun-view")
    assert [can(viewer, v) for v in ("get", "list", "watch")] == [True] * 3
    assert [can(viewer, v) for v in ("patch", "approve")] == [False, False]
    names = ("agentrun-view", "agentrun-edit", "agentrun-approve")
    listed = kube.kubectl("get", "clusterroles", *names, "-o", "json").stdout
    roles = json.loads(listed)["items"]
    aggregated = {
        role["metadata"]["name"]: sorted(
            label.rsplit("-", 1)[-1]
            for label, value in role["metadata"]["labels"].items()
            if label.startswith("rbac.authorization.k8s.io/aggregate-to-") and value == "true"
        )
        for role in roles
    }
    assert aggregated == {
        "agentrun-view": ["admin", "edit", "view"],
        "agentrun-edit": ["admin", "edit"],
        "agentrun-approve": ["admin"],
    }


def test_an_approver_appends_a_decision_in_their_own_name(kube: Kube, alice: Kube) -> None:
    _create(kube, "refund-ok", approvals=[])
    assert _patch(alice, "refund-ok", _append("approvals", _approval("alice"))) == ""
    assert _recorded(kube, "refund-ok", "approvals") == [_approval("alice")]


def test_a_decision_in_somebody_elses_name_is_refused(
    kube: Kube, alice: Kube, mallory: Kube
) -> None:
    _create(kube, "refund-spoofed", approvals=[])
    refusal = _patch(mallory, "refund-spoofed", _append("approvals", _approval("alice")))
    assert "by must be the user who appends the decision" in refusal, refusal
    assert "you are authenticated as mallory" in refusal
    assert _recorded(kube, "refund-spoofed", "approvals") == []
    # Nor can the administrator, a member of system:masters, write somebody else's name.
    refusal = _patch(kube, "refund-spoofed", _append("approvals", _approval("alice")))
    assert "you are authenticated as agentrun-test-admin" in refusal, refusal


def test_a_user_without_the_approve_verb_is_refused(kube: Kube, bob: Kube) -> None:
    _create(kube, "refund-bob", approvals=[])
    refusal = _patch(bob, "refund-bob", _append("approvals", _approval("bob")))
    assert "bob may not approve for AgentRun" in refusal, refusal
    assert "the verb approve on agentruns" in refusal
    resolution = {"callId": "call-1", "outcome": "didNotRun", "by": "bob"}
    refusal = _patch(
        bob, "refund-bob", [{"op": "add", "path": "/spec/resolutions", "value": [resolution]}]
    )
    assert "bob may not resolve calls of AgentRun" in refusal, refusal
    # bob may still do what agentrun-edit is for.
    assert _patch(bob, "refund-bob", [{"op": "add", "path": "/spec/suspend", "value": True}]) == ""


def test_a_run_created_with_decisions_follows_the_same_rules(
    kube: Kube, alice: Kube, bob: Kube
) -> None:
    refused = bob.kubectl(
        "create", "-f", "-", check=False,
        stdin=json.dumps({
            "apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "pre-approved"},
            "spec": {"agent": "approver", "approvals": [_approval("bob")]},
        }),
    )  # fmt: skip
    assert "bob may not approve" in refused.stderr, refused.stderr
    _create(alice, "pre-approved", approvals=[_approval("alice")])
    assert _recorded(kube, "pre-approved", "approvals") == [_approval("alice")]


def test_a_recorded_decision_can_be_neither_removed_nor_rewritten(
    kube: Kube, alice: Kube, mallory: Kube
) -> None:
    """The attack the issue names: drop the list, then append a denial in another's name."""
    _create(kube, "refund-done", approvals=[])
    assert _patch(alice, "refund-done", _append("approvals", _approval("alice"))) == ""

    for person in (mallory, kube):
        dropped = _patch(person, "refund-done", [{"op": "remove", "path": "/spec/approvals"}])
        assert "approvals are append-only; the list cannot be removed" in dropped, dropped
        emptied = _patch(
            person, "refund-done", [{"op": "replace", "path": "/spec/approvals", "value": []}]
        )
        assert "approvals are append-only; a recorded decision cannot be" in emptied, emptied
        for field, value in (("decision", "deny"), ("by", "mallory"), ("reason", "changed")):
            rewritten = _patch(
                person,
                "refund-done",
                [{"op": "add", "path": f"/spec/approvals/0/{field}", "value": value}],
            )
            assert "spec.approvals[0]: Invalid value" in rewritten, (field, rewritten)
    merged = mallory.kubectl(
        "patch", "agentrun", "refund-done", "--type=merge",
        "-p", json.dumps({"spec": {"approvals": None}}), check=False,
    )  # fmt: skip
    assert "the list cannot be removed" in merged.stderr, merged.stderr
    assert _recorded(kube, "refund-done", "approvals") == [_approval("alice")]


def test_resolutions_are_append_only_and_authenticated_too(
    kube: Kube, alice: Kube, mallory: Kube
) -> None:
    _create(kube, "texted")
    answer = {"callId": "call-1", "outcome": "ran", "result": "sent", "by": "alice"}
    spoofed = _patch(
        mallory, "texted", [{"op": "add", "path": "/spec/resolutions", "value": [answer]}]
    )
    assert "spec.resolutions: by must be the user who appends the answer" in spoofed, spoofed
    assert (
        _patch(alice, "texted", [{"op": "add", "path": "/spec/resolutions", "value": [answer]}])
        == ""
    )
    dropped = _patch(mallory, "texted", [{"op": "remove", "path": "/spec/resolutions"}])
    assert "resolutions are append-only; the list cannot be removed" in dropped, dropped
    flipped = _patch(
        alice,
        "texted",
        [{"op": "replace", "path": "/spec/resolutions/0/outcome", "value": "didNotRun"}],
    )
    assert "spec.resolutions[0]: Invalid value" in flipped, flipped
    removed = _patch(alice, "texted", [{"op": "remove", "path": "/spec/resolutions/0"}])
    assert "resolutions are append-only; a recorded resolution cannot be" in removed, removed
    assert _recorded(kube, "texted", "resolutions") == [answer]


def test_the_cli_appends_in_the_name_of_the_authenticated_user(
    kube: Kube, alice: Kube, bob: Kube
) -> None:
    _create(kube, "refund-cli")
    kube.kubectl(
        "patch", "agentrun", "refund-cli", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"pendingApproval": PENDING}}),
    )  # fmt: skip
    refused = bob.agentrun("approve", "refund-cli", "--kube", "--request", "apr-1")
    assert refused.returncode == 6  # kubectl failed: the API server refused (for good)
    assert "bob may not approve" in refused.stderr, refused.stderr

    done = alice.agentrun(
        "approve", "refund-cli", "--kube", "--request", "apr-1",
        "--reason", "order checked",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "approved apr-1 (refund) in AgentRun refund-cli as alice" in done.stdout
    assert _recorded(kube, "refund-cli", "approvals") == [
        {**_approval("alice"), "reason": "order checked"}
    ]
    spoofing = alice.agentrun(
        "approve", "refund-cli", "--kube", "--request", "apr-1", "--by", "carol"
    )
    assert spoofing.returncode == 2
    assert "--by cannot be used with --kube" in spoofing.stderr, spoofing.stderr


DOCS = (REPO / "docs" / "kubernetes.md").read_text()
REQUEST = "apr-836354730e1c"
SHOWN = f"""\
  approvals:
  - by: alice
    decision: approve
    reason: order checked
    requestId: {REQUEST}
"""
"""What ``kubectl get agentrun -o yaml`` shows of the approval; docs/kubernetes.md the same."""


def test_docs_show_what_kubectl_shows(kube: Kube, alice: Kube, mallory: Kube) -> None:
    _create(kube, "refund-42")
    pending = {**PENDING, "requestId": REQUEST}
    kube.kubectl(
        "patch", "agentrun", "refund-42", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"pendingApproval": pending}}),
    )  # fmt: skip
    denial = _approval("alice", "deny", REQUEST)
    spoofed = _patch(
        mallory, "refund-42", [{"op": "add", "path": "/spec/approvals", "value": [denial]}]
    )
    done = alice.agentrun(
        "approve", "refund-42", "--kube", "--request", REQUEST, "--reason", "order checked"
    )
    assert done.returncode == 0, done.stderr
    dropped = _patch(mallory, "refund-42", [{"op": "remove", "path": "/spec/approvals"}])
    shown = kube.kubectl("get", "agentrun", "refund-42", "-o", "yaml").stdout
    assert SHOWN in shown, shown
    for sample in (SHOWN, done.stdout, spoofed, dropped):
        assert sample.strip(), sample
        assert sample.strip() in DOCS, sample
