"""The RunQuota CRD as a real API server enforces it, and the models read what it lets through.

Each refusal is asked of kube-apiserver and of ``parse_quota`` alike, from one table: both must
name the same field, so the CRD and the model cannot drift apart on a bound, a pattern or a CEL
rule without a test failing. Beside it: the printer columns, which RunQuota of a namespace is
honoured when it has several, who may write one (the chart's roles, asked through impersonation),
and the Kubernetes ResourceQuota that bounds the number of AgentRun objects beside it. The
RunQuota, the ResourceQuota and the ``kubectl get`` output are the ones docs/kubernetes.md shows.
"""

from __future__ import annotations

import json
import re
import time
from datetime import timedelta
from typing import Any

import pytest
import yaml
from tests.docs.samples import samples
from tests.support.kube import REPO, Kube

from agentrun._errors import ConfigurationError
from agentrun.operator._quota_resource import (
    QUOTA_KIND,
    Budget,
    RunQuotaSpec,
    RunQuotaStatus,
    WhenSpent,
    effective_quota,
    parse_quota,
)
from agentrun.operator._resource import API_VERSION, KIND

Manifest = dict[str, Any]

DOCS = (REPO / "docs" / "kubernetes.md").read_text()
SECTION = DOCS.split("## Quotas: the RunQuota resource\n", 1)[1].split("\n## ", 1)[0]
SHOWN_QUOTA, SHOWN_COUNT = (
    yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", SECTION, re.S)
)
SPEC: Manifest = SHOWN_QUOTA["spec"]
(SHOWN_GET,) = [
    sample
    for sample in samples()
    if sample.scenario == "checked-by" and "tests/kube/test_kube_runquota.py" in sample.arguments
]


def namespace_of_its_own(kube: Kube, suffix: str) -> Kube:
    namespace = f"{kube.namespace}-{suffix}"
    kube.kubectl("create", "namespace", namespace)
    return Kube(kube.control_plane, namespace, kube.kubectl_bin)


def as_shown(manifest: Manifest) -> Manifest:
    """A manifest of the docs, for the test's namespace instead of team-a."""
    return {**manifest, "metadata": {"name": manifest["metadata"]["name"]}}


def quota(name: str, spec: Manifest) -> Manifest:
    return {"apiVersion": API_VERSION, "kind": QUOTA_KIND, "metadata": {"name": name}, "spec": spec}


def create(kube: Kube, manifest: Manifest, *extra: str, check: bool = True) -> str:
    result = kube.kubectl("create", *extra, "-f", "-", stdin=json.dumps(manifest), check=check)
    return result.stderr if result.returncode else result.stdout


def test_crd_is_established_with_its_names(cluster: Kube) -> None:
    crd = json.loads(cluster.kubectl("get", "crd", "runquotas.agentrun.dev", "-o", "json").stdout)
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert conditions["NamesAccepted"] == "True"
    assert crd["status"]["acceptedNames"]["shortNames"] == ["rq"]
    # In no category: "agentrun" is AgentRun's, and `kubectl get agentrun NAME` must name one kind.
    assert "categories" not in crd["status"]["acceptedNames"]


def test_the_quota_the_docs_show_is_stored_with_its_defaults_and_read_by_the_model(
    kube: Kube,
) -> None:
    assert SHOWN_QUOTA["kind"] == QUOTA_KIND
    create(kube, as_shown(SHOWN_QUOTA))
    create(kube, quota("defaults", {"budget": {"maxTokens": 10}}))
    stored = json.loads(kube.kubectl("get", "runquota", "defaults", "-o", "json").stdout)
    assert stored["spec"] == {
        "budget": {"window": "24h", "maxTokens": 10},
        "weight": 1,
        "whenSpent": "Queue",
    }
    assert parse_quota(stored) == RunQuotaSpec(
        budget=Budget(window=timedelta(hours=24), max_tokens=10),
        weight=1,
        when_spent=WhenSpent.QUEUE,
    )
    team = json.loads(kube.kubectl("get", "rq", "team-a", "-o", "json").stdout)
    assert parse_quota(team).model_dump(mode="json", by_alias=True, exclude_none=True) == {
        **SPEC,
        "budget": {**SPEC["budget"], "window": "1d"},  # the same window, in its largest unit
    }


# (id, spec, what the API server's refusal must contain, the field parse_quota names)
INVALID: list[tuple[str, Manifest, str, str]] = [
    ("typo", {**SPEC, "maxActiveRun": 5}, 'unknown field "spec.maxActiveRun"', "spec.maxActiveRun"),
    (
        "budget-typo",
        {"budget": {"maxCost": 5, "maxTokens": 1}},
        'unknown field "spec.budget.maxCost"',
        "spec.budget.maxCost",
    ),
    (
        "negative-runs",
        {"maxActiveRuns": -1},
        "spec.maxActiveRuns: Invalid value",
        "spec.maxActiveRuns",
    ),
    (
        "negative-cost",
        {"budget": {"maxCostMicros": -5}},
        "spec.budget.maxCostMicros: Invalid value",
        "spec.budget.maxCostMicros",
    ),
    (
        "negative-tokens",
        {"budget": {"maxTokens": -1}},
        "spec.budget.maxTokens: Invalid value",
        "spec.budget.maxTokens",
    ),
    *(
        (
            f"window-{window}",
            {"budget": {"window": window, "maxTokens": 1}},
            "spec.budget.window: Invalid value",
            "spec.budget.window",
        )
        for window in ("24", "30s", "0m", "1.5h", "1w", "-1h", "24H")
    ),
    (
        "when-spent",
        {**SPEC, "whenSpent": "Stop"},
        "spec.whenSpent: Unsupported value",
        "spec.whenSpent",
    ),
    ("weight-zero", {**SPEC, "weight": 0}, "spec.weight: Invalid value", "spec.weight"),
    ("weight-above", {**SPEC, "weight": 1001}, "spec.weight: Invalid value", "spec.weight"),
    ("limits-nothing", {"weight": 3}, "spec: Invalid value", "spec:"),
    (
        "budget-limits-nothing",
        {"budget": {"window": "1h"}},
        "spec.budget: Invalid value",
        "spec.budget:",
    ),
]


@pytest.mark.parametrize(
    ("spec", "refusal", "field"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID]
)
def test_an_invalid_quota_is_refused_by_the_crd_and_the_model_naming_the_field(
    kube: Kube, spec: Manifest, refusal: str, field: str
) -> None:
    error = create(kube, quota("invalid", spec), "--dry-run=server", check=False)
    assert refusal in error, error
    with pytest.raises(ConfigurationError, match=f"RunQuota [^:]*: .*{field}") as raised:
        parse_quota(quota("invalid", spec))
    assert field in str(raised.value)


def test_the_cel_rules_say_what_to_set(kube: Kube) -> None:
    error = create(kube, quota("nothing", {"weight": 3}), "--dry-run=server", check=False)
    assert "a RunQuota limits something; set maxActiveRuns, budget or both" in error
    error = create(kube, quota("no-max", {"budget": {}}), "--dry-run=server", check=False)
    assert "a budget sets maxCostMicros, maxTokens or both" in error


def test_printer_columns_show_what_the_docs_show(kube: Kube) -> None:
    there = namespace_of_its_own(kube, "shown")
    create(there, as_shown(SHOWN_QUOTA))
    status = RunQuotaStatus.model_validate(
        {
            "observedGeneration": 1,
            "active": 3,
            "queued": 7,
            "spentMicros": 120_000,
            "spentTokens": 4000,
            "activeSummary": "3/5",
            "spentSummary": "0.12/5.00",
            "windowStart": "2026-12-02T00:00:00Z",
        }
    )
    body = {"status": status.model_dump(mode="json", by_alias=True, exclude_none=True)}
    there.kubectl(
        "patch", "runquota", "team-a", "--subresource=status", "--type=merge",
        "-p", json.dumps(body),
    )  # fmt: skip
    stored = json.loads(there.kubectl("get", "runquota", "team-a", "-o", "json").stdout)
    assert RunQuotaStatus.model_validate(stored["status"]) == status
    (step,) = SHOWN_GET.steps
    assert step.command == "kubectl -n team-a get runquotas"
    header, *rows = there.kubectl("get", "runquotas").stdout.splitlines()
    shown_header, *shown_rows = step.expected
    assert header.split() == shown_header.split()
    # every column but the age, which the docs show as days
    assert [row.split()[:-1] for row in rows] == [row.split()[:-1] for row in shown_rows]


def test_the_oldest_quota_of_a_namespace_is_the_effective_one(kube: Kube) -> None:
    """Created a second apart (creationTimestamp counts seconds), the older one named so that
    the name alone would choose the other."""
    there = namespace_of_its_own(kube, "two")
    assert effective_quota([]) is None
    create(there, quota("z-first", {"maxActiveRuns": 2}))
    time.sleep(1.1)
    create(there, quota("a-second", {"maxActiveRuns": 50}))
    listed = json.loads(there.kubectl("get", "runquotas", "-o", "json").stdout)["items"]
    assert [q["metadata"]["name"] for q in listed] == ["a-second", "z-first"]
    assert effective_quota(listed) == ("z-first", RunQuotaSpec(max_active_runs=2))
    there.kubectl("delete", "runquota", "z-first")
    listed = json.loads(there.kubectl("get", "runquotas", "-o", "json").stdout)["items"]
    assert effective_quota(listed) == ("a-second", RunQuotaSpec(max_active_runs=50))


def test_the_honoured_quota_is_not_replaced_when_it_does_not_parse() -> None:
    """An object stored under an older CRD: refused, naming it, rather than a laxer newer quota
    read in its place."""
    older = quota("older", {"maxActiveRuns": 2, "retired": True})
    older["metadata"].update(namespace="team-a", creationTimestamp="2026-01-01T00:00:00Z")
    newer = quota("newer", {"maxActiveRuns": 50})
    newer["metadata"].update(namespace="team-a", creationTimestamp="2026-02-01T00:00:00Z")
    with pytest.raises(ConfigurationError, match=r"RunQuota team-a/older: spec\.retired"):
        effective_quota([newer, older])


def test_editors_of_a_namespace_cannot_write_its_quota_and_quota_managers_can(kube: Kube) -> None:
    """Everything the chart aggregates into the built-in edit and admin roles (the aggregation
    itself is kube-controller-manager's, which this control plane does not run, so the chart's
    roles are bound directly; tests/kube/test_kube_user_roles.py checks the labels)."""
    editor = kube.grant(
        "erin", "agentrun-view", "agentrun-edit", "agentrun-approve", "agentrun-agent-author"
    )
    error = create(editor, quota("by-editor", SPEC), check=False)
    assert "forbidden" in error, error
    assert 'cannot create resource "runquotas"' in error, error
    create(kube, quota("given", {"maxActiveRuns": 1}))
    patch = json.dumps({"spec": {"maxActiveRuns": 100}})
    error = editor.kubectl(
        "patch", "runquota", "given", "--type=merge", "-p", patch, check=False
    ).stderr
    assert 'cannot patch resource "runquotas"' in error, error
    assert editor.kubectl("get", "runquota", "given", "-o", "name").stdout.strip() == (
        "runquota.agentrun.dev/given"
    )
    manager = kube.grant("quinn", "agentrun-quota-manager")
    assert "created" in create(manager, quota("by-manager", SPEC))
    manager.kubectl("patch", "runquota", "given", "--type=merge", "-p", patch)
    manager.kubectl("delete", "runquota", "by-manager")


COUNTED = "count/agentruns.agentrun.dev"


def agentrun(name: str) -> Manifest:
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name},
            "spec": {"agent": "booking"}}  # fmt: skip


def test_a_resource_quota_on_count_agentruns_bounds_the_runs_of_a_namespace(kube: Kube) -> None:
    """Kubernetes' own object count, as the docs show it beside a RunQuota: the API server's
    ResourceQuota admission counts every AgentRun created and refuses the one past the count.

    What this control plane lacks is kube-controller-manager, whose quota controller writes a
    new ResourceQuota's first ``status`` (its hard limits and what the namespace already holds);
    until that status exists the admission ignores the quota. The test writes that first status
    as the controller would for a namespace with no AgentRun: everything after it, the counting
    and the refusal, is the API server's."""
    there = namespace_of_its_own(kube, "count")
    create(there, as_shown(SHOWN_COUNT))
    name, hard = SHOWN_COUNT["metadata"]["name"], SHOWN_COUNT["spec"]["hard"]
    (limit,) = (int(count) for resource, count in hard.items() if resource == COUNTED)
    first_status = {"hard": hard, "used": {COUNTED: "0"}}
    there.kubectl(
        "patch", "resourcequota", name, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": first_status}),
    )  # fmt: skip
    runs = {"apiVersion": "v1", "kind": "List",
            "items": [agentrun(f"run-{index}") for index in range(limit)]}  # fmt: skip
    assert create(there, runs).count("created") == limit
    error = create(there, agentrun("one-more"), check=False)
    shown = " ".join(
        SECTION.split("`kubectl create` is refused with `", 1)[1].split("`")[0].split()
    )
    assert f'agentruns.agentrun.dev "one-more" is forbidden: {shown}' in error, error
    used = there.kubectl("get", "resourcequota", name, "-o", "jsonpath={.status.used}").stdout
    assert json.loads(used) == {COUNTED: str(limit)}
    assert "created" in create(kube, agentrun("elsewhere")), "another namespace is not counted"
