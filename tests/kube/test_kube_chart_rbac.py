"""The chart's RBAC is exactly what the operator uses, in both scopes, proven by running it.

The chart's ServiceAccount and RBAC objects (``helm template --show-only``) are applied to a
control plane of this module's own, a token is requested for the ServiceAccount, and a real
operator process runs a booking to completion and forgets it on delete with nothing but that
token, its metrics secure as the chart's default is and scraped by a ServiceAccount bound to the
chart's ``agentrun-metrics-reader`` (so the operator reviews that scraper's token). The API
server's audit log then holds the RBAC to the code both ways: no request was refused (a 403
makes kopf retry for about a minute before it watches anything), and every granted (group,
resource, verb) was used. A cluster of its own, because a cluster-wide operator
would otherwise take up the other test modules' runs. The console is held to its own
ServiceAccount and RBAC (``templates/console-rbac.yaml``) the same way, run as the chart runs it
behind an authenticating proxy.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.agentruns import apply_run, wait_until_completed
from tests.support.chart import CHART, private_cluster, service_account_kubeconfig
from tests.support.console import ConsoleProcess
from tests.support.kube import REPO, ControlPlane, Kube, helm_binary
from tests.support.operator import Operators, wait_for
from tests.support.redis_server import RedisServer

CRD = REPO / "crds" / "agentruns.agentrun.dev.yaml"
COMPLETES_WITHIN_S = 30.0
"""A booking takes a few seconds; a blind operator (403s retried) takes about a minute."""

Grant = tuple[str, str, str]
"""(API group, resource[/subresource], verb)."""


@pytest.fixture(scope="module")
def cluster_of_its_own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    with private_cluster(tmp_path_factory.mktemp("rbac-plane"), "rbac") as kube:
        kube.kubectl("apply", "--server-side", "-f", str(CRD))
        kube.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", "crd/agentruns.agentrun.dev"
        )
        roles = kube.helm(
            helm_binary(),
            "template",
            "roles",
            str(CHART),
            "--show-only",
            "templates/user-roles.yaml",
        ).stdout
        kube.kubectl("apply", "-f", "-", stdin=roles)
        yield kube


DECLARED_AGENTS: set[Grant] = {
    ("agentrun.dev", "agents", "get"),
    ("agentrun.dev", "agents", "list"),
    ("agentrun.dev", "agents", "watch"),
    ("agentrun.dev", "agents", "patch"),
    ("agentrun.dev", "agents/status", "patch"),
    ("", "secrets", "get"),
}
"""The grants only a declared agent uses (an ``Agent`` resource, the Secrets it names): a booking
of the image's agent leaves them unused; tests/kube/test_kube_agents.py is what exercises them."""

QUOTAS: set[Grant] = {
    ("agentrun.dev", "runquotas", "watch"),
    ("agentrun.dev", "runquotas/status", "patch"),
}
"""The grants of RunQuotas the booking here may leave unused: their status is written only where
a namespace has a quota (it has none), and kopf's watch of them, with no event to deliver, is
audited only once it ends, which it may not in the test's time (the list the operator makes of
the namespace's quotas is audited, and is held to use). tests/kube/test_run_quotas.py exercises
both."""


ON_REFUSAL: set[Grant] = {("agentrun.dev", "agentruns", "get")}
"""A run read by name: only when a write of the operator's was refused (another replica's claim
or lease came first, the spec moved between two status writes, a finalizer moved) or a deleted
run must be tried again, none of which a lone operator's booking meets (a deleted run is
forgotten from the watch event that showed its deletion). tests/kube/test_claim_race.py,
test_status_writer.py and test_finalizer_drop.py exercise it."""


def _scraper_token(kube: Kube) -> str:
    """A token of a ServiceAccount that may read the operator's metrics, as Prometheus' may."""
    kube.kubectl("create", "serviceaccount", "scraper")
    kube.kubectl(
        "create", "clusterrolebinding", f"{kube.namespace}-scraper",
        "--clusterrole=agentrun-metrics-reader", f"--serviceaccount={kube.namespace}:scraper",
    )  # fmt: skip
    return kube.kubectl("create", "token", "scraper").stdout.strip()


def granted(rendered: str) -> set[Grant]:
    """Every (group, resource, verb) the rendered Roles and ClusterRoles grant."""
    grants: set[Grant] = set()
    for doc in yaml.safe_load_all(rendered):
        if doc and doc["kind"] in ("Role", "ClusterRole"):
            for rule in doc["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        grants.update((group, resource, verb) for verb in rule["verbs"])
    return grants


def used(events: list[dict[str, Any]]) -> set[Grant]:
    grants: set[Grant] = set()
    for event in events:
        ref = event.get("objectRef")
        if ref is None:  # discovery (/api, /apis, /version): every authenticated user may
            continue
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        grants.add((ref.get("apiGroup", ""), resource, event["verb"]))
    return grants


@pytest.mark.parametrize("cluster_wide", [True, False], ids=["cluster-wide", "namespaced"])
def test_the_operator_needs_every_grant_of_the_chart_and_no_other(
    cluster_of_its_own: Kube,
    redis: RedisServer,
    effects: Path,
    tmp_path: Path,
    cluster_wide: bool,
) -> None:
    admin = cluster_of_its_own
    release = "cluster" if cluster_wide else "scoped"
    kube = Kube(admin.control_plane, f"rbac-{release}", admin.kubectl_bin)
    admin.kubectl("create", "namespace", kube.namespace)
    rendered = kube.helm(
        helm_binary(), "template", release, str(CHART),
        "--show-only", "templates/serviceaccount.yaml", "--show-only", "templates/rbac.yaml",
        "--set", f"rbac.clusterWide={str(cluster_wide).lower()}",
    ).stdout  # fmt: skip
    kube.kubectl("apply", "-f", "-", stdin=rendered)
    service_account = f"{release}-agentrun-operator"
    pool = Operators(
        kube.control_plane,
        kube.namespace,
        redis.url,
        tmp_path,
        env={
            "AGENTRUN_AGENT_MODULES": "tests.kube.operator_agents",
            "AGENTRUN_TEST_EFFECTS": str(effects),
            "KUBECONFIG": str(service_account_kubeconfig(kube, service_account)),
            "AGENTRUN_METRICS_SECURE": "true",
        },
        watch=("--all-namespaces",) if cluster_wide else (),
    )
    replica = pool.start("replica")
    try:
        apply_run(kube, "booked", "slowbook")
        wait_until_completed(kube, "booked", pool.logs, within=COMPLETES_WITHIN_S)
        kube.kubectl("delete", "agentrun", "booked", "--timeout=30s")
        status, body = replica.scrape(_scraper_token(kube))
        assert status == 200, body
    finally:
        pool.stop_all()

    # A refusal as the API server words it (reason Forbidden) or as the client logs its status
    # code; not any "403", which a timestamp's milliseconds or a fence hold now and then.
    refused = [
        line
        for line in replica.output().splitlines()
        if "Forbidden" in line or re.search(r'HTTP/1\.1" 403\b', line)
    ]
    assert refused == [], "\n".join(line[:300] for line in refused[:3])
    plane = kube.control_plane
    assert isinstance(plane, ControlPlane), "the audit log is the envtest plane's"
    audited = plane.audited(f"system:serviceaccount:{kube.namespace}:{service_account}")
    denied = [e for e in audited if e["responseStatus"]["code"] == 403]
    assert denied == [], [(e["verb"], e["requestURI"]) for e in denied]
    unused = granted(rendered) - used(audited)
    assert used(audited) <= granted(rendered)
    assert unused <= DECLARED_AGENTS | QUOTAS | ON_REFUSAL, sorted(
        unused - DECLARED_AGENTS - QUOTAS - ON_REFUSAL
    )


@dataclass
class ChartConsole(ConsoleProcess):
    """The console with the token of the chart's ServiceAccount for it, and nothing else."""

    service_account: str = ""

    def _kubeconfig(self) -> Path:
        return service_account_kubeconfig(self.kube, self.service_account)


def console_used(events: list[dict[str, Any]]) -> set[Grant]:
    """What the console's own grants were used for: its requests as itself, and its
    impersonation. A request it made impersonating a person is authorized as that person (their
    access review), so it uses the console's impersonate on users, and on groups when it named
    some, and nothing else of the console's."""
    grants: set[Grant] = set()
    for event in events:
        impersonated = event.get("impersonatedUser")
        if impersonated is None:
            grants |= used([event])
            continue
        grants.add(("", "users", "impersonate"))
        if set(impersonated.get("groups") or ()) - {"system:authenticated"}:
            grants.add(("", "groups", "impersonate"))
    return grants


def _runs_page(console: ConsoleProcess, user: str, groups: str = "") -> str:
    """/runs as the authenticating proxy in front would ask for it: naming the person."""
    headers = {"X-Forwarded-User": user} | ({"X-Forwarded-Groups": groups} if groups else {})
    request = urllib.request.Request(f"{console.url}/runs", headers=headers)
    with urllib.request.urlopen(request, timeout=10) as answer:
        return str(answer.read().decode())


@pytest.mark.parametrize("cluster_wide", [True, False], ids=["cluster-wide", "namespaced"])
def test_the_console_needs_every_grant_of_the_chart_and_no_other(
    cluster_of_its_own: Kube, redis: RedisServer, tmp_path: Path, cluster_wide: bool
) -> None:
    """The console as the chart runs it (its arguments from the rendered Deployment) in proxy
    mode with impersonation, with only its ServiceAccount's token: people named by the proxy see
    the runs their own RBAC lets them list, and the audit log shows the console used exactly its
    grants (list and watch AgentRuns, impersonate users and groups), none refused."""
    admin = cluster_of_its_own
    release = "console" if cluster_wide else "console-scoped"
    kube = Kube(admin.control_plane, f"rbac-{release}", admin.kubectl_bin)
    admin.kubectl("create", "namespace", kube.namespace)
    values = (
        "--set", "console.enabled=true,console.auth.mode=proxy",
        "--set", f"rbac.clusterWide={str(cluster_wide).lower()},store.url={redis.url}",
    )  # fmt: skip
    rendered = kube.helm(
        helm_binary(), "template", release, str(CHART),
        "--show-only", "templates/console-rbac.yaml", *values,
    ).stdout  # fmt: skip
    kube.kubectl("apply", "-f", "-", stdin=rendered)
    objects = kube.helm(
        helm_binary(), "template", release, str(CHART),
        "--show-only", "templates/console.yaml", *values,
    ).stdout  # fmt: skip
    (deployment,) = (d for d in yaml.safe_load_all(objects) if d and d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    # Its own arguments but where it listens: this test's loopback port, not the pod's 0.0.0.0.
    args = [a for a in container["args"] if not a.startswith(("--host=", "--port="))]
    assert ("--namespace=" + kube.namespace in args) is not cluster_wide

    apply_run(kube, "before-the-console", "slowbook")
    kube.kubectl(
        "create", "rolebinding", "viewers", "--clusterrole=agentrun-view", "--group=run-viewers"
    )
    service_account = f"{release}-agentrun-operator-console"
    console = ChartConsole(kube, redis.url, tmp_path, tuple(args), service_account=service_account)
    console.start()
    try:
        seen = _runs_page(console, "vera", "run-viewers")
        assert f"/runs/{kube.namespace}/before-the-console" in seen, console.log()
        assert "before-the-console" not in _runs_page(console, "sam")
        apply_run(kube, "after-the-console", "slowbook")  # shown by the console's watch
        wait_for(
            "the console to show a run created after it started",
            lambda: "after-the-console" in _runs_page(console, "vera", "run-viewers"),
            30,
            console.log,
        )
    finally:
        console.stop()

    plane = kube.control_plane
    assert isinstance(plane, ControlPlane), "the audit log is the envtest plane's"
    user = f"system:serviceaccount:{kube.namespace}:{service_account}"
    granted_to_console = granted(rendered)
    # The watch is audited once the API server has answered it (its first event, or its end).
    wait_for(
        "the console's watch in the audit log",
        lambda: ("agentrun.dev", "agentruns", "watch") in console_used(plane.audited(user)),
        30,
    )
    audited = plane.audited(user)
    denied = [e for e in audited if e["responseStatus"]["code"] >= 400]
    assert denied == [], [(e["verb"], e["requestURI"], e["responseStatus"]) for e in denied]
    assert granted_to_console == {
        ("agentrun.dev", "agentruns", "list"),
        ("agentrun.dev", "agentruns", "watch"),
        ("", "users", "impersonate"),
        ("", "groups", "impersonate"),
    }
    assert console_used(audited) == granted_to_console
