"""The AgentRun CRD as a real API server enforces it.

Schemas, CEL rules and printer columns are easy to get wrong in ways no YAML linter notices (a
rule that never fires, a column whose JSONPath matches nothing), so each promise the CRD makes is
exercised here against kube-apiserver: what it accepts, what it rejects and with which field
named, what the status subresource keeps apart, and what ``kubectl get -o wide`` shows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.kube import REPO, Kube

from agentrun.operator._resource import API_VERSION, KIND, AgentRunSpec, AgentRunStatus

EXAMPLES = sorted(
    path
    for path in (REPO / "examples").glob("*.yaml")
    if yaml.safe_load(path.read_text())["kind"] == "AgentRun"
)
"""The AgentRun examples (the Agent ones are tests/kube/test_kube_agent_crd.py's)."""

Manifest = dict[str, Any]


def agentrun(name: str, **spec: Any) -> Manifest:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {"agent": "booking", "input": "book a seat", **spec},
    }


def apply(kube: Kube, manifest: Manifest, *extra: str, check: bool = True) -> str:
    result = kube.kubectl("apply", *extra, "-f", "-", stdin=json.dumps(manifest), check=check)
    return result.stderr if result.returncode else result.stdout


def test_crd_is_established_with_its_names(cluster: Kube) -> None:
    crd = json.loads(cluster.kubectl("get", "crd", "agentruns.agentrun.dev", "-o", "json").stdout)
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert conditions["NamesAccepted"] == "True"
    assert crd["status"]["acceptedNames"]["shortNames"] == ["ar"]
    assert crd["status"]["acceptedNames"]["categories"] == ["agentrun"]
    resources = cluster.kubectl("api-resources", "--api-group=agentrun.dev", "-o", "wide").stdout
    assert "ar" in resources.split()
    assert "AgentRun" in resources


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_applies(kube: Kube, example: Path) -> None:
    manifest = yaml.safe_load(example.read_text())
    AgentRunSpec.model_validate(manifest["spec"])
    assert (
        "created (server dry run)"
        in kube.kubectl("apply", "--dry-run=server", "-f", str(example)).stdout
    )
    kube.kubectl("apply", "-f", str(example))
    stored = json.loads(
        kube.kubectl("get", "agentrun", manifest["metadata"]["name"], "-o", "json").stdout
    )
    assert stored["spec"] == manifest["spec"]


def test_the_approval_example_takes_a_decision_patched_in(kube: Kube) -> None:
    """As its comment says to, by a person holding agentrun-approve, in their own name."""
    kube.kubectl("apply", "-f", str(REPO / "examples" / "booking-with-approval.yaml"))
    alice = kube.grant("alice@example.com", "agentrun-approve")
    decision = {"requestId": "req-1", "decision": "approve", "by": "alice@example.com"}
    patch = [{"op": "add", "path": "/spec/approvals/-", "value": decision}]
    alice.kubectl(
        "patch", "agentrun", "booking-with-approval", "--type=json", "-p", json.dumps(patch)
    )
    approvals = kube.kubectl(
        "get", "agentrun", "booking-with-approval", "-o", "jsonpath={.spec.approvals}"
    ).stdout
    assert json.loads(approvals) == [decision]


def _without(path: str) -> Callable[[Manifest], None]:
    def edit(manifest: Manifest) -> None:
        *parents, last = path.split(".")
        node = manifest
        for key in parents:
            node = node[key]
        del node[last]

    return edit


def _spec(**fields: Any) -> Callable[[Manifest], None]:
    def edit(manifest: Manifest) -> None:
        manifest["spec"].update(fields)

    return edit


RAN = {"callId": "call-1", "outcome": "ran", "by": "bob"}
APPROVE = {"requestId": "req-1", "decision": "approve", "by": "alice"}

# (id, edit of a valid AgentRun, text the API server's refusal must contain)
INVALID: list[tuple[str, Callable[[Manifest], None], str]] = [
    ("no-spec", _without("spec"), "spec: Required value"),
    ("no-agent", _without("spec.agent"), "spec.agent: Required value"),
    ("agent-pattern", _spec(agent="Booking Agent"), "spec.agent: Invalid value"),
    ("unknown-field", _spec(agnet="booking"), 'unknown field "spec.agnet"'),
    ("tenant-pattern", _spec(tenant="ACME/eu"), "spec.tenant: Invalid value"),
    ("input-too-long", _spec(input="x" * 16385), "spec.input: Too long"),
    ("suspend-type", _spec(suspend="yes"), "spec.suspend: Invalid value"),
    (
        "boundary-enum",
        _spec(checkpointPolicy={"boundaries": ["mid_dispatch"]}),
        "spec.checkpointPolicy.boundaries[0]: Unsupported value",
    ),
    (
        "boundary-duplicate",
        _spec(checkpointPolicy={"boundaries": ["after_model_call", "after_model_call"]}),
        "spec.checkpointPolicy.boundaries[1]: Duplicate value",
    ),
    (
        "max-bytes-range",
        _spec(checkpointPolicy={"maxBytes": 10}),
        "spec.checkpointPolicy.maxBytes: Invalid value",
    ),
    ("ttl-range", _spec(leasePolicy={"ttlSeconds": 1}), "spec.leasePolicy.ttlSeconds: Invalid"),
    (
        "renew-after-expiry",
        _spec(leasePolicy={"ttlSeconds": 30, "renewWithinSeconds": 30}),
        'spec.leasePolicy.renewWithinSeconds: Invalid value: "object": renewWithinSeconds must',
    ),
    ("budget-range", _spec(budget={"maxCostMicros": 0}), "spec.budget.maxCostMicros: Invalid"),
    (
        "approval-decision",
        _spec(approvals=[{**APPROVE, "decision": "maybe"}]),
        "spec.approvals[0].decision: Unsupported value",
    ),
    (
        "approval-without-by",
        _spec(approvals=[{"requestId": "req-1", "decision": "deny"}]),
        "spec.approvals[0].by: Required value",
    ),
    (
        "approval-duplicate",
        _spec(approvals=[APPROVE, {**APPROVE, "decision": "deny"}]),
        "spec.approvals[1]: Duplicate value",
    ),
    (
        "resolution-ran-without-result",
        _spec(resolutions=[RAN]),
        'spec.resolutions[0].result: Invalid value: "object": result is required',
    ),
    (
        "resolution-didnotrun-with-result",
        _spec(resolutions=[{**RAN, "outcome": "didNotRun", "result": "ok"}]),
        "spec.resolutions[0].result: Invalid value",
    ),
    (
        "resolution-outcome",
        _spec(resolutions=[{**RAN, "outcome": "maybe", "result": "ok"}]),
        "spec.resolutions[0].outcome: Unsupported value",
    ),
]


@pytest.mark.parametrize(
    ("edit", "expected"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_invalid_agentrun_is_rejected_naming_the_field(
    kube: Kube, edit: Callable[[Manifest], None], expected: str
) -> None:
    manifest = agentrun("invalid")
    edit(manifest)
    error = apply(kube, manifest, "--dry-run=server", check=False)
    assert expected in error, error


def test_status_is_only_written_through_the_status_subresource(kube: Kube) -> None:
    manifest = agentrun("status-split")
    manifest["status"] = {"iteration": 7, "lease": {"holder": "intruder", "fence": 99}}
    kube.kubectl("create", "-f", "-", stdin=json.dumps(manifest))
    status = kube.kubectl("get", "agentrun", "status-split", "-o", "jsonpath={.status}").stdout
    assert status == ""

    written = {"iteration": 3, "lease": {"holder": "op-0", "fence": 2}}
    kube.kubectl(
        "patch", "agentrun", "status-split", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": written}),
    )  # fmt: skip
    kube.kubectl(
        "patch", "agentrun", "status-split", "--type=merge",
        "-p", json.dumps({"spec": {"suspend": True}, "status": {"iteration": 99}}),
    )  # fmt: skip
    stored = json.loads(kube.kubectl("get", "agentrun", "status-split", "-o", "json").stdout)
    assert stored["spec"]["suspend"] is True
    assert stored["status"] == written


def test_status_subresource_validates_conditions(kube: Kube) -> None:
    kube.kubectl("create", "-f", "-", stdin=json.dumps(agentrun("bad-status")))
    condition = {
        "type": "Succeeded",
        "status": "Maybe",
        "reason": "not a reason",
        "message": "",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
    }
    result = kube.kubectl(
        "patch", "agentrun", "bad-status", "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": {"conditions": [condition]}}), check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "status.conditions[0].status: Unsupported value" in result.stderr
    assert "status.conditions[0].reason: Invalid value" in result.stderr


def test_printer_columns_show_the_run_its_holder_and_controller(kube: Kube) -> None:
    kube.kubectl("create", "-f", "-", stdin=json.dumps(agentrun("columns")))
    status = AgentRunStatus.model_validate(
        {
            "observedGeneration": 1,
            "iteration": 4,
            "resumeCount": 1,
            "controller": "agentrun.dev/operator",
            "lease": {"holder": "agentrun-operator-7d9c-x2x1", "fence": 3},
            "conditions": [
                {
                    "type": "Succeeded",
                    "status": "Unknown",
                    "reason": "AwaitingApproval",
                    "message": "book_flight waits for approval req-1",
                    "lastTransitionTime": "2025-01-01T00:00:00Z",
                    "observedGeneration": 1,
                }
            ],
            "pendingApproval": {"requestId": "req-1", "callId": "call-1", "tool": "book_flight"},
        }
    )
    body = {"status": status.model_dump(mode="json", by_alias=True, exclude_none=True)}
    kube.kubectl(
        "patch", "agentrun", "columns", "--subresource=status", "--type=merge",
        "-p", json.dumps(body),
    )  # fmt: skip
    table = kube.kubectl("get", "agentruns", "-o", "wide").stdout
    header, *rows = table.splitlines()
    assert header.split() == [
        "NAME", "STATUS", "AGENT", "ITERATION", "FENCE", "HOLDER", "RESUMES", "CONTROLLER",
        "AGE",
    ]  # fmt: skip
    row = next(r.split() for r in rows if r.startswith("columns "))
    assert row[:8] == [
        "columns", "AwaitingApproval", "booking", "4", "3", "agentrun-operator-7d9c-x2x1", "1",
        "agentrun.dev/operator",
    ]  # fmt: skip
    narrow = kube.kubectl("get", "ar", "columns").stdout.splitlines()[0].split()
    assert narrow == ["NAME", "STATUS", "AGENT", "ITERATION", "AGE"]


def _patch(kube: Kube, name: str, patch: Manifest | list[Manifest], kind: str) -> str:
    result = kube.kubectl(
        "patch", "agentrun", name, f"--type={kind}", "-p", json.dumps(patch), check=False
    )
    return result.stderr if result.returncode else ""


def test_agent_and_tenant_are_immutable(kube: Kube) -> None:
    kube.kubectl("create", "-f", "-", stdin=json.dumps(agentrun("fixed", tenant="acme")))
    kube.kubectl("create", "-f", "-", stdin=json.dumps(agentrun("untenanted")))

    assert "spec.agent: Invalid value" in _patch(
        kube, "fixed", {"spec": {"agent": "other"}}, "merge"
    )
    assert "agent is immutable" in _patch(kube, "fixed", {"spec": {"agent": "other"}}, "merge")
    assert "spec.tenant: Invalid value" in _patch(
        kube, "fixed", {"spec": {"tenant": "globex"}}, "merge"
    )
    assert "tenant is immutable" in _patch(kube, "fixed", {"spec": {"tenant": None}}, "merge")
    assert "tenant is immutable" in _patch(
        kube, "untenanted", {"spec": {"tenant": "acme"}}, "merge"
    )
    assert _patch(kube, "fixed", {"spec": {"suspend": True}}, "merge") == ""
