#!/usr/bin/env bash
# `make demo-k8s`: the operator on a real cluster loses the pod running a booking, and another
# replica carries the run on and books once.
#
# Brings up hack/cluster.sh's single-node cluster (building what is missing first), installs the
# chart with `helm install` (two replicas of the project's image, the chart's Redis), applies
# examples/booking.yaml, and once the agent has booked a seat (it then lingers 30 s, standing in
# for a slow confirmation) force-deletes the pod holding the run's lease. Ends with
# `kubectl get agentruns -o wide` and `kubectl describe agentrun booking`, and with how to open
# the run console (the chart's console.enabled) on the run it carried on, as an on-call engineer
# who may view and approve in the namespace. The cluster stays up for a look around (`make
# cluster-down` takes it down); a second run starts the demo afresh.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/${VENV:-.venv}/bin:$PATH"
# shellcheck source=hack/demo-lib.sh
source hack/demo-lib.sh

NS=agentrun-demo
RUN=booking
bash hack/cluster.sh up || fail "the cluster did not come up"
eval "$(bash hack/cluster.sh env)"
export KUBECONFIG="$KUBECONFIG_FILE"
export PATH="$PATH:$TOOLS_DIR" # helm, and kubectl where the machine has none, as built
demo_dir="$CLUSTER_DIR/demo"
export AGENTRUN_DEMO_DIR="$demo_dir"
services() { python3 -m agentrun.demo "$1"; }
jsonpath() { kubectl -n "$NS" get agentrun "$RUN" -o jsonpath="$1"; }

if kubectl get namespace "$NS" >/dev/null 2>&1; then
  step "Removing the previous demo (its run first, while the operator can still forget it)"
  kubectl -n "$NS" delete agentruns --all --timeout=120s
  helm -n "$NS" uninstall agentrun --wait --timeout=120s
  kubectl delete namespace "$NS" --timeout=120s
fi
kubectl delete persistentvolume agentrun-demo-redis --ignore-not-found --timeout=60s >/dev/null
rm -rf "$demo_dir" && mkdir -p "$demo_dir" && chmod 0777 "$demo_dir"
# The chart's Redis keeps its data on a volume; the cluster has no storage provisioner, so the
# demo gives it a folder of the node (a PersistentVolume without a class, which its claim binds).
redis_dir="$CLUSTER_DIR/demo-redis"
rm -rf "$redis_dir" && mkdir -p "$redis_dir" && chmod 0777 "$redis_dir"
kubectl apply -f - >/dev/null <<VOLUME || fail "the Redis volume could not be made"
apiVersion: v1
kind: PersistentVolume
metadata: {name: agentrun-demo-redis}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  hostPath: {path: $redis_dir, type: Directory}
VOLUME

step "Installing the chart: two replicas of agentrun-operator:e2e, the chart's Redis, the console"
echo "(the demo's stand-in airline and SMS gateway live in $demo_dir on the node, which"
echo " hack/mount_demo_dir.py mounts into every replica)"
show helm install agentrun charts/agentrun-operator -n "$NS" --create-namespace \
  -f hack/cluster-values.yaml --set console.enabled=true --post-renderer python3 \
  --post-renderer-args hack/mount_demo_dir.py --post-renderer-args "$demo_dir" \
  --wait --timeout=120s || fail "helm install failed"
show kubectl -n "$NS" get pods -o wide

step "Starting a booking run"
show kubectl -n "$NS" apply -f examples/booking.yaml || fail "kubectl apply failed"
for _ in $(seq 240); do
  # read only once a pod made the file: root creating it would keep the pods from writing it
  [ -f "$demo_dir/demo-services.db" ] && [ "$(services count-bookings)" = 1 ] && break
  sleep 0.5
done
[ "$(services count-bookings)" = 1 ] || fail "the agent never booked"
holder="$(jsonpath '{.status.lease.holder}')"
pod=""
for candidate in $(kubectl -n "$NS" get pods -l app.kubernetes.io/component!=redis \
  -o jsonpath='{.items[*].metadata.name}'); do
  case "$holder" in "$candidate"-*) pod="$candidate" ;; esac
done
[ -n "$pod" ] || fail "the holder $holder is none of the operator's pods"
echo "-- the agent booked a seat and waits for the confirmation; $pod holds the run"
show kubectl -n "$NS" get agentruns -o wide

step "Force-deleting $pod mid-run"
show kubectl -n "$NS" delete pod "$pod" --grace-period=0 --force
killed=$SECONDS
until [ -n "$(jsonpath '{.status.lease.holder}')" ] && [[ "$(jsonpath '{.status.lease.holder}')" != "$pod"-* ]]; do
  [ $((SECONDS - killed)) -lt 180 ] || fail "no replica took the run over in 180s"
  sleep 0.5
done
echo "-- $(jsonpath '{.status.lease.holder}') took the run over after $((SECONDS - killed))s"
show kubectl -n "$NS" wait "agentrun/$RUN" --for=condition=Succeeded --timeout=300s \
  || fail "the run did not succeed"

step "The airline's books and the SMS gateway"
services all
[ "$(services count-bookings)" = 1 ] || fail "the airline has more than one booking"
[ "$(services count-messages)" = 1 ] || fail "the passenger was texted twice"
echo "one seat booked, one text sent: the replica that took over re-sent the booking with the"
echo "same Idempotency-Key and the airline answered with the seat it had already given"

step "The run"
show kubectl -n "$NS" get agentruns -o wide
show kubectl -n "$NS" describe agentrun "$RUN"
step "The run console"
# An on-call engineer of this namespace: may view runs, approve and resolve, nothing more.
kubectl -n "$NS" create serviceaccount demo-oncall >/dev/null
for role in agentrun-view agentrun-approve; do
  kubectl -n "$NS" create rolebinding "demo-oncall-$role" --clusterrole="$role" \
    --serviceaccount="$NS:demo-oncall" >/dev/null
done
console=$(kubectl -n "$NS" get service -l app.kubernetes.io/component=console \
  -o jsonpath='{.items[0].metadata.name}')
address=$(kubectl -n "$NS" get service "$console" \
  -o jsonpath='{.spec.clusterIP}:{.spec.ports[0].port}')
kubectl -n "$NS" rollout status "deployment/$console" --timeout=120s >/dev/null \
  || fail "the console did not become ready"
echo "The console shows the run it just carried on, its timeline, tool calls and transcript:"
echo "  open http://$address/runs/$NS/$RUN"
echo "  (this machine reaches the Service's address; elsewhere:"
echo "   KUBECONFIG=$KUBECONFIG_FILE kubectl -n $NS port-forward svc/$console 8080:80,"
echo "   then http://127.0.0.1:8080/runs/$NS/$RUN)"
echo "Sign in with a token of an on-call engineer who may view and approve runs here:"
echo "  KUBECONFIG=$KUBECONFIG_FILE kubectl -n $NS create token demo-oncall"
step "Demo finished; the cluster stays up (KUBECONFIG=$KUBECONFIG_FILE; make cluster-down)"
