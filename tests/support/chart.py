"""The Helm chart as the tests install it: its folder, a cluster of a test's own, and the
credentials of the ServiceAccount the chart creates.

The tests that let an operator watch every namespace, or that install and uninstall the CRD,
need a control plane nobody else's namespaces or CRD live on: ``private_cluster`` starts one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.kube import REPO, ControlPlane, Kube, kubectl_binary, start_control_plane

CHART = REPO / "charts" / "agentrun-operator"


@contextmanager
def private_cluster(workdir: Path, namespace: str) -> Iterator[Kube]:
    """A control plane of its own, and a view of it in ``namespace`` (created)."""
    plane = start_control_plane(workdir)
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
