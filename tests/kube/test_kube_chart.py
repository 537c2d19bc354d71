"""The Helm chart, rendered by helm and judged by a real API server.

``helm lint`` only knows Helm's rules; whether the rendered Deployment, RBAC and Services are
objects Kubernetes accepts is the API server's call, so every meaningful combination of values is
applied with ``kubectl apply --dry-run=server``, and a real ``helm install`` (without waiting:
no kubelet runs here, so pods never start) must create the objects. The RBAC the chart grants is
checked by asking the API server what the operator's service account may do.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.kube import REPO, Kube, helm_binary
from tests.support.redis_server import RedisServer

from agentrun import open_backend

CHART = REPO / "charts" / "agentrun-operator"
SERVICE_MONITOR_CRD = Path(__file__).with_name("servicemonitor-crd.yaml")

Manifest = dict[str, Any]


@pytest.fixture(scope="module")
def helm() -> str:
    return helm_binary()


@pytest.fixture(scope="module")
def kube_version(kube: Kube) -> str:
    """The API server's version, so that `helm template` renders for the server it applies to."""
    version: str = json.loads(kube.kubectl("version", "-o", "json").stdout)["serverVersion"][
        "gitVersion"
    ]
    return version


@pytest.fixture(scope="module")
def other_namespace(kube: Kube) -> str:
    name = f"{kube.namespace}-other"
    kube.kubectl("create", "namespace", name)
    return name


def render(kube: Kube, helm: str, kube_version: str, *values: str) -> list[Manifest]:
    result = kube.helm(
        helm, "template", "agentrun", str(CHART), "--kube-version", kube_version, *values
    )
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def by_kind(manifests: list[Manifest], kind: str) -> list[Manifest]:
    return [m for m in manifests if m["kind"] == kind]


def container_of(deployment: Manifest) -> Manifest:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(container)


def operator_env(kube: Kube, helm: str, kube_version: str, *values: str) -> dict[str, object]:
    """The operator container's environment (name to value) as the chart renders it."""
    (deployment,) = by_kind(render(kube, helm, kube_version, *values), "Deployment")
    return {e["name"]: e.get("value") for e in container_of(deployment)["env"]}


def test_chart_carries_the_canonical_crds_byte_for_byte() -> None:
    canonical = sorted(p.name for p in (REPO / "crds").iterdir())
    assert canonical == [
        "agentruns.agentrun.dev.yaml",
        "agents.agentrun.dev.yaml",
        "runquotas.agentrun.dev.yaml",
    ]
    assert sorted(p.name for p in (CHART / "files").iterdir()) == canonical
    for name in canonical:
        assert (CHART / "files" / name).read_bytes() == (REPO / "crds" / name).read_bytes()
    assert not (CHART / "crds").exists(), "Helm installs crds/ once and never upgrades it"


@pytest.mark.parametrize(
    "values",
    [
        [],
        ["--set", "redis.enabled=true,rbac.clusterWide=false"],
        ["--set", "console.enabled=true,console.auth.mode=proxy,console.oauth2Proxy.enabled=true"],
    ],
    ids=["default", "redis-namespaced", "console-oauth2-proxy"],
)
def test_helm_lint_strict(kube: Kube, helm: str, values: list[str]) -> None:
    result = kube.helm(helm, "lint", "--strict", str(CHART), *values)
    assert "0 chart(s) failed" in result.stdout


USER_ROLES = (
    "agentrun-view",
    "agentrun-edit",
    "agentrun-approve",
    "agentrun-agent-author",
    "agentrun-quota-manager",
    "agentrun-metrics-reader",
)
SECOND_RELEASE = (
    "crds.enabled=false,accessControl.decisionPolicy=false,accessControl.agentSecretsPolicy=false,"
    "accessControl.userRoles=false"
)
"""What a release installed beside another must set: the session's cluster already holds the
CRD and the chart's cluster-wide access control (tests/kube/conftest.py), as a cluster with one
release does."""

OPENAI_KEY = {"name": "OPENAI_API_KEY", "valueFrom": {"secretKeyRef": {"name": "llm", "key": "k"}}}
UIDS_UNSET = (
    "podSecurityContext.runAsUser=null,podSecurityContext.runAsGroup=null,"
    "podSecurityContext.fsGroup=null"
)
"""What a platform that assigns UIDs itself (OpenShift's restricted SCC) needs."""

TRACING = (
    "tracing.otlpEndpoint=http://otel-collector.observability:4318,"
    "tracing.headersSecret.name=otlp-headers,tracing.sampleRatio=0.25"
)
"""Spans to a collector, with its token from a Secret, one run in four traced."""

CONSOLE_PROXY = "console.enabled=true,console.auth.mode=proxy"
"""The console behind an authenticating proxy, which it may impersonate people for."""
OAUTH2_PROXY_ARGS = [
    "--provider=oidc",
    "--oidc-issuer-url=https://issuer.example",
    "--email-domain=*",
    "--pass-user-headers",
    "--pass-access-token",
    "--set-xauthrequest",
]

COMBINATIONS = {
    "default": [],
    "second-release": ["--set", SECOND_RELEASE],
    "store-url": ["--set", "store.url=postgresql://agentrun@db:5432/agentrun"],
    "redis": ["--set", "redis.enabled=true"],
    "namespaced": ["--set", "rbac.clusterWide=false"],
    "monitoring": ["--set", "serviceMonitor.enabled=true"],
    "llm-keys-from-secrets": [
        "--set-json", "extraEnv=" + json.dumps([OPENAI_KEY]),
        "--set-json", 'envFrom=[{"secretRef": {"name": "llm-keys"}}]',
        "--set-json", 'extraVolumes=[{"name": "keys", "secret": {"secretName": "llm-files"}}]',
        "--set-json", 'extraVolumeMounts=[{"name": "keys", "mountPath": "/k", "readOnly": true}]',
    ],
    "uids-assigned-by-the-platform": ["--set", UIDS_UNSET],
    "tracing": ["--set", TRACING],
    "hard-anti-affinity-min-available": ["--set", "podAntiAffinity=hard,podDisruptionBudget."
        "minAvailable=1,podDisruptionBudget.maxUnavailable=null"],
    "console": ["--set", "console.enabled=true,console.readOnly=true,console.secureCookies=true"],
    "console-proxy-namespaced": ["--set", CONSOLE_PROXY + ",rbac.clusterWide=false"],
    "console-oauth2-proxy": [
        "--set", CONSOLE_PROXY + ",console.oauth2Proxy.enabled=true",
        "--set-json", "console.oauth2Proxy.args=" + json.dumps(OAUTH2_PROXY_ARGS),
        "--set-json", 'console.oauth2Proxy.envFrom=[{"secretRef": {"name": "console-oauth2"}}]',
        "--set", "console.sessionKey.existingSecret=console-key,console.service.type=NodePort",
    ],
    "network-policy": ["--set", "redis.enabled=true", "--set-json", "egress=" + json.dumps(
        {"allow": ["http://vllm.models.svc:8000/v1"], "networkPolicy": {
            "enabled": True, "apiServer": {"cidrs": ["10.96.0.1", "fd00::1"]},
            "metricsFrom": [{"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}],
            "endpoints": [{"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"port": 443}]}],
        }})],
}  # fmt: skip


@pytest.fixture(scope="module")
def service_monitor_crd(kube: Kube) -> None:
    """A stand-in for the Prometheus Operator's ServiceMonitor CRD, so one can be applied."""
    kube.kubectl("apply", "-f", str(SERVICE_MONITOR_CRD))
    kube.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/servicemonitors.monitoring.coreos.com",
    )


@pytest.mark.parametrize("values", COMBINATIONS.values(), ids=COMBINATIONS.keys())
@pytest.mark.usefixtures("service_monitor_crd")
def test_rendered_chart_passes_server_side_dry_run(
    kube: Kube, helm: str, kube_version: str, values: list[str]
) -> None:
    manifests = render(kube, helm, kube_version, *values)
    result = kube.kubectl(
        "apply", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump_all(manifests)
    )
    applied = [line for line in result.stdout.splitlines() if line.endswith("(server dry run)")]
    assert len(applied) == len(manifests), result.stdout


def test_access_control_is_on_by_default_and_off_for_a_second_release(
    kube: Kube, helm: str, kube_version: str
) -> None:
    def access(manifests: list[Manifest]) -> list[str]:
        return sorted(
            f"{m['kind']}/{m['metadata']['name']}"
            for m in manifests
            if m["kind"].startswith("ValidatingAdmissionPolicy")
            or m["metadata"]["name"] in USER_ROLES
        )

    assert access(render(kube, helm, kube_version)) == [
        "ClusterRole/agentrun-agent-author",
        "ClusterRole/agentrun-approve",
        "ClusterRole/agentrun-edit",
        "ClusterRole/agentrun-metrics-reader",
        "ClusterRole/agentrun-quota-manager",
        "ClusterRole/agentrun-view",
        "ValidatingAdmissionPolicy/agentrun-agent-secrets",
        "ValidatingAdmissionPolicy/agentrun-decisions",
        "ValidatingAdmissionPolicyBinding/agentrun-agent-secrets",
        "ValidatingAdmissionPolicyBinding/agentrun-decisions",
    ]
    assert access(render(kube, helm, kube_version, "--set", SECOND_RELEASE)) == []


def test_default_deployment_is_non_root_read_only_and_probed(
    kube: Kube, helm: str, kube_version: str
) -> None:
    (deployment,) = by_kind(render(kube, helm, kube_version), "Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container_of(deployment)["readinessProbe"]["httpGet"] == {
        "path": "/healthz",
        "port": "health",
    }
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert "emptyDir" in next(v for v in pod["volumes"] if v["name"] == "tmp")
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert {"name": "health", "containerPort": 8080, "protocol": "TCP"} in container["ports"]
    assert container["command"] == ["tini", "--", "python", "-m", "agentrun.operator"]
    assert container["args"] == [
        "--standalone",
        "--liveness=http://0.0.0.0:8080/healthz",
        "--all-namespaces",
    ]
    store = next(e for e in container["env"] if e["name"] == "AGENTRUN_STORE_URL")
    assert store["valueFrom"]["secretKeyRef"] == {"name": "agentrun-store", "key": "url"}
    assert {"name": "AGENTRUN_CONTROLLER_NAME", "value": "agentrun.dev/operator"} in container[
        "env"
    ]


def test_namespaced_install_watches_and_grants_only_its_namespaces(
    kube: Kube, helm: str, kube_version: str, other_namespace: str
) -> None:
    manifests = render(
        kube, helm, kube_version,
        "--set", f"rbac.clusterWide=false,watchNamespaces={{{kube.namespace},{other_namespace}}}",
    )  # fmt: skip
    (deployment,) = by_kind(manifests, "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--namespace={kube.namespace}" in args
    assert f"--namespace={other_namespace}" in args
    assert "--all-namespaces" not in args
    roles = by_kind(manifests, "Role")
    assert sorted(r["metadata"]["namespace"] for r in roles) == sorted(
        [kube.namespace, other_namespace]
    )
    (cluster_role,) = (
        r for r in by_kind(manifests, "ClusterRole") if r["metadata"]["name"] not in USER_ROLES
    )
    assert cluster_role["rules"] == [
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "verbs": ["list", "watch"],
        },
        # metrics.secure: who scrapes the metrics, and whether they may.
        {
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["tokenreviews"],
            "verbs": ["create"],
        },
        {
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["subjectaccessreviews"],
            "verbs": ["create"],
        },
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]},
        {
            "apiGroups": [""],
            "resources": ["namespaces"],
            "resourceNames": [kube.namespace, other_namespace],
            "verbs": ["get"],
        },
    ]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCont": 3}, "Additional property replicaCont is not allowed"),
        ({"redis": {"enabeld": True}}, "Additional property enabeld is not allowed"),
        ({"resources": {"limits": {"cpus": "1"}}}, "Additional property cpus is not allowed"),
        ({"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
        ({"store": {"url": "mysql://db/agentrun"}}, "store.url"),
        ({"accessControl": {"decisionPolicies": False}}, "Additional property decisionPolicies"),
        ({"redis": {"persistence": {"enabeld": False}}}, "Additional property enabeld"),
        ({"redis": {"persistence": {"acknowledgeDataLoss": "yes"}}}, "acknowledgeDataLoss"),
        ({"accessControl": {"userRoles": "no"}}, "accessControl.userRoles"),
        ({"crds": {"keepp": True}}, "Additional property keepp"),
        ({"extraEnv": [{"name": "K", "valueFrom": {"secretKeyRf": {}}}]}, "secretKeyRf"),
        ({"envFrom": [{"secretRef": {"nmae": "k"}}]}, "Additional property nmae"),
        ({"extraVolumes": [{"name": "k", "secert": {}}]}, "Additional property secert"),
        ({"extraVolumeMounts": [{"name": "k", "mountPth": "/k"}]}, "mountPth"),
        ({"podSecurityContext": {"runAsUsr": 1}}, "Additional property runAsUsr"),
        ({"containerSecurityContext": {"readOnlyRootFS": True}}, "readOnlyRootFS"),
        ({"podAntiAffinity": "sometimes"}, "podAntiAffinity"),
        ({"controllerName": "agentrun"}, "controllerName"),
        ({"tracing": {"otlpEndpiont": "http://c:4318"}}, "Additional property otlpEndpiont"),
        ({"tracing": {"otlpEndpoint": "c:4318"}}, "tracing.otlpEndpoint"),
        ({"tracing": {"headersSecret": {"nam": "otlp"}}}, "Additional property nam"),
        ({"tracing": {"sampleRatio": 1.5}}, "tracing.sampleRatio"),
        ({"maxActiveRunsPerReplica": -1}, "maxActiveRunsPerReplica"),
        ({"segmentForm": "zlib"}, "segmentForm"),
        (
            {"accessControl": {"acceptUnauthenticatedDecisions": "yes"}},
            "accessControl.acceptUnauthenticatedDecisions",
        ),
        ({"console": {"enabeld": True}}, "Additional property enabeld is not allowed"),
        ({"console": {"auth": {"mode": "oidc"}}}, "console.auth.mode"),
        ({"console": {"auth": {"proxy": {"impersonat": False}}}}, "Additional property impersonat"),
        ({"console": {"oauth2Proxy": {"extraArgs": []}}}, "Additional property extraArgs"),
        ({"console": {"sessionKey": {"secret": "k"}}}, "Additional property secret"),
    ],
    ids=[
        "top-level",
        "nested",
        "resources",
        "enum",
        "store-scheme",
        "access",
        "access-type",
        "persistence",
        "data-loss-words",
        "crds",
        "env-value-from",
        "env-from",
        "volume",
        "volume-mount",
        "pod-security",
        "container-security",
        "anti-affinity",
        "controller-name",
        "tracing",
        "tracing-endpoint-scheme",
        "tracing-headers-secret",
        "tracing-sample-ratio",
        "max-active-runs",
        "segment-form",
        "accept-unauthenticated-decisions",
        "console",
        "console-auth-mode",
        "console-proxy",
        "console-oauth2-proxy",
        "console-session-key",
    ],
)
def test_values_with_a_typo_are_rejected_by_the_schema(
    kube: Kube, helm: str, kube_version: str, tmp_path: Path, values: Manifest, message: str
) -> None:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    result = kube.helm(
        helm, "template", "agentrun", str(CHART), "--kube-version", kube_version,
        "-f", str(values_file), check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "don't meet the specifications of the schema" in result.stderr
    assert message in result.stderr


def test_conflicting_store_settings_are_refused(kube: Kube, helm: str, kube_version: str) -> None:
    result = kube.helm(
        helm, "template", "agentrun", str(CHART), "--kube-version", kube_version,
        "--set", "redis.enabled=true,store.url=redis://elsewhere:6379/0", check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "set either store.url or redis.enabled, not both" in result.stderr


def _bundled_redis(manifests: list[Manifest]) -> tuple[Manifest, list[str]]:
    """The chart's Redis Deployment, and the arguments its container runs redis-server with."""
    (deployment,) = (
        m for m in by_kind(manifests, "Deployment") if m["metadata"]["name"].endswith("-redis")
    )
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return deployment, [str(arg) for arg in container["args"]]


def test_the_bundled_redis_keeps_every_write_across_a_kill(
    kube: Kube, helm: str, kube_version: str, tmp_path: Path
) -> None:
    """The chart's own arguments, run by a real redis-server: SIGKILL it, start it again on the
    same folder, and what was written is there; and the stores accept it (noeviction)."""
    manifests = render(kube, helm, kube_version, "--set", "redis.enabled=true")
    deployment, args = _bundled_redis(manifests)
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    (claim,) = by_kind(manifests, "PersistentVolumeClaim")
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert volumes == [
        {"name": "data", "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}
    ]
    assert args[:2] == ["--dir", "/data"]
    server = RedisServer(tmp_path / "data", extra=tuple(args[2:])).start()
    try:
        assert server.cli("config", "get", "appendfsync").split() == ["appendfsync", "always"]
        server.cli("set", "agentrun:{t:r}:fence", "7")
        server.process.kill()  # type: ignore[union-attr]
        server.process.wait()  # type: ignore[union-attr]
        server.process = None
        server.start()
        assert server.cli("get", "agentrun:{t:r}:fence").strip() == "7"

        async def opens() -> None:
            async with await open_backend(server.url):
                pass

        asyncio.run(opens())
    finally:
        server.stop()


def test_the_bundled_redis_without_persistence_needs_the_words(
    kube: Kube, helm: str, kube_version: str
) -> None:
    without = "redis.enabled=true,redis.persistence.enabled=false"
    refused = kube.helm(
        helm, "template", "agentrun", str(CHART), "--kube-version", kube_version,
        "--set", without, check=False,
    )  # fmt: skip
    assert refused.returncode != 0
    assert "redis.persistence.enabled=false: the chart's Redis would forget" in refused.stderr
    assert 'acknowledgeDataLoss="demo only, data loss accepted"' in refused.stderr
    manifests = render(
        kube, helm, kube_version, "--set", without,
        "--set-string", "redis.persistence.acknowledgeDataLoss=demo only\\, data loss accepted",
    )  # fmt: skip
    _, args = _bundled_redis(manifests)
    assert by_kind(manifests, "PersistentVolumeClaim") == []
    assert args[args.index("--appendonly") + 1] == "no"
    assert args[args.index("--maxmemory-policy") + 1] == "noeviction"


def _walk_objects(schema: Manifest, path: str) -> Iterator[tuple[str, Manifest]]:
    if schema.get("type") == "object":
        yield path, schema
    for name, child in schema.get("properties", {}).items():
        yield from _walk_objects(child, f"{path}.{name}")
    for name, child in schema.get("definitions", {}).items():
        yield from _walk_objects(child, f"#{name}")
    if isinstance(schema.get("items"), dict):
        yield from _walk_objects(schema["items"], f"{path}[]")


def test_values_schema_closes_every_object() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    open_objects = {
        path
        for path, node in _walk_objects(schema, "")
        if node.get("additionalProperties") is not False
        and node.get("additionalProperties") != {"type": "string"}
    }
    assert open_objects == {
        ".tolerations[]",
        ".affinity",
        ".topologySpreadConstraints[]",
        ".egress.networkPolicy.endpoints[]",
        ".egress.networkPolicy.metricsFrom[]",
        ".console.tolerations[]",
        ".console.affinity",
    }
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert set(values) == set(schema["properties"])


def can_i(
    kube: Kube,
    service_account: str,
    verb: str,
    resource: str,
    namespace: str,
    subresource: str = "",
) -> bool:
    """``resource`` may be ``RESOURCE/NAME``, one object; a subresource is asked by its own
    argument (``RESOURCE/status`` would be the object named status)."""
    result = kube.kubectl(
        "auth", "can-i", verb, resource, f"--namespace={namespace}",
        *([f"--subresource={subresource}"] if subresource else []),
        f"--as=system:serviceaccount:{kube.namespace}:{service_account}", check=False,
    )  # fmt: skip
    return result.stdout.strip() == "yes"


def test_helm_install_creates_the_objects_with_least_privilege(
    kube: Kube, helm: str, other_namespace: str
) -> None:
    result = kube.helm(
        helm, "install", "agentrun", str(CHART), "--set", f"redis.enabled=true,{SECOND_RELEASE}"
    )
    assert "kubectl get agentruns -w" in result.stdout
    assert "kubectl describe agentrun booking" in result.stdout
    assert "append-only file on PersistentVolumeClaim agentrun-agentrun-operator-redis" in (
        result.stdout.replace("\n", " ")
    )
    # The notes' commands are meant to be pasted: the one that grants approving runs as printed.
    (grant,) = (line.split() for line in result.stdout.splitlines() if " rolebinding " in line)
    bound = kube.kubectl(
        *[other_namespace if word == "NAMESPACE" else word for word in grant[1:]],
        "--dry-run=server", "-o", "name",
    )  # fmt: skip
    assert bound.stdout.strip() == "rolebinding.rbac.authorization.k8s.io/alice-approves"

    listed = kube.kubectl(
        "get", "deployments,services,serviceaccounts,secrets,persistentvolumeclaims",
        "-l", "app.kubernetes.io/instance=agentrun", "-o", "json",
    )  # fmt: skip
    objects = json.loads(listed.stdout)["items"]
    names = sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objects)
    assert names == [
        "Deployment/agentrun-agentrun-operator",
        "Deployment/agentrun-agentrun-operator-redis",
        "PersistentVolumeClaim/agentrun-agentrun-operator-redis",
        "Secret/agentrun-agentrun-operator-store",
        "Service/agentrun-agentrun-operator-metrics",
        "Service/agentrun-agentrun-operator-redis",
        "ServiceAccount/agentrun-agentrun-operator",
    ]
    metrics = next(o for o in objects if o["metadata"]["name"].endswith("-metrics"))
    assert metrics["spec"]["ports"][0]["port"] == 9090

    sa = "agentrun-agentrun-operator"
    for verb, resource in [
        ("watch", "agentruns.agentrun.dev"),
        ("patch", "agentruns.agentrun.dev"),
        ("patch", "agentruns.agentrun.dev/status"),
        ("watch", "agents.agentrun.dev"),
        ("patch", "agents.agentrun.dev/status"),
        ("watch", "runquotas.agentrun.dev"),
        ("get", "secrets"),  # a declared agent's key, read by name at each request
        ("create", "events"),
        ("get", "namespaces"),
        ("watch", "customresourcedefinitions.apiextensions.k8s.io"),
    ]:
        assert can_i(kube, sa, verb, resource, other_namespace), (verb, resource)
    assert can_i(kube, sa, "patch", "runquotas.agentrun.dev", other_namespace, "status")
    for verb, resource in [
        ("delete", "agentruns.agentrun.dev"),
        ("create", "agentruns.agentrun.dev"),
        ("update", "agentruns.agentrun.dev"),
        ("update", "agentruns.agentrun.dev/finalizers"),
        ("create", "agents.agentrun.dev"),
        ("patch", "runquotas.agentrun.dev"),  # a quota is set on a namespace, never by the operator
        ("list", "secrets"),  # Secrets by name only: the operator cannot enumerate them
        ("watch", "secrets"),
        ("create", "pods"),
        ("list", "configmaps"),
        ("list", "namespaces"),
        ("patch", "namespaces"),
        ("patch", "events"),
    ]:
        assert not can_i(kube, sa, verb, resource, other_namespace), (verb, resource)


def test_namespaced_helm_install_grants_nothing_outside_its_namespace(
    kube: Kube, helm: str, other_namespace: str
) -> None:
    kube.helm(
        helm, "install", "scoped", str(CHART),
        "--set", f"rbac.clusterWide=false,store.url=redis://redis:6379/0,{SECOND_RELEASE}",
        "--set", "controllerName=agentrun.dev/scoped",
    )  # fmt: skip
    sa = "scoped-agentrun-operator"
    assert can_i(kube, sa, "watch", "agentruns.agentrun.dev", kube.namespace)
    assert can_i(kube, sa, "patch", "agentruns.agentrun.dev/status", kube.namespace)
    assert can_i(kube, sa, "get", f"namespaces/{kube.namespace}", kube.namespace)
    assert not can_i(kube, sa, "watch", "agentruns.agentrun.dev", other_namespace)
    assert not can_i(kube, sa, "get", f"namespaces/{other_namespace}", other_namespace)
    assert not can_i(kube, sa, "patch", "namespaces", kube.namespace)


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(key) == value for key, value in selector.items())


def test_operator_selectors_never_match_the_charts_redis(
    kube: Kube, helm: str, kube_version: str
) -> None:
    """The Deployment, the metrics Service and the PDB select the operator's pods alone, so no
    Redis pod answers for the metrics or counts towards the disruption budget."""
    manifests = render(kube, helm, kube_version, "--set", "redis.enabled=true")
    operator, redis = sorted(by_kind(manifests, "Deployment"), key=lambda d: d["metadata"]["name"])
    operator_pod = operator["spec"]["template"]["metadata"]["labels"]
    redis_pod = redis["spec"]["template"]["metadata"]["labels"]
    assert operator_pod["app.kubernetes.io/component"] == "operator"
    assert redis_pod["app.kubernetes.io/component"] == "redis"
    metrics = next(
        s for s in by_kind(manifests, "Service") if s["metadata"]["name"].endswith("-metrics")
    )
    (budget,) = by_kind(manifests, "PodDisruptionBudget")
    selectors = {
        "deployment": operator["spec"]["selector"]["matchLabels"],
        "metrics service": metrics["spec"]["selector"],
        "pod disruption budget": budget["spec"]["selector"]["matchLabels"],
    }
    for what, selector in selectors.items():
        assert _matches(selector, operator_pod), what
        assert not _matches(selector, redis_pod), f"the {what} selects the chart's Redis pod"
    assert budget["spec"] == {"maxUnavailable": 1, "selector": budget["spec"]["selector"]}
    affinity = operator["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    (preferred,) = affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["podAffinityTerm"]["labelSelector"]["matchLabels"] == selectors["deployment"]
    assert preferred["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"


def test_llm_keys_come_from_secrets_and_uids_from_the_platform(
    kube: Kube, helm: str, kube_version: str
) -> None:
    manifests = render(kube, helm, kube_version, *COMBINATIONS["llm-keys-from-secrets"])
    (deployment,) = by_kind(manifests, "Deployment")
    container = container_of(deployment)
    assert OPENAI_KEY in container["env"]
    assert container["envFrom"] == [{"secretRef": {"name": "llm-keys"}}]
    assert {"name": "keys", "mountPath": "/k", "readOnly": True} in container["volumeMounts"]
    pod = deployment["spec"]["template"]["spec"]
    assert {"name": "keys", "secret": {"secretName": "llm-files"}} in pod["volumes"]

    (deployment,) = by_kind(
        render(kube, helm, kube_version, *COMBINATIONS["uids-assigned-by-the-platform"]),
        "Deployment",
    )
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert "runAsUser" not in container_of(deployment)["securityContext"]


def test_tracing_points_the_sdk_at_the_collector_and_is_off_by_default(
    kube: Kube, helm: str, kube_version: str
) -> None:
    """The operator exports spans only when OTEL_EXPORTER_OTLP_ENDPOINT is set (the OpenTelemetry
    SDK's own variables), so the chart sets them all from the values or none of them."""
    (deployment,) = by_kind(
        render(kube, helm, kube_version, *COMBINATIONS["tracing"]), "Deployment"
    )
    otel = {e["name"]: e for e in container_of(deployment)["env"] if e["name"].startswith("OTEL_")}
    assert otel == {
        "OTEL_EXPORTER_OTLP_ENDPOINT": {
            "name": "OTEL_EXPORTER_OTLP_ENDPOINT",
            "value": "http://otel-collector.observability:4318",
        },
        "OTEL_SERVICE_NAME": {"name": "OTEL_SERVICE_NAME", "value": "agentrun-operator"},
        "OTEL_TRACES_SAMPLER": {"name": "OTEL_TRACES_SAMPLER", "value": "parentbased_traceidratio"},
        "OTEL_TRACES_SAMPLER_ARG": {"name": "OTEL_TRACES_SAMPLER_ARG", "value": "0.25"},
        "OTEL_EXPORTER_OTLP_HEADERS": {
            "name": "OTEL_EXPORTER_OTLP_HEADERS",
            "valueFrom": {"secretKeyRef": {"name": "otlp-headers", "key": "headers"}},
        },
    }
    (default,) = by_kind(render(kube, helm, kube_version), "Deployment")
    assert not [e for e in container_of(default)["env"] if e["name"].startswith("OTEL_")]


def test_the_limit_on_runs_a_replica_drives_reaches_the_operator(
    kube: Kube, helm: str, kube_version: str
) -> None:
    """``maxActiveRunsPerReplica`` is AGENTRUN_MAX_ACTIVE_RUNS; 0 (no limit) by default."""

    def limit(*values: str) -> object:
        env = operator_env(kube, helm, kube_version, *values)
        return env["AGENTRUN_MAX_ACTIVE_RUNS"]

    assert limit() == "0"
    assert limit("--set", "maxActiveRunsPerReplica=250") == "250"


def test_the_segment_form_reaches_the_operator(kube: Kube, helm: str, kube_version: str) -> None:
    """``segmentForm`` is AGENTRUN_SEGMENT_FORM: zstd by default, deflate or zlib-json for an
    upgrade from a release that reads only those."""

    def form(*values: str) -> object:
        env = operator_env(kube, helm, kube_version, *values)
        return env["AGENTRUN_SEGMENT_FORM"]

    assert form() == "zstd"
    assert form("--set", "segmentForm=deflate") == "deflate"
    assert form("--set", "segmentForm=zlib-json") == "zlib-json"


def test_settling_reaches_the_operator_on_by_default(
    kube: Kube, helm: str, kube_version: str
) -> None:
    """``settling.enabled`` is AGENTRUN_SETTLING: the operator settles the undecidable calls
    whose tools declare how unless told not to."""

    def settling(*values: str) -> object:
        return operator_env(kube, helm, kube_version, *values)["AGENTRUN_SETTLING"]

    assert settling() == "true"
    assert settling("--set", "settling.enabled=false") == "false"


def test_the_egress_policy_reaches_the_operator(kube: Kube, helm: str, kube_version: str) -> None:
    """``egress.allow`` and ``egress.clusterRanges`` are AGENTRUN_EGRESS_ALLOW and
    AGENTRUN_EGRESS_CLUSTER_RANGES: nothing allowed and every private range refused by default."""

    def env(*values: str) -> tuple[object, object]:
        found = operator_env(kube, helm, kube_version, *values)
        return found["AGENTRUN_EGRESS_ALLOW"], found["AGENTRUN_EGRESS_CLUSTER_RANGES"]

    private = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7"
    assert env() == ("", private)
    assert env(
        "--set-json", 'egress={"allow": ["http://vllm.models.svc:8000/v1", "10.96.40.0/24"], '
        '"clusterRanges": ["10.96.0.0/12", "10.244.0.0/16"]}',
    ) == ("http://vllm.models.svc:8000/v1,10.96.40.0/24", "10.96.0.0/12,10.244.0.0/16")  # fmt: skip


def test_the_network_policy_is_off_by_default_and_needs_the_api_server(
    kube: Kube, helm: str, kube_version: str
) -> None:
    assert not by_kind(render(kube, helm, kube_version), "NetworkPolicy")
    result = kube.helm(
        helm, "template", "agentrun", str(CHART), "--kube-version", kube_version,
        "--set", "egress.networkPolicy.enabled=true", check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "needs egress.networkPolicy.apiServer.cidrs" in result.stderr
    (policy,) = by_kind(
        render(kube, helm, kube_version, *COMBINATIONS["network-policy"]), "NetworkPolicy"
    )
    spec = policy["spec"]
    assert spec["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "operator"
    assert spec["ingress"] == [
        {
            "from": [{"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}],
            "ports": [{"port": 9090, "protocol": "TCP"}],
        }
    ]
    dns, api_server, redis, endpoints = spec["egress"]
    assert {port["port"] for port in dns["ports"]} == {53}
    assert api_server["to"] == [
        {"ipBlock": {"cidr": "10.96.0.1/32"}},
        {"ipBlock": {"cidr": "fd00::1/128"}},
    ]
    assert redis["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "redis"
    assert endpoints == {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"port": 443}]}


def test_accepting_unauthenticated_decisions_is_asked_for_by_name(
    kube: Kube, helm: str, kube_version: str
) -> None:
    """``accessControl.acceptUnauthenticatedDecisions`` is the operator's
    AGENTRUN_ACCEPT_UNAUTHENTICATED_DECISIONS: false unless a release says otherwise
    (tests/kube/test_kube_unauthenticated_decisions.py)."""

    def accepted(*values: str) -> object:
        env = operator_env(kube, helm, kube_version, *values)
        return env["AGENTRUN_ACCEPT_UNAUTHENTICATED_DECISIONS"]

    assert accepted() == "false"
    assert accepted("--set", "accessControl.acceptUnauthenticatedDecisions=true") == "true"


def test_a_kubernetes_without_the_v1_admission_policy_is_refused(kube: Kube, helm: str) -> None:
    """The decisions policy is admissionregistration.k8s.io/v1 (Kubernetes 1.30): on an older
    server nothing would authenticate decisions, so the chart does not install there."""
    result = kube.helm(
        helm, "template", "agentrun", str(CHART), "--kube-version", "v1.29.9", check=False
    )
    assert result.returncode != 0
    assert "chart requires kubeVersion: >=1.30.0-0" in result.stderr, result.stderr


def test_a_budget_with_both_bounds_is_refused(kube: Kube, helm: str, kube_version: str) -> None:
    result = kube.helm(
        helm, "template", "agentrun", str(CHART), "--kube-version", kube_version,
        "--set", "podDisruptionBudget.minAvailable=1", check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "set one of minAvailable and maxUnavailable" in result.stderr


def test_a_crd_applied_outside_helm_is_named_with_how_to_adopt_it(kube: Kube, helm: str) -> None:
    """The session's cluster holds the CRD applied by kubectl, as a cluster that installed chart
    0.1.0 (whose crds/ folder Helm does not own) does: the chart says how to hand it over."""
    result = kube.helm(
        helm, "install", "adopting", str(CHART), "--set", "store.url=redis://redis:6379/0",
        "--set", "accessControl.decisionPolicy=false,accessControl.userRoles=false",
        "--set", "accessControl.agentSecretsPolicy=false",
        "--set", "controllerName=agentrun.dev/adopting", check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert (
        "crds.enabled=true: CustomResourceDefinition agentruns.agentrun.dev already exists "
        "(applied outside Helm; for this release to manage it: kubectl annotate "
        "customresourcedefinition agentruns.agentrun.dev meta.helm.sh/release-name=adopting "
        f"meta.helm.sh/release-namespace={kube.namespace}"
    ) in result.stderr, result.stderr


def console_objects(manifests: list[Manifest]) -> dict[str, Manifest]:
    """The console's objects by ``Kind/name``: those labelled component console."""
    return {
        f"{m['kind']}/{m['metadata']['name']}": m
        for m in manifests
        if m["metadata"].get("labels", {}).get("app.kubernetes.io/component") == "console"
    }


def console_grants(manifests: list[Manifest]) -> list[tuple[str, str, str, str]]:
    """Every (namespace or "*", group, resource, verb) the console's Roles and ClusterRoles
    grant, sorted."""
    grants: set[tuple[str, str, str, str]] = set()
    for role in console_objects(manifests).values():
        if role["kind"] in ("Role", "ClusterRole"):
            scope = role["metadata"].get("namespace", "*")
            for rule in role["rules"]:
                assert set(rule) == {"apiGroups", "resources", "verbs"}, rule
                grants.update(
                    (scope, group, resource, verb)
                    for group in rule["apiGroups"]
                    for resource in rule["resources"]
                    for verb in rule["verbs"]
                )
    return sorted(grants)


LIST_AND_WATCH_RUNS = [
    ("*", "agentrun.dev", "agentruns", "list"),
    ("*", "agentrun.dev", "agentruns", "watch"),
]
IMPERSONATE = [("*", "", "groups", "impersonate"), ("*", "", "users", "impersonate")]


def test_the_console_is_off_by_default(kube: Kube, helm: str, kube_version: str) -> None:
    manifests = render(kube, helm, kube_version)
    assert console_objects(manifests) == {}
    assert not [m for m in manifests if "console" in m["metadata"]["name"]]


def test_the_console_watches_runs_and_does_the_rest_as_the_person(
    kube: Kube, helm: str, kube_version: str
) -> None:
    """Token sign-in: the console's own identity may list and watch AgentRuns and nothing else
    (no get, no patch, no Secrets): what a person sees and does is asked as them."""
    manifests = render(kube, helm, kube_version, "--set", "console.enabled=true")
    name = "agentrun-agentrun-operator-console"
    assert sorted(console_objects(manifests)) == [
        f"ClusterRole/{name}",
        f"ClusterRoleBinding/{name}",
        f"Deployment/{name}",
        f"Secret/{name}-session",
        f"Service/{name}",
        f"ServiceAccount/{name}",
    ]
    assert console_grants(manifests) == LIST_AND_WATCH_RUNS
    objects = console_objects(manifests)
    binding = objects[f"ClusterRoleBinding/{name}"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": name, "namespace": kube.namespace}
    ]

    deployment = objects[f"Deployment/{name}"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == name
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["image"].startswith("agentrun-operator:")
    assert container["command"] == ["tini", "--", "python", "-m", "agentrun.console"]
    assert container["args"] == ["--host=0.0.0.0", "--port=8080", "--auth=token"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http"}
    (operator,) = (d for d in by_kind(manifests, "Deployment") if d is not deployment)
    store = next(e for e in container_of(operator)["env"] if e["name"] == "AGENTRUN_STORE_URL")
    key_file = {
        "name": "AGENTRUN_CONSOLE_SESSION_KEY_FILE",
        "value": "/etc/agentrun/console-session/key",
    }
    assert container["env"] == [store, key_file]
    (mount,) = (m for m in container["volumeMounts"] if m["name"] == "session-key")
    assert mount["mountPath"] == "/etc/agentrun/console-session"
    (volume,) = (v for v in pod["volumes"] if v["name"] == "session-key")
    assert volume["secret"]["secretName"] == f"{name}-session"
    key = objects[f"Secret/{name}-session"]["data"]["key"]
    assert len(base64.b64decode(key)) == 48

    service = objects[f"Service/{name}"]
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}
    ]
    assert _matches(
        service["spec"]["selector"], deployment["spec"]["template"]["metadata"]["labels"]
    )
    operator_pod = operator["spec"]["template"]["metadata"]["labels"]
    assert not _matches(service["spec"]["selector"], operator_pod)
    assert not _matches(deployment["spec"]["selector"]["matchLabels"], operator_pod)
    assert not by_kind(manifests, "Ingress")


def test_the_console_options_reach_its_command_line(
    kube: Kube, helm: str, kube_version: str
) -> None:
    def args(*values: str) -> list[str]:
        manifests = render(kube, helm, kube_version, "--set", "console.enabled=true", *values)
        (deployment,) = (
            d for d in by_kind(manifests, "Deployment") if "console" in d["metadata"]["name"]
        )
        return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])

    assert args("--set", "console.readOnly=true") == [
        "--host=0.0.0.0", "--port=8080", "--auth=token", "--read-only",
    ]  # fmt: skip
    assert args("--set", "console.secureCookies=true,console.auth.mode=proxy") == [
        "--host=0.0.0.0", "--port=8080", "--auth=proxy", "--user-header=X-Forwarded-User",
        "--groups-header=X-Forwarded-Groups", "--token-header=X-Forwarded-Access-Token",
        "--secure-cookies",
    ]  # fmt: skip
    proxied = "console.auth.mode=proxy,console.auth.proxy.userHeader=Remote-User"
    assert "--user-header=Remote-User" in args("--set", proxied)
    # A namespaced install: the console watches the one namespace the operator watches.
    assert args("--set", "rbac.clusterWide=false") == [
        "--host=0.0.0.0", "--port=8080", "--auth=token", f"--namespace={kube.namespace}",
    ]  # fmt: skip


def test_the_console_impersonates_only_behind_a_proxy_that_asks_for_it(
    kube: Kube, helm: str, kube_version: str
) -> None:
    def grants(*values: str) -> list[tuple[str, str, str, str]]:
        return console_grants(
            render(kube, helm, kube_version, "--set", "console.enabled=true", *values)
        )

    assert grants("--set", "console.auth.proxy.impersonate=true") == LIST_AND_WATCH_RUNS
    assert grants("--set", "console.auth.mode=proxy") == sorted(LIST_AND_WATCH_RUNS + IMPERSONATE)
    assert grants("--set", "console.auth.mode=proxy,console.auth.proxy.impersonate=false") == (
        LIST_AND_WATCH_RUNS
    )
    # Namespaced: the runs in the watched namespace only; users and groups are cluster-scoped.
    namespaced = [(kube.namespace, *grant[1:]) for grant in LIST_AND_WATCH_RUNS]
    assert grants("--set", "rbac.clusterWide=false,console.auth.mode=proxy") == sorted(
        namespaced + IMPERSONATE
    )
    assert grants("--set", "rbac.clusterWide=false") == namespaced
    assert grants("--set", "rbac.create=false,console.auth.mode=proxy") == []


def test_the_oauth2_proxy_sidecar_is_the_only_way_in(
    kube: Kube, helm: str, kube_version: str
) -> None:
    manifests = render(kube, helm, kube_version, *COMBINATIONS["console-oauth2-proxy"])
    objects = console_objects(manifests)
    name = "agentrun-agentrun-operator-console"
    assert f"Secret/{name}-session" not in objects  # console.sessionKey.existingSecret
    pod = objects[f"Deployment/{name}"]["spec"]["template"]["spec"]
    console, proxy = pod["containers"]
    assert console["args"] == [
        "--host=127.0.0.1", "--port=8080", "--auth=proxy", "--user-header=X-Forwarded-User",
        "--groups-header=X-Forwarded-Groups", "--token-header=X-Forwarded-Access-Token",
    ]  # fmt: skip
    assert "ports" not in console  # nothing to reach from outside the pod
    healthz = "urlopen('http://127.0.0.1:8080/healthz'"
    for probe in ("livenessProbe", "readinessProbe"):
        assert console[probe]["exec"]["command"][:2] == ["python", "-c"]
        assert healthz in console[probe]["exec"]["command"][2]
        assert proxy[probe]["httpGet"] == {"path": "/ping", "port": "http"}
    assert proxy["image"].startswith("quay.io/oauth2-proxy/oauth2-proxy:")
    assert proxy["args"] == [
        "--http-address=0.0.0.0:4180",
        "--upstream=http://127.0.0.1:8080",
        *OAUTH2_PROXY_ARGS,
    ]
    assert proxy["envFrom"] == [{"secretRef": {"name": "console-oauth2"}}]
    assert proxy["ports"] == [{"name": "http", "containerPort": 4180, "protocol": "TCP"}]
    assert proxy["securityContext"]["readOnlyRootFilesystem"] is True
    assert proxy["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    (volume,) = (v for v in pod["volumes"] if v["name"] == "session-key")
    assert volume["secret"]["secretName"] == "console-key"
    service = objects[f"Service/{name}"]["spec"]
    assert service["type"] == "NodePort"
    assert service["ports"][0]["targetPort"] == "http"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            "console.enabled=true,console.oauth2Proxy.enabled=true",
            "console.oauth2Proxy.enabled needs console.auth.mode=proxy (it is token)",
        ),
        (
            "console.enabled=true,rbac.clusterWide=false,watchNamespaces={a,b}",
            "the console watches one namespace",
        ),
    ],
    ids=["oauth2-proxy-with-tokens", "two-namespaces"],
)
def test_console_values_it_cannot_honour_are_refused(
    kube: Kube, helm: str, kube_version: str, values: str, message: str
) -> None:
    result = kube.helm(
        helm, "template", "agentrun", str(CHART), "--kube-version", kube_version,
        "--set", values, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert message in result.stderr, result.stderr


def test_helm_install_gives_the_console_a_key_that_upgrades_keep(kube: Kube, helm: str) -> None:
    """A real install and upgrade: the session key Secret is made once and read back (lookup), so
    a rollout signs nobody out; and the API server answers for the console's ServiceAccount as
    the rules say."""
    release = "console"
    kube.helm(
        helm, "install", release, str(CHART),
        "--set", f"store.url=redis://redis:6379/0,{SECOND_RELEASE},{CONSOLE_PROXY}",
        "--set", "controllerName=agentrun.dev/console-test",
    )  # fmt: skip
    secret = f"{release}-agentrun-operator-console-session"

    def key() -> str:
        found = kube.kubectl("get", "secret", secret, "-o", "jsonpath={.data.key}").stdout
        return base64.b64decode(found).decode()

    first = key()
    assert len(first) == 48
    kube.helm(helm, "upgrade", release, str(CHART), "--reuse-values")
    assert key() == first

    sa = f"{release}-agentrun-operator-console"
    for verb, resource in [
        ("list", "agentruns.agentrun.dev"),
        ("watch", "agentruns.agentrun.dev"),
        ("impersonate", "users"),
        ("impersonate", "groups"),
    ]:
        assert can_i(kube, sa, verb, resource, kube.namespace), (verb, resource)
    for verb, resource in [
        ("get", "agentruns.agentrun.dev"),
        ("patch", "agentruns.agentrun.dev"),
        ("delete", "agentruns.agentrun.dev"),
        ("list", "agents.agentrun.dev"),
        ("get", "secrets"),
        ("list", "secrets"),
        ("impersonate", "serviceaccounts"),
    ]:
        assert not can_i(kube, sa, verb, resource, kube.namespace), (verb, resource)
