"""The chart's user roles grant exactly what their names say, asked of the API server itself.

Each ClusterRole of templates/user-roles.yaml (installed by the session fixture as ``helm
template`` renders it) is bound to a person of its own in this module's namespace, and the API
server says everything that person may do there (a SelfSubjectRulesReview created ``--as`` them,
what ``kubectl auth can-i --list`` prints as a table): the agentrun.dev resources and Secrets in
that list must be the role's promise, nothing more. Writing an Agent is its own
grant, apart from starting runs: an Agent decides where the operator connects and which of the
namespace's Secrets it sends there. So is writing a RunQuota, in no built-in role at all: it is the
limit set on a namespace from outside it, which its own people (admins included) cannot raise.
"""

from __future__ import annotations

import json

from tests.support.kube import Kube

READ = frozenset({"get", "list", "watch"})
WRITE = frozenset({"create", "update", "patch", "delete", "deletecollection"})
WATCHED = (
    "agentruns",
    "agentruns/status",
    "agents",
    "agents/status",
    "runquotas",
    "runquotas/status",
    "secrets",
)
"""The resources whose grants the list is held to (the rest is discovery every user has)."""

Grants = set[tuple[str, str]]
"""(resource[/subresource], verb)."""


def _grants(resource: str, verbs: frozenset[str]) -> Grants:
    return {(resource, verb) for verb in verbs}


PROMISED: dict[str, Grants] = {
    "agentrun-view": _grants("agentruns", READ)
    | _grants("agentruns/status", READ)
    | _grants("agents", READ)
    | _grants("agents/status", READ)
    | _grants("runquotas", READ)
    | _grants("runquotas/status", READ),
    "agentrun-edit": _grants("agentruns", READ | WRITE) | _grants("agentruns/status", READ),
    "agentrun-approve": _grants("agentruns", READ | {"patch", "approve", "resolve"})
    | _grants("agentruns/status", READ),
    "agentrun-agent-author": _grants("agents", READ | WRITE) | _grants("agents/status", READ),
    "agentrun-quota-manager": _grants("runquotas", READ | WRITE)
    | _grants("runquotas/status", READ),
    "agentrun-metrics-reader": set(),
}
AGGREGATED = {
    "agentrun-view": ["admin", "edit", "view"],
    "agentrun-edit": ["admin", "edit"],
    "agentrun-approve": ["admin"],
    "agentrun-agent-author": ["admin"],
    "agentrun-quota-manager": [],
    "agentrun-metrics-reader": [],
}


def _may(person: Kube) -> Grants:
    """What the API server says ``person`` may do to the watched resources."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectRulesReview",
        "spec": {"namespace": person.namespace},
    }
    # No client-side validation: it would list CRDs, which none of these people may.
    created = person.kubectl(
        "create", "--validate=false", "-f", "-", "-o", "json", stdin=json.dumps(review)
    )
    listed = created.stdout
    rules = json.loads(listed)["status"]["resourceRules"]
    found: Grants = set()
    for rule in rules:
        groups = rule.get("apiGroups") or [""]
        for resource in rule.get("resources", []):
            qualified = resource if "" in groups else f"{resource}.{groups[0]}"
            name = qualified.removesuffix(".agentrun.dev")
            if name in WATCHED and ("agentrun.dev" in groups or name == "secrets"):
                found.update((name, verb) for verb in rule["verbs"])
    return found


def test_each_role_grants_exactly_what_it_says(kube: Kube) -> None:
    for role, promised in PROMISED.items():
        person = kube.grant(f"holder-of-{role}", role)
        assert _may(person) == promised, role


def test_writing_agents_comes_with_no_built_in_role_but_admin(kube: Kube) -> None:
    listed = kube.kubectl("get", "clusterroles", *PROMISED, "-o", "json").stdout
    aggregated = {
        role["metadata"]["name"]: sorted(
            label.rsplit("-", 1)[-1]
            for label, value in role["metadata"]["labels"].items()
            if label.startswith("rbac.authorization.k8s.io/aggregate-to-") and value == "true"
        )
        for role in json.loads(listed)["items"]
    }
    assert aggregated == AGGREGATED
    # One who may start runs may not declare where the operator connects, nor read Secrets.
    runner = kube.grant("ruth", "agentrun-edit")
    for verb in ("create", "patch", "update", "delete"):
        answer = runner.kubectl("auth", "can-i", verb, "agents.agentrun.dev", check=False)
        assert answer.stdout.strip() == "no", verb
    author = kube.grant("arthur", "agentrun-agent-author")
    answer = author.kubectl("auth", "can-i", "get", "secrets", check=False)
    assert answer.stdout.strip() == "no"


def test_the_metrics_reader_may_get_metrics_and_nothing_else(kube: Kube) -> None:
    scraper = kube.as_user("prometheus-scraper")
    assert scraper.kubectl("auth", "can-i", "get", "/metrics", check=False).stdout.strip() == "no"
    kube.kubectl(
        "create", "clusterrolebinding", "agentrun-metrics-reader-scraper",
        "--clusterrole=agentrun-metrics-reader", "--user=prometheus-scraper",
    )  # fmt: skip
    try:
        answer = scraper.kubectl("auth", "can-i", "get", "/metrics", check=False)
        assert answer.stdout.strip() == "yes"
        for verb in ("post", "put", "delete"):
            answer = scraper.kubectl("auth", "can-i", verb, "/metrics", check=False)
            assert answer.stdout.strip() == "no", verb
        assert _may(scraper) == set()
    finally:
        kube.kubectl("delete", "clusterrolebinding", "agentrun-metrics-reader-scraper")
