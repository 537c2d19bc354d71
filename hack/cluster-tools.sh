#!/usr/bin/env bash
# Builds and installs what the single-node cluster of the end-to-end tests needs (hack/cluster.sh),
# once, into the same cache folder as hack/kube-tools.sh, with the same version stamps:
#   kubelet, kube-scheduler, kube-controller-manager, kube-proxy
#                   from the k8s.io/kubernetes module (hack/kube), in one `go build`
#   coredns         `go install` of CoreDNS $COREDNS_VERSION (the cluster's DNS, run as a pod)
#   crictl          `go install` of cri-tools $CRICTL_VERSION (to look at the node's containers)
#   Debian packages docker.io (dockerd builds the images), containerd (the node's container
#                   runtime), runc, containernetworking-plugins (bridge, host-local, portmap),
#                   mmdebstrap (the base image), iptables, conntrack (kube-proxy)
#
# Why these ways: the only network here is the package registries. The Go module proxy carries
# the Kubernetes, CoreDNS and cri-tools source; Debian carries the runtime. No registry of
# container images is reachable, so hack/images.sh makes every image locally.
#
# The first run takes ~10-15 minutes on two cores (README, "Kubernetes" has the measured cost);
# afterwards every tool is found in the cache with the right version and this returns at once.
# kube-apiserver, kubectl and helm come from hack/kube-tools.sh, which this runs first.
set -euo pipefail
# shellcheck source=hack/kube-tools.sh
source "$(dirname "${BASH_SOURCE[0]}")/kube-tools.sh"

COREDNS_VERSION=v1.11.3
CRICTL_VERSION=v1.34.0 # the proxy refuses v1.32.x; v1.34 speaks the same CRI (v1)
NODE_COMMANDS=(kubelet kube-scheduler kube-controller-manager kube-proxy)

# The Debian packages whose command is missing, installed in one apt-get run. Their services are
# not started by apt here (no init system); hack/images.sh and hack/cluster.sh start them.
install_packages() {
  local wanted=(dockerd:docker.io containerd:containerd runc:runc mmdebstrap:mmdebstrap
    iptables:iptables conntrack:conntrack ip:iproute2 openssl:openssl)
  local missing=() entry sudo=""
  for entry in "${wanted[@]}"; do
    command -v "${entry%%:*}" >/dev/null || [ -x "/usr/sbin/${entry%%:*}" ] || missing+=("${entry#*:}")
  done
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  [ ${#missing[@]} -eq 0 ] && return
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  quietly "apt-get install ${missing[*]}" bash -c "$sudo apt-get update -qq && \
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends ${missing[*]}"
}

build_node_commands() {
  local name stale=()
  for name in "${NODE_COMMANDS[@]}"; do
    current "$name" "$KUBE_VERSION" || stale+=("$name")
  done
  [ ${#stale[@]} -eq 0 ] || build_kube_commands "${stale[@]}"
}

# `go install` of a module's command into the cache, with its version stamped by ldflags.
go_install() {
  local name="$1" version="$2" package="$3" ldflags="$4"
  current "$name" "$version" && return
  quietly "go install $name $version (minutes, once)" \
    env GOBIN="$BIN_DIR" CGO_ENABLED=0 nice -n 10 go install -trimpath -ldflags "$ldflags" \
    "$package@$version"
  stamp "$name" "$version"
}

build_coredns() {
  go_install coredns "$COREDNS_VERSION" github.com/coredns/coredns "-s -w"
}

build_crictl() {
  go_install crictl "$CRICTL_VERSION" sigs.k8s.io/cri-tools/cmd/crictl \
    "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=${CRICTL_VERSION#v}"
}

cluster_tools_current() {
  local name
  for name in "${NODE_COMMANDS[@]}"; do current "$name" "$KUBE_VERSION" || return 1; done
  current coredns "$COREDNS_VERSION" && current crictl "$CRICTL_VERSION"
}

cluster_tools_main() {
  main # hack/kube-tools.sh: kube-apiserver, kubectl, helm, hadolint
  install_packages
  cluster_tools_current && return
  ensure_go
  build_node_commands
  build_coredns
  build_crictl
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then cluster_tools_main; fi
