#!/usr/bin/env bash
# The end-to-end suite (tests/e2e) on a kind cluster: the same tests `make e2e` runs on the local
# single-node cluster, told by AGENTRUN_E2E_CLUSTER to use hack/kind-cluster.sh, which creates the
# kind cluster (or reuses the running one), loads the images with `kind load docker-image` and
# answers the suite's questions (kubeconfig, node name, how to kill a container from the node).
# Arguments go to pytest (a subset: -k takeover). The tests' folders live under the folder the
# kind node mounts (--basetemp), where the demo's SQLite file and Redis's volume must be. The
# suite takes the cluster down at the end unless it was already up (`hack/kind-cluster.sh down`).
set -euo pipefail
cd "$(dirname "$0")/.."
shared="$(bash hack/kind-cluster.sh env | sed -n 's/^SHARED_DIR=//p')"
export AGENTRUN_E2E_CLUSTER=hack/kind-cluster.sh
exec "${VENV:-.venv}/bin/python" -m pytest tests/e2e -m e2e --basetemp="$shared/pytest" "$@"
