"""The Helm chart as the tests install it: its folder, a cluster of a test's own, and the
credentials of the ServiceAccount the chart creates.

The tests that let an operator watch every namespace, or that install and uninstall the CRD,
need a control plane nobody else's namespaces or CRD live on: ``private_cluster`` starts one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tests.support.kube import (
    REPO,
    ControlPlane,
    Kube,
    helm_binary,
    kubectl_binary,
    start_control_plane,
)

CHART = REPO / "charts" / "agentrun-operator"
CRD = REPO / "crds" / "agentruns.agentrun.dev.yaml"
AGENT_CRD = REPO / "crds" / "agents.agentrun.dev.yaml"
QUOTA_CRD = REPO / "crds" / "runquotas.agentrun.dev.yaml"
ACCESS_CONTROL = (
    "templates/decision-policy.yaml",
    "templates/agent-secrets-policy.yaml",
    "templates/user-roles.yaml",
)
"""The chart's cluster-wide objects besides the CRDs."""


@contextmanager
def private_cluster(
    workdir: Path, namespace: str, apiserver_flags: Sequence[str] = ()
) -> Iterator[Kube]:
    """A control plane of its own (kube-apiserver given ``apiserver_flags`` besides its own),
    and a view of it in ``namespace`` (created)."""
    plane = start_control_plane(workdir, apiserver_flags)
    try:
        kube = Kube(plane, namespace, kubectl_binary())
        kube.kubectl("create", "namespace", namespace)
        yield kube
    finally:
        plane.stop()


def service_account_kubeconfig(kube: Kube, service_account: str) -> Path:
    """A kubeconfig holding a token of ``service_account`` (a TokenRequest, as the kubelet makes
    for a pod), so a process outside the cluster acts exactly as the chart's pods would."""
    token = kube.kubectl("create", "token", service_account, "--duration=2h").stdout.strip()
    plane = kube.control_plane
    assert isinstance(plane, ControlPlane), "a token kubeconfig is made for the envtest plane"
    return plane.kubeconfig_with_token(f"{kube.namespace}-{service_account}", token, kube.namespace)


def install_cluster_objects(kube: Kube) -> None:
    """What the chart installs cluster-wide: the CRDs (Established), the decision policy and the
    user roles, as ``helm template`` renders them."""
    kube.kubectl(
        "apply", "--server-side", "-f", str(CRD), "-f", str(AGENT_CRD), "-f", str(QUOTA_CRD)
    )
    kube.kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        "crd/agentruns.agentrun.dev",
        "crd/agents.agentrun.dev",
        "crd/runquotas.agentrun.dev",
    )
    only = [arg for template in ACCESS_CONTROL for arg in ("--show-only", template)]
    rendered = kube.helm(helm_binary(), "template", "agentrun", str(CHART), *only).stdout
    kube.kubectl("apply", "--server-side", "-f", "-", stdin=rendered)


def decision_policy_enforced(kube: Kube) -> bool:
    """Whether the API server refuses a decision in somebody else's name yet: it loads a new
    policy within a second or so of its creation, and lets everything through until then."""
    spoofed = {
        "apiVersion": "agentrun.dev/v1alpha1",
        "kind": "AgentRun",
        "metadata": {"name": "policy-probe"},
        "spec": {
            "agent": "probe",
            "approvals": [{"requestId": "r", "decision": "approve", "by": "somebody-else"}],
        },
    }
    probe = kube.kubectl(
        "create", "--dry-run=server", "-f", "-", stdin=json.dumps(spoofed), check=False
    )
    return "by must be the user who appends the decision" in probe.stderr
