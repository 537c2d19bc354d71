"""The real cluster the end-to-end tests run on, and the operator on it.

The suite runs on whichever cluster a script describes: ``AGENTRUN_E2E_CLUSTER`` names it, by
default hack/cluster.sh (the single-node cluster this machine runs itself); hack/kind-cluster.sh
describes a kind cluster (``make e2e-kind``). Each answers ``up``, ``down``, ``status``, ``env``
and ``kill-container ID``; what differs between clusters stays in the scripts: how images reach
the node (containerd import, ``kind load``), how a container is killed from the node, which
folder of this machine the node sees (``SHARED_DIR``), which firewall chain keeps pods on this
machine. The tests see only the kubeconfig, the node's name, the images' names
(``AGENTRUN_E2E_OPERATOR_IMAGE``, ``AGENTRUN_E2E_REDIS_IMAGE``, read by the scripts) and those
settings.

Unlike tests/support/kube.py's control plane (objects stored, no pod ever runs), this is a whole
cluster on this machine: etcd, kube-apiserver, controller-manager, scheduler, containerd, kubelet,
kube-proxy and CoreDNS, with the images hack/images.sh makes from the repository (no registry).
The operator is installed as a user would, with ``helm install`` of charts/agentrun-operator, and
runs as real pods of the project's image; the tests kill those pods as a node, a drain or a
person would.

The scripts build what is missing first (a fresh machine: ~15 minutes, once); a failure shows the
script's output. The cluster's settings (ranges, the egress chain, the images) come from the
script's ``env``, so the tests and the script cannot disagree about them.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from tests.support.kube import REPO, Kube, helm_binary, kubectl_binary

CLUSTER_SCRIPT = Path(os.environ.get("AGENTRUN_E2E_CLUSTER") or REPO / "hack" / "cluster.sh")
CHART = REPO / "charts" / "agentrun-operator"
VALUES = REPO / "hack" / "cluster-values.yaml"
DEMO_DIR_POST_RENDERER = REPO / "hack" / "mount_demo_dir.py"
BUILD_AND_START_TIMEOUT_S = 3600.0
SERVICES_DB = "demo-services.db"
T = TypeVar("T")


def _cluster_sh(*command: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(CLUSTER_SCRIPT), *command],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=timeout,
    )


def settings() -> dict[str, str]:
    """The cluster script's ``env``: KUBECONFIG_FILE, NODE_NAME, API_SERVICE_IP, EGRESS_CHAIN,
    OPERATOR_IMAGE, REDIS_IMAGE, SHARED_DIR, ..."""
    result = _cluster_sh("env", timeout=60)
    if result.returncode != 0:
        pytest.fail(f"{CLUSTER_SCRIPT} env failed:\n{result.stderr}", pytrace=False)
    return dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)


def is_up() -> bool:
    return _cluster_sh("status", timeout=60).returncode == 0


def bring_up() -> float:
    """The cluster script's ``up`` (building what is missing first); returns its seconds."""
    started = time.monotonic()
    result = _cluster_sh("up", timeout=BUILD_AND_START_TIMEOUT_S)
    if result.returncode != 0:
        pytest.fail(
            f"{CLUSTER_SCRIPT} up exited {result.returncode}:\n{result.stdout}{result.stderr}",
            pytrace=False,
        )
    return time.monotonic() - started


def take_down() -> None:
    result = _cluster_sh("down", timeout=300)
    if result.returncode != 0:
        pytest.fail(f"{CLUSTER_SCRIPT} down failed:\n{result.stdout}{result.stderr}", pytrace=False)


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


def wait_for(what: str, timeout: float, probe: Callable[[], T | None]) -> T:
    """Polls ``probe`` every half second until it answers something true; fails the test with
    ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.5)
    pytest.fail(f"{what}: not within {timeout:.0f}s", pytrace=False)


def lease(run: dict[str, Any]) -> dict[str, Any]:
    return dict(run.get("status", {}).get("lease") or {})


def condition(run: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The run's condition of type ``kind`` (Succeeded, Indeterminate, ...), if it has one."""
    for entry in run.get("status", {}).get("conditions", []):
        if entry["type"] == kind:
            return dict(entry)
    return None


def succeeded(run: dict[str, Any]) -> str | None:
    found = condition(run, "Succeeded")
    return None if found is None else str(found["status"])


@dataclass(frozen=True)
class OperatorRelease:
    """One ``helm install`` of the chart, with the demo's services in ``demo_dir`` on the node;
    ``helm_args`` are the chart-independent arguments it was installed with (values files and
    the post-renderer), so an upgrade can pass them again."""

    kube: Kube
    name: str
    demo_dir: Path
    helm_args: tuple[str, ...] = ()
    redis_volume: str = ""

    def operator_pods(self) -> list[str]:
        """The operator's pods that are running and not being deleted (the chart's Redis and
        console pods carry the same instance label, so they are told apart by their component)."""
        listing = self.kube.kubectl(
            "get",
            "pods",
            "-l",
            f"app.kubernetes.io/instance={self.name},app.kubernetes.io/component=operator",
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
        container_id = container["containerID"].split("://", 1)[-1]
        result = _cluster_sh("kill-container", container_id, timeout=60)
        if result.returncode != 0:
            pytest.fail(
                f"{CLUSTER_SCRIPT} kill-container {container_id} failed:\n{result.stderr}",
                pytrace=False,
            )

    def run(self, name: str) -> dict[str, Any]:
        result = self.kube.kubectl("get", "agentrun", name, "-o", "json")
        document: dict[str, Any] = json.loads(result.stdout)
        return document

    def deployment(self) -> str:
        """The name of the operator's Deployment."""
        listing = self.kube.kubectl(
            "get", "deployments", "-l", f"app.kubernetes.io/instance={self.name}", "-o", "json"
        )
        names = [
            str(d["metadata"]["name"])
            for d in json.loads(listing.stdout)["items"]
            if d["metadata"].get("labels", {}).get("app.kubernetes.io/component") != "redis"
        ]
        assert len(names) == 1, f"release {self.name} has operator Deployments {names}"
        return names[0]

    def count(self, table: str) -> int:
        """Rows in the demo services' file (bookings, messages). Read only once a pod has made
        it: root creating it would own it and the pods could not write it (SQLite gives the
        files it adds beside an existing database that database's owner)."""
        path = self.demo_dir / SERVICES_DB
        if not path.exists():
            return 0
        with sqlite3.connect(path, timeout=10) as connection:
            row = connection.execute(f"SELECT count(*) FROM {table}").fetchone()
            return int(row[0])

    def booking_requests(self) -> int:
        """Every request the airline got, repeats under one idempotency key included."""
        path = self.demo_dir / SERVICES_DB
        if not path.exists():
            return 0
        with sqlite3.connect(path, timeout=10) as connection:
            row = connection.execute("SELECT coalesce(sum(requests), 0) FROM bookings").fetchone()
            return int(row[0])

    def redis_keys(self, pattern: str) -> list[str]:
        """The keys of the chart's Redis matching ``pattern``, read with redis-cli in its pod."""
        result = self.kube.kubectl(
            "exec",
            f"deploy/{self.deployment()}-redis",
            "--",
            "redis-cli",
            "--scan",
            "--pattern",
            pattern,
        )
        return sorted(line for line in result.stdout.splitlines() if line)

    def uninstall(self) -> None:
        """Runs are deleted while the operator still runs (it removes their finalizers), then
        the release and the namespace."""
        self.kube.kubectl("delete", "agentruns", "--all", "--timeout=180s", check=False)
        self.kube.helm(helm_binary(), "uninstall", self.name, "--wait", "--timeout=120s")
        self.kube.kubectl("delete", "namespace", self.kube.namespace, "--wait=false")
        self.kube.kubectl("delete", "pv", self.redis_volume, "--ignore-not-found", "--wait=false")


CRDS = ("agentruns.agentrun.dev", "agents.agentrun.dev", "runquotas.agentrun.dev")
CLUSTER_WIDE_OFF: dict[str, Any] = {"crds": {"enabled": False}}
"""What every e2e release sets unless its test says otherwise: the CRD is the session's (applied
once, ``apply_crd``), not any release's, so that a release's uninstall keeping it (``crds.keep``)
does not leave it owned by a release the next module's install would collide with."""


def apply_crd(kube: Kube) -> None:
    """The CRDs as this checkout has them, owned by no release."""
    for name in CRDS:
        path = REPO / "crds" / f"{name}.yaml"
        kube.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))


def adopt_crd(kube: Kube, release: str) -> None:
    """Hand the CRDs to ``release`` in ``kube``'s namespace (the chart's check says how), for a
    test of the chart's CRD policy (``crds.enabled=true``)."""
    kube.kubectl(
        "annotate", "--overwrite", "crd", *CRDS,
        f"meta.helm.sh/release-name={release}", f"meta.helm.sh/release-namespace={kube.namespace}",
    )  # fmt: skip
    kube.kubectl("label", "--overwrite", "crd", *CRDS, "app.kubernetes.io/managed-by=Helm")


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def install_operator(
    kube: Kube,
    release: str,
    demo_dir: Path,
    env: dict[str, str] | None = None,
    values: dict[str, Any] | None = None,
) -> OperatorRelease:
    """``helm install`` with hack/cluster-values.yaml, the cluster's images (``images``), ``env``
    added to (or replacing entries of) its extraEnv, ``values`` on top, and ``demo_dir`` (made
    here, writable by the pods' user) mounted as the demo services' folder; returns once every
    pod is ready."""
    result = try_install_operator(kube, release, demo_dir, env, values)
    if isinstance(result, str):
        pytest.fail(result, pytrace=False)
    return result


def try_install_operator(
    kube: Kube,
    release: str,
    demo_dir: Path,
    env: dict[str, str] | None = None,
    values: dict[str, Any] | None = None,
) -> OperatorRelease | str:
    """``install_operator``, answering helm's refusal (its output) instead of failing; a failed
    install leaves nothing behind (``--atomic``)."""
    demo_dir.mkdir(parents=True, exist_ok=True)
    demo_dir.chmod(0o777)  # the pods run as uid 10001
    volume = redis_volume(kube, release, demo_dir.parent / f"{release}-redis-data")
    base = yaml.safe_load(VALUES.read_text())["extraEnv"]
    merged = {entry["name"]: entry["value"] for entry in base} | (env or {})
    overrides = demo_dir.parent / f"{release}-values.yaml"
    overrides.write_text(
        yaml.safe_dump(
            _merged(
                {"extraEnv": [{"name": k, "value": v} for k, v in merged.items()], **images()},
                _merged(CLUSTER_WIDE_OFF, values or {}),
            )
        )
    )
    args = (
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
    )
    result = kube.helm(
        helm_binary(), "install", release, str(CHART), *args, "--atomic", "--timeout=150s",
        check=False,
    )  # fmt: skip
    if result.returncode != 0:
        kube.kubectl("delete", "pv", volume, "--ignore-not-found", "--wait=false")
        return f"helm install {release} exited {result.returncode}:\n{result.stderr}{result.stdout}"
    return OperatorRelease(kube, release, demo_dir, args, volume)


def images() -> dict[str, Any]:
    """The chart's values naming the operator's and Redis's images the cluster script loaded
    onto the node (its OPERATOR_IMAGE and REDIS_IMAGE)."""
    named = settings()

    def image(name: str) -> dict[str, str]:
        repository, _, tag = name.rpartition(":")
        if not repository or "/" in tag:
            pytest.fail(f"image {name!r} has no tag: name it repository:tag", pytrace=False)
        return {"repository": repository, "tag": tag}

    return {
        "image": image(named["OPERATOR_IMAGE"]),
        "redis": {"image": image(named["REDIS_IMAGE"])},
    }


def redis_volume(kube: Kube, release: str, folder: Path) -> str:
    """A PersistentVolume for the chart's Redis: a folder of the node (the cluster has no
    storage provisioner; a PVC without a class binds a PV without one). Its records survive the
    Redis pod being evicted or deleted, as on a real volume."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o777)  # Redis runs as uid 999
    name = f"{kube.namespace}-{release}-redis"[:63].strip("-")
    volume = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {"agentrun.dev/e2e": "redis"}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "hostPath": {"path": str(folder), "type": "Directory"},
        },
    }
    kube.kubectl("apply", "-f", "-", stdin=json.dumps(volume))
    return name
