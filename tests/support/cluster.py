"""hack/cluster.sh's real single-node cluster for the end-to-end tests, and the operator on it.

Unlike tests/support/kube.py's control plane (objects stored, no pod ever runs), this is a whole
cluster on this machine: etcd, kube-apiserver, controller-manager, scheduler, containerd, kubelet,
kube-proxy and CoreDNS, with the images hack/images.sh makes from the repository (no registry).
The operator is installed as a user would, with ``helm install`` of charts/agentrun-operator, and
runs as real pods of the project's image; the tests kill those pods as a node, a drain or a
person would.

The scripts build what is missing first (a fresh machine: ~15 minutes, once); a failure shows the
script's output. The cluster's settings (ranges, the egress chain) come from ``hack/cluster.sh
env``, so the tests and the script cannot disagree about them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.kube import REPO, Kube, helm_binary, kubectl_binary

CLUSTER_SH = REPO / "hack" / "cluster.sh"
CHART = REPO / "charts" / "agentrun-operator"
VALUES = REPO / "hack" / "cluster-values.yaml"
DEMO_DIR_POST_RENDERER = REPO / "hack" / "mount_demo_dir.py"
BUILD_AND_START_TIMEOUT_S = 3600.0


def _cluster_sh(command: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(CLUSTER_SH), command],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
    )


def settings() -> dict[str, str]:
    """``hack/cluster.sh env``: CLUSTER_DIR, KUBECONFIG_FILE, POD_CIDR, EGRESS_CHAIN, ..."""
    result = _cluster_sh("env", 60)
    if result.returncode != 0:
        pytest.fail(f"hack/cluster.sh env failed:\n{result.stderr}", pytrace=False)
    return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)


def is_up() -> bool:
    return _cluster_sh("status", 60).returncode == 0


def bring_up() -> float:
    """``hack/cluster.sh up`` (building what is missing first); returns its seconds."""
    started = time.monotonic()
    result = _cluster_sh("up", BUILD_AND_START_TIMEOUT_S)
    if result.returncode != 0:
        pytest.fail(
            f"hack/cluster.sh up exited {result.returncode}:\n{result.stdout}{result.stderr}",
            pytrace=False,
        )
    return time.monotonic() - started


def take_down() -> None:
    result = _cluster_sh("down", 300)
    if result.returncode != 0:
        pytest.fail(f"hack/cluster.sh down failed:\n{result.stdout}{result.stderr}", pytrace=False)


@dataclass(frozen=True)
class NodeCluster:
    """The running cluster, as kubectl and helm see it (helm's state kept in ``helm_home``)."""

    kubeconfig: Path
    helm_home: Path
    up_seconds: float

    def env(self, kubeconfig: Path | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env["KUBECONFIG"] = str(kubeconfig or self.kubeconfig)
        for kind in ("CACHE", "CONFIG", "DATA"):
            env[f"HELM_{kind}_HOME"] = str(self.helm_home / kind.lower())
        return env

    def kubeconfig_as(self, user: str, namespace: str) -> Path:
        """This cluster's kubeconfig with every request made as ``user`` (impersonation, as
        ``kubectl --as`` does), in ``namespace``."""
        config = yaml.safe_load(self.kubeconfig.read_text())
        for entry in config["users"]:
            entry["user"]["as"] = user
        for entry in config["contexts"]:
            entry["context"]["namespace"] = namespace
        path = self.helm_home.parent / f"kubeconfig-{user}-{namespace}"
        path.write_text(yaml.safe_dump(config))
        return path

    def namespace(self, name: str) -> Kube:
        """A new namespace and kubectl/helm bound to it."""
        kube = Kube(self, name, kubectl_binary())
        kube.kubectl("create", "namespace", name)
        return kube


@dataclass(frozen=True)
class OperatorRelease:
    """One ``helm install`` of the chart, with the demo's services in ``demo_dir`` on the node."""

    kube: Kube
    name: str
    demo_dir: Path

    def operator_pods(self) -> list[str]:
        """The operator's pods that are running and not being deleted (the chart's Redis pod
        carries the same selector labels, so it is told apart by its component label)."""
        listing = self.kube.kubectl(
            "get",
            "pods",
            "-l",
            f"app.kubernetes.io/instance={self.name},app.kubernetes.io/component!=redis",
            "-o",
            "json",
        )
        return [
            pod["metadata"]["name"]
            for pod in json.loads(listing.stdout)["items"]
            if pod["status"].get("phase") == "Running"
            and "deletionTimestamp" not in pod["metadata"]
        ]

    def pod_of(self, holder: str) -> str | None:
        """The pod a lease holder runs in: its worker id starts with the pod's name."""
        matches = [pod for pod in self.operator_pods() if holder.startswith(f"{pod}-")]
        return matches[0] if matches else None

    def sigkill(self, pod: str) -> None:
        """SIGKILL of the pod's operator process from the node, as the kernel's OOM killer or a
        lost node would end it: no handler runs and nothing is handed back."""
        pod_status = json.loads(self.kube.kubectl("get", "pod", pod, "-o", "json").stdout)
        (container,) = [
            c for c in pod_status["status"]["containerStatuses"] if c["name"] == "operator"
        ]
        node = settings()
        inspect = subprocess.run(
            [
                str(Path(node["TOOLS_DIR"]) / "crictl"),
                "--runtime-endpoint",
                f"unix://{node['CONTAINERD_SOCK']}",
                "inspect",
                container["containerID"].removeprefix("containerd://"),
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        os.kill(int(json.loads(inspect.stdout)["info"]["pid"]), signal.SIGKILL)

    def run(self, name: str) -> dict[str, Any]:
        result = self.kube.kubectl("get", "agentrun", name, "-o", "json")
        document: dict[str, Any] = json.loads(result.stdout)
        return document

    def uninstall(self) -> None:
        """Runs are deleted while the operator still runs (it removes their finalizers), then
        the release and the namespace."""
        self.kube.kubectl("delete", "agentruns", "--all", "--timeout=180s", check=False)
        self.kube.helm(helm_binary(), "uninstall", self.name, "--wait", "--timeout=120s")
        self.kube.kubectl("delete", "namespace", self.kube.namespace, "--wait=false")


def install_operator(
    kube: Kube, release: str, demo_dir: Path, env: dict[str, str] | None = None
) -> OperatorRelease:
    """``helm install`` with hack/cluster-values.yaml, ``env`` added to (or replacing entries of)
    its extraEnv, and ``demo_dir`` (made here, writable by the pods' user) mounted as the demo
    services' folder; returns once every pod is ready."""
    demo_dir.mkdir(parents=True, exist_ok=True)
    demo_dir.chmod(0o777)  # the pods run as uid 10001
    base = yaml.safe_load(VALUES.read_text())["extraEnv"]
    merged = {entry["name"]: entry["value"] for entry in base} | (env or {})
    overrides = demo_dir.parent / f"{release}-values.yaml"
    overrides.write_text(
        yaml.safe_dump({"extraEnv": [{"name": k, "value": v} for k, v in merged.items()]})
    )
    kube.helm(
        helm_binary(),
        "install",
        release,
        str(CHART),
        "-f",
        str(VALUES),
        "-f",
        str(overrides),
        "--post-renderer",
        sys.executable,
        "--post-renderer-args",
        str(DEMO_DIR_POST_RENDERER),
        "--post-renderer-args",
        str(demo_dir),
        "--wait",
        "--timeout=100s",
    )
    return OperatorRelease(kube, release, demo_dir)
