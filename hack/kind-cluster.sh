#!/usr/bin/env bash
# A kind cluster for the end-to-end suite (`make e2e-kind`, hack/kind-e2e.sh), answering the same
# commands as hack/cluster.sh, so the same tests run on it:
#   hack/kind-cluster.sh up      build what is missing (hack/kind-tools.sh), start dockerd, create
#                                the kind cluster (or keep the running one), load the images
#   hack/kind-cluster.sh down    delete the cluster, stop dockerd by its pid, undo what up changed
#   hack/kind-cluster.sh status  the node and the pods (exit 3 when the cluster is not running)
#   hack/kind-cluster.sh env     the cluster's settings as KEY=value lines (the tests read them)
#   hack/kind-cluster.sh kill-container ID
#                                SIGKILL of a container's process from the node (crictl in it)
#
# What is kind's here: images reach the node with `kind load docker-image`; the node is a Docker
# container, so the tests' folders are bind-mounted into it at the same path (SHARED_DIR, pytest's
# --basetemp) for the demo's SQLite file and Redis's volume. The cluster has no default CNI
# (networking.disableDefaultCNI: kindnetd's image is on no registry reachable here): Debian's
# bridge and host-local plugins, one conflist written into the node. CoreDNS forwards nothing.
#
# Docker: dockerd as hack/images.sh starts it (no firewall rules, no IP forwarding, no default
# bridge), kept running while the cluster lives, with a runc wrapper as its runtime
# (hack/kind/runc-without-missing-caps: root here lacks CAP_SYS_RESOURCE, which `--privileged`
# asks for). kind's "kind" network is a bridge of its own; a rule in the raw table drops every
# packet from it to an address outside it, so no node or pod can send traffic off this machine.
# The kubelet in the node rewrites kernel sysctls like hack/cluster.sh's: `up` saves them and
# `down` restores them (hack/lib/cluster-host.sh, which both scripts source).
set -euo pipefail
# kind-tools.sh (through kube-tools.sh) changes into the repository root, so every source after it needs
# an absolute path: a relative $0 (`bash main/hack/kind-cluster.sh` from elsewhere) would not resolve.
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/kind-tools.sh
source "$HACK_DIR/kind-tools.sh"
# shellcheck source=hack/lib/cluster-host.sh
source "$HACK_DIR/lib/cluster-host.sh" # SYSCTLS, egress_chain, step, live_pid

KIND_CLUSTER="${AGENTRUN_KIND_CLUSTER:-agentrun-e2e}"
KIND_DIR="${AGENTRUN_KIND_DIR:-/var/lib/agentrun-kind}"
SHARED_DIR="$KIND_DIR/shared"
KUBECONFIG_FILE="$KIND_DIR/kubeconfig"
NODE_NAME="$KIND_CLUSTER-control-plane"
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
# shellcheck disable=SC2034 # printed by kind_env, through ${!key}
API_SERVICE_IP=10.96.0.1
EGRESS_CHAIN=AGENTRUN-KIND-EGRESS
SAVED_SYSCTLS="$CACHE_DIR/kind-sysctls.saved"
DOCKERD_PIDFILE="$KIND_DIR/dockerd.pid"
RUNC_WRAPPER="$HACK_DIR/kind/runc-without-missing-caps"
export PATH="$PATH:$BIN_DIR" # kubectl: hack/kube-tools.sh builds one only where the machine has none

# kind drives the docker client on PATH: Debian's, talking to this dockerd.
kind_() { PATH="$(dirname "$DOCKER"):$PATH" DOCKER_HOST="unix://$DOCKER_RUN/docker.sock" "$BIN_DIR/kind" "$@"; }
kubectl_() { kubectl --kubeconfig "$KUBECONFIG_FILE" "$@"; }
node_() { docker_cli exec "$NODE_NAME" "$@"; }

dockerd_alive() {
  local pid
  pid="$(cat "$DOCKERD_PIDFILE" 2>/dev/null)" || return 1
  [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$(command -v dockerd)")" ]
}

ensure_dockerd() {
  dockerd_alive && return
  if docker_answers; then
    echo "==> FAILED: a dockerd not started by this script answers on $DOCKER_RUN/docker.sock (a build of hack/images.sh?): let it finish" >&2
    exit 1
  fi
  mkdir -p "$KIND_DIR"
  launch_dockerd --add-runtime "agentrun-runc=$RUNC_WRAPPER" --default-runtime agentrun-runc
  echo "$DOCKERD_PID" >"$DOCKERD_PIDFILE"
  DOCKERD_PID="" # the cluster's, not this script's: `down` stops it
}

kind_config() {
  cat <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  disableDefaultCNI: true
  podSubnet: 10.244.0.0/16
  serviceSubnet: $SERVICE_CIDR
nodes:
- role: control-plane
  extraMounts:
  - {hostPath: $SHARED_DIR, containerPath: $SHARED_DIR}
kubeadmConfigPatches:
- |
  kind: InitConfiguration
  patches: {directory: $KUBEADM_PATCHES_DIR}
- |
  kind: KubeletConfiguration
  # runc cannot set a negative oom_score_adj here (containerd's restrict_oom_score_adj)
  oomScoreAdj: 0
  # no upstream resolver: nothing a pod resolves leaves the cluster
  resolvConf: ""
- |
  kind: KubeProxyConfiguration
  oomScoreAdj: 0
  conntrack: {maxPerCore: 0, min: 0}
EOF
}

CNI_CONFLIST='{
  "cniVersion": "1.0.0",
  "name": "agentrun",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "'"$POD_CIDR"'"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}'

kind_network() { docker_cli network inspect kind -f "$1"; }

egress_up() {
  local bridge subnet
  bridge="br-$(kind_network '{{.Id}}' | cut -c1-12)"
  subnet="$(kind_network '{{range .IPAM.Config}}{{.Subnet}} {{end}}' | tr ' ' '\n' | grep -v : | head -n 1)"
  egress_chain "agentrun: kind never leaves this machine" "$subnet"
  first_in_prerouting iptables -i "$bridge" -j "$EGRESS_CHAIN"
  first_in_prerouting ip6tables -i "$bridge" -j DROP
  echo "$bridge" >"$KIND_DIR/bridge"
}

egress_down() {
  local bridge
  bridge="$(cat "$KIND_DIR/bridge" 2>/dev/null)" || return 0
  iptables -t raw -D PREROUTING -i "$bridge" -j "$EGRESS_CHAIN" 2>/dev/null || true
  ip6tables -t raw -D PREROUTING -i "$bridge" -j DROP 2>/dev/null || true
  iptables -t raw -F "$EGRESS_CHAIN" 2>/dev/null || true
  iptables -t raw -X "$EGRESS_CHAIN" 2>/dev/null || true
  rm -f "$KIND_DIR/bridge"
}

cluster_exists() { kind_ get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER"; }

# The kubeconfig for this machine: the node's address on kind's network (dockerd publishes no
# port here: no userland proxy, no firewall rules).
write_kubeconfig() {
  local address
  address="$(docker_cli inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$NODE_NAME")"
  kind_ get kubeconfig --internal --name "$KIND_CLUSTER" \
    | sed "s|server: https://$NODE_NAME:6443|server: https://$address:6443|" >"$KUBECONFIG_FILE"
  chmod 600 "$KUBECONFIG_FILE"
}

# kubeadm's CoreDNS forwards what is not cluster.local to the node's resolver: it forwards nothing.
coredns_local_only() {
  kubectl_ -n kube-system get configmap coredns -o json \
    | python3 -c 'import json, re, sys
cm = json.load(sys.stdin)
cm["data"]["Corefile"] = re.sub(r"\n\s*forward \. /etc/resolv\.conf \{.*?\}", "", cm["data"]["Corefile"], flags=re.S)
json.dump(cm, sys.stdout)' | kubectl_ replace -f - >/dev/null
}

create_cluster() {
  rm -rf "$SHARED_DIR"
  mkdir -p "$SHARED_DIR"
  kind_config >"$KIND_DIR/kind.yaml"
  save_sysctls
  LOG="$KIND_DIR/create.log"
  quietly "kind create cluster $KIND_CLUSTER from $KIND_NODE_IMAGE" kind_ create cluster --name "$KIND_CLUSTER" --image "$KIND_NODE_IMAGE" \
    --config "$KIND_DIR/kind.yaml" --kubeconfig "$KIND_DIR/kind-kubeconfig" --retain
  egress_up
  write_kubeconfig
  coredns_local_only
  printf '%s\n' "$CNI_CONFLIST" | docker_cli exec -i "$NODE_NAME" sh -c 'cat >/etc/cni/net.d/10-agentrun.conflist'
  step "node $NODE_NAME Ready" kubectl_ wait "node/$NODE_NAME" --for=condition=Ready --timeout=180s
  step "CoreDNS" kubectl_ -n kube-system rollout status deployment/coredns --timeout=180s
}

kind_up() {
  local began=$SECONDS
  mkdir -p "$KIND_DIR"
  ensure_dockerd
  kind_tools_main
  if cluster_exists && [ "$(docker_cli inspect -f '{{.State.Running}}' "$NODE_NAME" 2>/dev/null)" = true ]; then
    echo "==> kind cluster $KIND_CLUSTER is running"
  else
    cluster_exists && kind_down
    ensure_dockerd
    create_cluster
  fi
  LOG="$KIND_DIR/load.log"
  quietly "kind load docker-image $OPERATOR_IMAGE $REDIS_IMAGE" \
    kind_ load docker-image --name "$KIND_CLUSTER" "$OPERATOR_IMAGE" "$REDIS_IMAGE"
  echo "==> kind cluster up in $((SECONDS - began))s: KUBECONFIG=$KUBECONFIG_FILE"
}

kind_down() {
  local began=$SECONDS pid
  echo "==> deleting kind cluster $KIND_CLUSTER"
  if dockerd_alive; then
    kind_ delete cluster --name "$KIND_CLUSTER" || true
    # kind leaves its network (and so the bridge on this machine) for the next cluster
    docker_cli network rm kind >/dev/null 2>&1 || true
    pid="$(cat "$DOCKERD_PIDFILE")"
    kill -TERM "$pid"
    for _ in $(seq 1 60); do dockerd_alive || break; sleep 0.25; done
    dockerd_alive && kill -KILL "$pid"
  fi
  rm -f "$DOCKERD_PIDFILE"
  egress_down
  restore_sysctls
  echo "==> kind cluster down in $((SECONDS - began))s"
}

kind_status() {
  dockerd_alive && cluster_exists || { echo "kind cluster $KIND_CLUSTER: not running"; return 3; }
  kind_ get nodes --name "$KIND_CLUSTER"
  kubectl_ get nodes -o wide
  kubectl_ get pods -A -o wide
}

kind_env() {
  local key
  for key in KIND_CLUSTER KIND_DIR KUBECONFIG_FILE NODE_NAME POD_CIDR SERVICE_CIDR API_SERVICE_IP \
    EGRESS_CHAIN OPERATOR_IMAGE REDIS_IMAGE SHARED_DIR KIND_NODE_IMAGE; do
    printf '%s=%s\n' "$key" "${!key}"
  done
}

kind_kill_container() {
  local pid
  pid="$(node_ crictl inspect -o go-template --template '{{.info.pid}}' "$1")"
  pid="$(live_pid "$pid" node_)" || exit 1
  node_ kill -KILL "$pid"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
  up) kind_up ;;
  down) kind_down ;;
  status) kind_status ;;
  env) kind_env ;;
  kill-container) kind_kill_container "${2:?usage: hack/kind-cluster.sh kill-container ID}" ;;
  *)
    echo "usage: hack/kind-cluster.sh up|down|status|env|kill-container ID" >&2
    exit 2
    ;;
  esac
fi
