#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this machine, for the end-to-end tests and
# `make demo-k8s`:
#   hack/cluster.sh up      build what is missing (hack/cluster-tools.sh, hack/images.sh), start
#                           the cluster and print where its kubeconfig is
#   hack/cluster.sh down    stop everything `up` started, by pid, and undo what it changed
#   hack/cluster.sh status  each component's pid and memory, the node and the pods (exit 3 when
#                           a component is not running)
#   hack/cluster.sh env     the cluster's settings as KEY=value lines (the tests read them)
#   hack/cluster.sh kill-container ID
#                           SIGKILL of a container's process from the node (crictl finds it)
#
# The end-to-end suite runs on any cluster whose script answers these five commands the same way
# (tests/support/cluster.py; hack/kind-cluster.sh is the other one).
#
# Control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler. Node: containerd
# (the CRI), kubelet, kube-proxy (iptables), the CNI bridge plugin, CoreDNS as a pod. Images come
# from hack/images.sh's tarballs (no registry), imported into containerd; every pod uses
# imagePullPolicy Never. The machine's traps and their fixes (../shared notes on a real cluster):
# runc cannot set a negative oom_score_adj here (restrict_oom_score_adj, oomScoreAdj 0), the
# kubelet rewrites kernel sysctls (saved before, restored by `down`), and the kubelet, kube-proxy
# and CNI leave KUBE-*/CNI-* firewall chains behind (deleted by `down`).
#
# Network: the pod range and the service range exist only on the bridge this script creates
# ($BRIDGE, the node's address is its gateway) and in the pods' network namespaces. A rule in the
# raw table, ahead of everything kube-proxy and CNI add, DROPS any packet from the pod range to an
# address outside the pod and service ranges (the node is the pod range's gateway): no pod can
# send traffic off this machine. The API server listens on the bridge address only, the other
# components on loopback; CoreDNS answers for cluster.local and forwards nothing.
#
# Every process `up` starts is recorded by pid in $CLUSTER_DIR/pids and stopped by that pid; no
# process is ever looked up by name. `up` on a running cluster only checks it; on a half-started
# one it runs `down` first. Each stage prints one line; a failing component's log is shown.
# AGENTRUN_CLUSTER_DIR moves the cluster's state (default /var/lib/agentrun-cluster).
set -euo pipefail
# images.sh (through kube-tools.sh) changes into the repository root, so every source after it needs
# an absolute path: a relative $0 (`bash main/hack/cluster.sh` from elsewhere) would not resolve.
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=hack/images.sh
source "$HACK_DIR/images.sh"
# shellcheck source=hack/lib/cluster-host.sh
source "$HACK_DIR/lib/cluster-host.sh" # SYSCTLS, egress_chain, step, live_pid

CLUSTER_DIR="${AGENTRUN_CLUSTER_DIR:-/var/lib/agentrun-cluster}"
RUN_DIR=/run/agentrun-cluster
PKI="$CLUSTER_DIR/pki"
PIDS="$CLUSTER_DIR/pids"
LOGS="$CLUSTER_DIR/logs"
# Written once every step of `up` has passed (CoreDNS last): a cluster whose processes are alive
# but whose `up` failed part-way (kube-proxy too slow, CoreDNS never applied) is taken down and
# made again, not reused.
UP_MARK="$CLUSTER_DIR/up-complete"
CONTAINERD_ROOT="$CACHE_DIR/containerd" # kept across clusters: images are imported once
CONTAINERD_SOCK="$RUN_DIR/containerd.sock"
SAVED_SYSCTLS="$CACHE_DIR/cluster-sysctls.saved" # outside CLUSTER_DIR: survives a crashed `up`
KUBECONFIG_FILE="$CLUSTER_DIR/kubeconfig"
TOOLS_DIR="$BIN_DIR"
export PATH="$PATH:$BIN_DIR" # kubectl: hack/kube-tools.sh builds one only where the machine has none

NODE_NAME=agentrun-node
BRIDGE=agentrun0
POD_CIDR=10.244.0.0/24
NODE_IP=10.244.0.1
SERVICE_CIDR=10.96.0.0/24
API_SERVICE_IP=10.96.0.1
DNS_IP=10.96.0.10
API_SERVER="https://$NODE_IP:6443"
ETCD_URL=http://127.0.0.1:12379
EGRESS_CHAIN=AGENTRUN-POD-EGRESS
# Started in this order, stopped in the reverse one.
COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy)

kubectl_() { kubectl --kubeconfig "$KUBECONFIG_FILE" "$@"; }
crictl_() { "$BIN_DIR/crictl" --runtime-endpoint "unix://$CONTAINERD_SOCK" "$@"; }

fail() {
  echo "==> FAILED: $1" >&2
  [ -z "${2:-}" ] || { tail -n 40 "$LOGS/$2.log" >&2; echo "(full log: $LOGS/$2.log)" >&2; }
  exit 1
}

# Runs $2.. until it succeeds, at most $1 seconds; the component named by WAIT_FOR (if any) must
# stay alive meanwhile.
wait_until() {
  local seconds="$1" deadline
  shift
  deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if [ -n "${WAIT_FOR:-}" ] && ! alive "$WAIT_FOR"; then return 1; fi
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.5
  done
}

# ---- processes, by pid --------------------------------------------------------------------

binary_of() {
  case "$1" in
  etcd) command -v etcd ;;
  containerd) command -v containerd ;;
  *) echo "$BIN_DIR/$1" ;;
  esac
}

# Alive: the recorded pid runs the component's own binary (a reused pid is not ours).
alive() {
  local pid
  pid="$(cat "$PIDS/$1.pid" 2>/dev/null)" || return 1
  [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$(readlink -f "$(binary_of "$1")")" ]
}

start() {
  local name="$1" binary
  shift
  binary="$(binary_of "$name")"
  setsid "$binary" "$@" </dev/null >"$LOGS/$name.log" 2>&1 &
  echo $! >"$PIDS/$name.pid"
}

stop() {
  local name="$1" pid _
  if alive "$name"; then
    pid="$(cat "$PIDS/$name.pid")"
    kill -TERM "$pid"
    for _ in $(seq 1 60); do
      alive "$name" || break
      sleep 0.25
    done
    alive "$name" && kill -KILL "$pid"
  fi
  rm -f "$PIDS/$name.pid"
}

# containerd's shims outlive containerd by design; the ones serving our containerd are found by
# the socket address on their command line and stopped by pid.
stop_shims() {
  local cmdline pid
  for cmdline in /proc/[0-9]*/cmdline; do
    pid="${cmdline#/proc/}"
    pid="${pid%/cmdline}"
    if { tr '\0' ' ' <"$cmdline"; } 2>/dev/null | grep -q -- "-address $CONTAINERD_SOCK "; then
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}

# ---- kernel settings and network -----------------------------------------------------------

# The bridge, the node's address on it, forwarding between pods and services, and the egress rule.
network_up() {
  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
  ip addr replace "$NODE_IP/${POD_CIDR#*/}" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  sysctl -q -w net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1 \
    net.bridge.bridge-nf-call-ip6tables=1
  egress_chain "agentrun: pods never leave this machine" "$POD_CIDR" "$SERVICE_CIDR"
  first_in_prerouting iptables -s "$POD_CIDR" -j "$EGRESS_CHAIN"
  # Pods have no IPv6 address; whatever IPv6 they send stays on the bridge.
  first_in_prerouting ip6tables -i "$BRIDGE" -j DROP
}

# Deletes the chains whose names start with one of the prefixes in every table, with the rules
# that jump to them, for iptables and ip6tables.
delete_chains() {
  local tool table rule chain prefixes="KUBE-|CNI-|$EGRESS_CHAIN"
  for tool in iptables ip6tables; do
    for table in filter nat mangle raw; do
      "$tool" -t "$table" -S >/dev/null 2>&1 || continue
      while IFS= read -r rule; do
        eval "$tool -t $table -D ${rule#-A }" 2>/dev/null || true
      done < <("$tool" -t "$table" -S | grep -E "^-A [A-Z]+ .*-j ($prefixes)" | grep -vE "^-A ($prefixes)")
      for chain in $("$tool" -t "$table" -S | sed -nE "s/^-N (($prefixes)[^ ]*)$/\1/p"); do
        "$tool" -t "$table" -F "$chain" 2>/dev/null || true
      done
      for chain in $("$tool" -t "$table" -S | sed -nE "s/^-N (($prefixes)[^ ]*)$/\1/p"); do
        "$tool" -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
  ip6tables -t raw -D PREROUTING -i "$BRIDGE" -j DROP 2>/dev/null || true
}

network_down() {
  delete_chains
  ip link show "$BRIDGE" >/dev/null 2>&1 && ip link delete "$BRIDGE"
  # veths CNI made for pods that were not torn down go with their namespaces; the bridge's
  # addresses went with it.
  return 0
}

# ---- certificates, tokens, kubeconfigs -----------------------------------------------------

make_pki() {
  mkdir -p "$PKI"
  (
    cd "$PKI"
    openssl req -x509 -newkey rsa:2048 -nodes -days 7 -keyout ca.key -out ca.crt \
      -subj /CN=agentrun-cluster-ca -addext basicConstraints=critical,CA:TRUE \
      -addext keyUsage=critical,keyCertSign,cRLSign
    issue() { # name subject extensions
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2"
      printf '%s\n' "$3" >"$1.ext"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 7 \
        -out "$1.crt" -extfile "$1.ext"
    }
    issue apiserver /CN=kube-apiserver "subjectAltName=IP:$NODE_IP,IP:$API_SERVICE_IP,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost
extendedKeyUsage=serverAuth
keyUsage=critical,digitalSignature,keyEncipherment"
    issue kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth
keyUsage=critical,digitalSignature,keyEncipherment"
    openssl genrsa -out service-account.key 2048
  ) >"$LOGS/pki.log" 2>&1 || fail "making certificates" pki
  # One bearer token per identity; the Node and RBAC authorizers know each by its user/group.
  local identity user group
  : >"$PKI/tokens.csv"
  for identity in "admin|system:masters" "system:node:$NODE_NAME|system:nodes" \
    "system:kube-controller-manager|" "system:kube-scheduler|" "system:kube-proxy|"; do
    user="${identity%|*}"
    group="${identity#*|}"
    echo "$(openssl rand -hex 24),$user,$user${group:+,\"$group\"}" >>"$PKI/tokens.csv"
    write_kubeconfig "$user" "$(tail -n 1 "$PKI/tokens.csv" | cut -d, -f1)"
  done
}

kubeconfig_of() {
  case "$1" in
  admin) echo "$KUBECONFIG_FILE" ;;
  *) echo "$CLUSTER_DIR/kubeconfigs/${1##*:}.kubeconfig" ;;
  esac
}

write_kubeconfig() {
  local file
  file="$(kubeconfig_of "$1")"
  mkdir -p "$(dirname "$file")"
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: agentrun
  cluster:
    server: $API_SERVER
    certificate-authority: $PKI/ca.crt
users:
- name: $1
  user:
    token: $2
contexts:
- name: agentrun
  context: {cluster: agentrun, user: $1, namespace: default}
current-context: agentrun
EOF
  chmod 600 "$file"
}

# ---- the components ------------------------------------------------------------------------

start_etcd() {
  start etcd --name=agentrun --data-dir="$CLUSTER_DIR/etcd" \
    --listen-client-urls="$ETCD_URL" --advertise-client-urls="$ETCD_URL" \
    --listen-peer-urls=http://127.0.0.1:12380 --initial-advertise-peer-urls=http://127.0.0.1:12380 \
    --initial-cluster=agentrun=http://127.0.0.1:12380 --logger=zap --log-level=warn
  WAIT_FOR=etcd wait_until 60 curl -fsS "$ETCD_URL/health" || fail "etcd did not start" etcd
}

api_ready() {
  curl -fsS --cacert "$PKI/ca.crt" -H "Authorization: Bearer $(sed -n 's/^ *token: //p' "$KUBECONFIG_FILE")" \
    "$API_SERVER/readyz"
}

start_apiserver() {
  start kube-apiserver --etcd-servers="$ETCD_URL" --bind-address="$NODE_IP" \
    --advertise-address="$NODE_IP" --secure-port=6443 --cert-dir="$PKI" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" --token-auth-file="$PKI/tokens.csv" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/service-account.key" \
    --service-account-signing-key-file="$PKI/service-account.key" \
    --service-cluster-ip-range="$SERVICE_CIDR" --allow-privileged=true \
    --kubelet-client-certificate="$PKI/kubelet-client.crt" \
    --kubelet-client-key="$PKI/kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP --enable-priority-and-fairness=false \
    --profiling=false
  WAIT_FOR=kube-apiserver wait_until 120 api_ready || fail "kube-apiserver did not become ready" kube-apiserver
}

start_controllers() {
  start kube-controller-manager --kubeconfig="$(kubeconfig_of system:kube-controller-manager)" \
    --bind-address=127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
    --service-account-private-key-file="$PKI/service-account.key" --root-ca-file="$PKI/ca.crt" \
    --cluster-name=agentrun --profiling=false
  start kube-scheduler --kubeconfig="$(kubeconfig_of system:kube-scheduler)" \
    --bind-address=127.0.0.1 --leader-elect=false --profiling=false
}

start_containerd() {
  mkdir -p "$RUN_DIR" "$CONTAINERD_ROOT" "$CLUSTER_DIR/cni/net.d"
  cat >"$CLUSTER_DIR/containerd.toml" <<EOF
version = 2
root = "$CONTAINERD_ROOT"
state = "$RUN_DIR/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "$CONTAINERD_SOCK"
[plugins."io.containerd.internal.v1.opt"]
  path = "$CLUSTER_DIR/containerd-opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/library/$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  # root here lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj below its own
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CLUSTER_DIR/cni/net.d"
EOF
  cat >"$CLUSTER_DIR/cni/net.d/10-agentrun.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "agentrun",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$CLUSTER_DIR/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  start containerd --config "$CLUSTER_DIR/containerd.toml"
  WAIT_FOR=containerd wait_until 60 crictl_ version || fail "containerd did not start" containerd
}

# Imports each image tarball whose recipe containerd does not hold yet.
import_images() {
  local image tar stamp
  mkdir -p "$CONTAINERD_ROOT/agentrun-imported"
  for image in "${CLUSTER_IMAGES[@]}"; do
    tar="$(image_tar "$image")"
    stamp="$CONTAINERD_ROOT/agentrun-imported/$(basename "$tar").recipe"
    if cmp -s "$tar.recipe" "$stamp" && crictl_ inspecti "docker.io/library/$image" >/dev/null 2>&1; then
      continue
    fi
    quietly "importing $image into containerd" \
      ctr --address "$CONTAINERD_SOCK" -n k8s.io images import "$tar"
    cp "$tar.recipe" "$stamp"
  done
}

start_kubelet() {
  mkdir -p "$CLUSTER_DIR/kubelet"
  cat >"$CLUSTER_DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
cgroupDriver: cgroupfs
failSwapOn: false
# runc cannot set a negative oom_score_adj here (see containerd's restrict_oom_score_adj)
oomScoreAdj: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
clusterDNS: [$DNS_IP]
# no upstream resolver: nothing a pod resolves leaves the cluster
resolvConf: ""
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%}
maxPods: 30
podLogsDir: $CLUSTER_DIR/pod-logs
EOF
  start kubelet --config="$CLUSTER_DIR/kubelet.yaml" \
    --kubeconfig="$(kubeconfig_of "system:node:$NODE_NAME")" --root-dir="$CLUSTER_DIR/kubelet" \
    --hostname-override="$NODE_NAME" --node-ip="$NODE_IP"
  WAIT_FOR=kubelet wait_until 120 kubectl_ wait "node/$NODE_NAME" --for=condition=Ready --timeout=2s \
    || fail "the node did not become Ready" kubelet
}

start_proxy() {
  cat >"$CLUSTER_DIR/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $(kubeconfig_of system:kube-proxy)}
mode: iptables
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE_NAME
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$NODE_IP/32"]
iptables: {localhostNodePorts: false}
# 0: leave the kernel's conntrack settings as they are
conntrack: {maxPerCore: 0, min: 0}
oomScoreAdj: 0
EOF
  start kube-proxy --config="$CLUSTER_DIR/kube-proxy.yaml"
  WAIT_FOR=kube-proxy wait_until 60 curl -fsS http://127.0.0.1:10256/healthz \
    || fail "kube-proxy did not become healthy" kube-proxy
}

start_coredns() {
  sed -e "s|\${DNS_IP}|$DNS_IP|g" -e "s|\${COREDNS_IMAGE}|$COREDNS_IMAGE|g" hack/cluster/coredns.yaml \
    | kubectl_ apply -f - >"$LOGS/coredns.log" 2>&1 || fail "applying CoreDNS" coredns
  kubectl_ -n kube-system rollout status deployment/coredns --timeout=120s >>"$LOGS/coredns.log" 2>&1 \
    || { kubectl_ -n kube-system describe pods -l k8s-app=kube-dns >>"$LOGS/coredns.log" 2>&1; fail "CoreDNS did not become ready" coredns; }
}

# ---- up, down, status ----------------------------------------------------------------------

any_recorded() { compgen -G "$PIDS/*.pid" >/dev/null; }

all_alive() {
  local name
  for name in "${COMPONENTS[@]}"; do alive "$name" || return 1; done
}

cluster_up() {
  images_main
  if [ -f "$UP_MARK" ] && all_alive && api_ready >/dev/null 2>&1; then
    import_images # an image rebuilt since the cluster started
    echo "==> the cluster is up: KUBECONFIG=$KUBECONFIG_FILE"
    return
  fi
  if any_recorded; then
    echo "==> a previous cluster is half up: taking it down first"
    cluster_down
  fi
  local began=$SECONDS
  unmount_under "$CLUSTER_DIR"
  rm -rf "$CLUSTER_DIR"
  mkdir -p "$PIDS" "$LOGS"
  save_sysctls
  step "network: bridge $BRIDGE ($NODE_IP), pods $POD_CIDR, services $SERVICE_CIDR, egress dropped" network_up
  make_pki
  step "etcd" start_etcd
  step "kube-apiserver on $API_SERVER" start_apiserver
  start_controllers
  step "containerd" start_containerd
  import_images
  step "kubelet: node $NODE_NAME Ready" start_kubelet
  step "kube-proxy (iptables)" start_proxy
  step "CoreDNS" start_coredns
  alive kube-controller-manager || fail "kube-controller-manager exited" kube-controller-manager
  alive kube-scheduler || fail "kube-scheduler exited" kube-scheduler
  touch "$UP_MARK"
  echo "==> cluster up in $((SECONDS - began))s: KUBECONFIG=$KUBECONFIG_FILE"
}

unmount_under() {
  local mount
  for mount in $(awk -v dir="$1" 'index($5, dir) == 1 {print $5}' /proc/self/mountinfo | sort -r); do
    umount -l "$mount" 2>/dev/null || true
  done
}

# Empty cgroups the kubelet made (kubepods and its QoS classes), deepest first.
remove_cgroups() {
  local dir
  for dir in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods.slice /sys/fs/cgroup/kubepods; do
    [ -d "$dir" ] && find "$dir" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  return 0
}

cluster_down() {
  local began=$SECONDS name
  echo "==> stopping the cluster in $CLUSTER_DIR"
  rm -f "$UP_MARK"
  stop kube-proxy
  stop kubelet
  if alive containerd; then
    # Stops every pod sandbox through CNI, so each pod's veth and address are released.
    crictl_ rmp --all --force >/dev/null 2>&1 || true
  fi
  for name in containerd kube-scheduler kube-controller-manager kube-apiserver etcd; do stop "$name"; done
  stop_shims
  unmount_under "$CLUSTER_DIR"
  unmount_under "$RUN_DIR"
  unmount_under "$CONTAINERD_ROOT"
  remove_cgroups
  network_down
  restore_sysctls
  rm -rf "$RUN_DIR" "$PIDS"
  # The kubelet links every container's log from this fixed folder; CNI caches results here.
  find /var/log/containers -maxdepth 1 -lname "$CLUSTER_DIR/*" -delete 2>/dev/null || true
  rm -f /var/lib/cni/results/agentrun-* 2>/dev/null || true
  rmdir /var/log/containers /var/lib/cni/results /var/lib/cni 2>/dev/null || true
  echo "==> cluster down in $((SECONDS - began))s (its logs stay in $LOGS)"
}

rss_mb() { awk '/^VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$1/status" 2>/dev/null || echo 0; }

cluster_status() {
  local name pid rss total=0
  for name in "${COMPONENTS[@]}"; do
    if alive "$name"; then
      pid="$(cat "$PIDS/$name.pid")"
      rss="$(rss_mb "$pid")"
      total=$((total + rss))
      printf '%-24s pid %-8s %5s MB\n' "$name" "$pid" "$rss"
    else
      printf '%-24s not running\n' "$name"
    fi
  done
  echo "control plane + node: $total MB RSS"
  if alive kube-apiserver; then
    kubectl_ get nodes -o wide
    kubectl_ get pods -A -o wide
  fi
  all_alive || return 3
}

# SHARED_DIR: a folder of this machine the node sees at the same path (here the node is this
# machine, so every folder is).
SHARED_DIR=/

cluster_env() {
  local key
  for key in CLUSTER_DIR KUBECONFIG_FILE NODE_NAME BRIDGE NODE_IP POD_CIDR SERVICE_CIDR \
    API_SERVICE_IP DNS_IP EGRESS_CHAIN CONTAINERD_SOCK TOOLS_DIR OPERATOR_IMAGE REDIS_IMAGE \
    SHARED_DIR; do
    printf '%s=%s\n' "$key" "${!key}"
  done
}

# As the kernel's OOM killer or a lost node ends a process: no handler runs. Only a live pid
# (live_pid): an exited container's is 0, and `kill -KILL 0` would kill our own process group.
kill_container() {
  local pid
  pid="$(crictl_ inspect -o go-template --template '{{.info.pid}}' "$1")"
  pid="$(live_pid "$pid")" || exit 1
  kill -KILL "$pid"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case "${1:-}" in
  up) cluster_up ;;
  down) cluster_down ;;
  status) cluster_status ;;
  env) cluster_env ;;
  kill-container) kill_container "${2:?usage: hack/cluster.sh kill-container ID}" ;;
  *)
    echo "usage: hack/cluster.sh up|down|status|env|kill-container ID" >&2
    exit 2
    ;;
  esac
fi
