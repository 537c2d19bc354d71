"""Helm post-renderer: mounts a folder of the node as the demo's services folder in the operator.

``helm install --post-renderer .venv/bin/python --post-renderer-args hack/mount_demo_dir.py
--post-renderer-args NODE_FOLDER`` reads the rendered manifests on stdin and adds, to every
Deployment with a container named ``operator``, a hostPath volume of NODE_FOLDER mounted at
/var/lib/agentrun-demo (hack/cluster-values.yaml points AGENTRUN_DEMO_DIR there).

Why a post-renderer: the demo's stand-in airline and SMS gateway are one SQLite file that every
replica must share to show that a takeover books once, and the chart has no value for extra
volumes (nor should a user's install need one for the demo). On the single-node cluster of
hack/cluster.sh a hostPath is shared by every replica; SQLite's locking works across processes
on one kernel.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml

MOUNT_PATH = "/var/lib/agentrun-demo"


def mount(document: dict[str, Any], node_folder: str) -> dict[str, Any]:
    if document.get("kind") != "Deployment":
        return document
    pod = document["spec"]["template"]["spec"]
    operators = [c for c in pod["containers"] if c["name"] == "operator"]
    if not operators:
        return document
    volume = {"name": "demo-services", "hostPath": {"path": node_folder, "type": "Directory"}}
    pod.setdefault("volumes", []).append(volume)
    for container in operators:
        container.setdefault("volumeMounts", []).append(
            {"name": "demo-services", "mountPath": MOUNT_PATH}
        )
    return document


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: mount_demo_dir.py NODE_FOLDER < manifests", file=sys.stderr)
        return 2
    documents = [d for d in yaml.safe_load_all(sys.stdin) if d]
    yaml.safe_dump_all([mount(d, sys.argv[1]) for d in documents], sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
