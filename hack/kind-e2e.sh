#!/usr/bin/env bash
# End to end on a real cluster, for a machine with Docker and kind: build the operator image,
# install the chart with its small Redis, run examples/booking.yaml, delete the pod holding the
# run's lease while it runs, and check that another replica carries it to Succeeded.
#
# Not part of CI: the CI machines run no Docker engine. There the chart, the CRD and the
# Dockerfile are checked against a real kube-apiserver and by hadolint instead (tests/kube).
#
#   hack/kind-e2e.sh                 creates cluster agentrun-e2e and deletes it at the end
#   KEEP_CLUSTER=1 hack/kind-e2e.sh  keeps it for a look around (kind delete cluster --name ...)
set -euo pipefail
cd "$(dirname "$0")/.."

CLUSTER="${KIND_CLUSTER:-agentrun-e2e}"
IMAGE_TAG=e2e
OPERATOR_NS=agentrun-system
RUN=booking

for tool in docker kind kubectl helm; do
  command -v "$tool" >/dev/null || { echo "hack/kind-e2e.sh needs $tool on PATH" >&2; exit 2; }
done

cleanup() {
  if [ "${KEEP_CLUSTER:-0}" != 1 ]; then
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

if ! kind get clusters | grep -qx "$CLUSTER"; then
  kind create cluster --name "$CLUSTER" --wait 120s
fi
export KUBECONFIG="${KUBECONFIG:-$HOME/.kube/config}"
kubectl config use-context "kind-$CLUSTER" >/dev/null

echo "==> building agentrun-operator:$IMAGE_TAG and loading it into kind"
docker build -t "agentrun-operator:$IMAGE_TAG" .
kind load docker-image "agentrun-operator:$IMAGE_TAG" --name "$CLUSTER"

echo "==> helm install (2 replicas, the chart's Redis)"
helm upgrade --install agentrun charts/agentrun-operator \
  --namespace "$OPERATOR_NS" --create-namespace \
  --set redis.enabled=true \
  --set image.tag="$IMAGE_TAG" --set image.pullPolicy=Never \
  --wait --timeout 5m

echo "==> applying examples/$RUN.yaml"
kubectl delete agentrun "$RUN" --ignore-not-found --wait=true
kubectl apply -f "examples/$RUN.yaml"

jsonpath() { kubectl get agentrun "$RUN" -o jsonpath="$1"; }
succeeded() { jsonpath '{.status.conditions[?(@.type=="Succeeded")].status}'; }

holder=""
for _ in $(seq 1 120); do
  holder="$(jsonpath '{.status.lease.holder}')"
  [ -n "$holder" ] && break
  sleep 1
done
[ -n "$holder" ] || { echo "no replica took the run's lease in 120s" >&2; kubectl describe agentrun "$RUN"; exit 1; }
fence_before="$(jsonpath '{.status.lease.fence}')"

# The holder names the worker process; the pod is the operator pod whose name it starts with.
pod=""
for candidate in $(kubectl -n "$OPERATOR_NS" get pods \
    -l app.kubernetes.io/instance=agentrun,app.kubernetes.io/name=agentrun-operator \
    -o jsonpath='{.items[*].metadata.name}'); do
  case "$holder" in "$candidate"*) pod="$candidate" ;; esac
done
[ -n "$pod" ] || { echo "holder $holder is none of the operator pods" >&2; exit 1; }

if [ "$(succeeded)" = True ]; then
  echo "the run succeeded before its holder could be deleted; nothing was carried on" >&2
  exit 1
fi
echo "==> deleting holder pod $pod (fence $fence_before) mid-run"
kubectl -n "$OPERATOR_NS" delete pod "$pod" --grace-period=0 --force --wait=false

kubectl wait "agentrun/$RUN" --for=condition=Succeeded --timeout=5m
kubectl get agentruns -o wide
fence_after="$(jsonpath '{.status.lease.fence}')"
resumes="$(jsonpath '{.status.resumeCount}')"
echo "==> fence $fence_before -> $fence_after, resumed ${resumes:-0} time(s)"
if [ "${fence_after:-0}" -le "$fence_before" ] || [ "${resumes:-0}" -lt 1 ]; then
  echo "the run was not carried on by another replica" >&2
  exit 1
fi
echo "==> e2e passed"
