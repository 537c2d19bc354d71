#!/usr/bin/env bash
# Builds what a kind cluster of the end-to-end suite needs (hack/kind-cluster.sh), without a
# container registry, into the same cache as the other tools, each once per version:
#   kind                     `go install sigs.k8s.io/kind@$KIND_VERSION` (the Go module proxy)
#   kubeadm                  from the k8s.io/kubernetes module (hack/kube), like the node commands
#   agentrun-kind-base:KIND  kind's base image made from Debian: mmdebstrap of systemd,
#                            containerd, runc, the CNI plugins, iptables, ... with kind's own files
#                            (entrypoint, systemd units, containerd config) copied from the kind
#                            module's images/base/files
#   agentrun-kind-node:KUBE  the node image: what `kind build node-image` makes, made here the way
#                            it makes it (a container of the base image, kubeadm, kubelet and
#                            kubectl copied in, the images kubeadm names imported into its
#                            containerd, `docker commit`), because `kind build node-image` fetches
#                            etcd, CoreDNS, pause, kindnetd and local-path-provisioner from
#                            registry.k8s.io and docker.io, which are out of reach here
# The images kubeadm names are made locally under those names: kube-apiserver,
# kube-controller-manager, kube-scheduler, kube-proxy and etcd (Debian's etcd-server) on a Debian
# image with iptables and conntrack, CoreDNS and pause as hack/images.sh makes them.
#
# Each image is rebuilt only when its recipe changes (a hash kept beside its tarball, or in the
# node image's label); dockerd runs as hack/images.sh starts it.
set -euo pipefail
# shellcheck source=hack/images.sh
source "$(dirname "${BASH_SOURCE[0]}")/images.sh"

KIND_VERSION=v0.30.0 # the newest kind whose node images include Kubernetes v1.32
KIND_BASE_IMAGE="agentrun-kind-base:$KIND_VERSION"
KIND_NODE_IMAGE="agentrun-kind-node:$KUBE_VERSION"
KUBE_IMAGES_BASE="agentrun-kube-images:$DEBIAN_SUITE"
ETCD_TAG=3.5.24-0 # what kubeadm $KUBE_VERSION names (`kubeadm config images list`)
PAUSE_TAG=3.10    # what kind's containerd config names as the sandbox image
# kind applies this instead of its local-path provisioner: the nodes have no storage provisioner,
# as hack/cluster.sh's has none, and each test makes the PersistentVolume its claim binds.
NO_STORAGE_MANIFEST='apiVersion: v1
kind: ConfigMap
metadata: {name: agentrun-no-storage-provisioner, namespace: kube-system}
data: {why: "volumes are PersistentVolumes made by the end-to-end tests"}'
# etcd here is Debian's 3.4 under the name of the 3.5 kubeadm expects; 3.4 serves /health but not
# the /livez and /readyz kubeadm's probes ask for (404: the kubelet restarts etcd every few
# minutes). kubeadm applies this patch to its etcd manifest (kind's config names the folder).
KUBEADM_PATCHES_DIR=/kind/agentrun-patches
ETCD_PROBES_PATCH='- {op: replace, path: /spec/containers/0/livenessProbe/httpGet/path, value: /health}
- {op: replace, path: /spec/containers/0/readinessProbe/httpGet/path, value: /health}
- {op: replace, path: /spec/containers/0/startupProbe/httpGet/path, value: /health}'

kind_module_dir() {
  (cd "$(mktemp -d)" && go mod download -json "sigs.k8s.io/kind@$KIND_VERSION") \
    | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p'
}

# mmdebstrap's customize hook for the base image: what kind's images/base/Dockerfile does after
# installing its packages, on the tree in "$1"; $2 is kind's files folder, $3 crictl.
# shellcheck disable=SC2016 # expanded by mmdebstrap's shell
KIND_BASE_HOOK='set -e; root="$1"; files="$2"
cp -r "$files/usr/local/bin/." "$root/usr/local/bin/"; chmod 755 "$root"/usr/local/bin/*
mkdir -p "$root/kind" && cp -r "$files/kind/." "$root/kind/" && chmod -R u+w,a+rX "$root/kind"
chmod 755 "$root"/kind/bin/*
cp -r "$files/etc/." "$root/etc/" && chmod -R u+w,a+rX "$root/etc"
sed -i "s/restrict_oom_score_adj = false/restrict_oom_score_adj = true/" "$root/etc/containerd/config.toml"
ln -sf /usr/bin/containerd "$root/usr/local/bin/containerd"
install -m 755 "$3" "$root/usr/local/bin/crictl"
mkdir -p "$root/opt/cni/bin"
for plugin in "$root"/usr/lib/cni/*; do ln -sf "/usr/lib/cni/${plugin##*/}" "$root/opt/cni/bin/"; done
chroot "$root" ctr oci spec | chroot "$root" jq ".hooks.createContainer[.hooks.createContainer | length] |= . + {\"path\": \"/kind/bin/mount-product-files.sh\"}" | chroot "$root" jq "del(.process.rlimits)" >"$root/etc/containerd/cri-base.json"
find "$root/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
rm -f "$root"/lib/systemd/system/multi-user.target.wants/* "$root"/etc/systemd/system/*.wants/* \
  "$root"/lib/systemd/system/local-fs.target.wants/* "$root"/lib/systemd/system/sockets.target.wants/*udev* \
  "$root"/lib/systemd/system/sockets.target.wants/*initctl* "$root"/lib/systemd/system/basic.target.wants/*
echo ReadKMsg=no >>"$root/etc/systemd/journald.conf"
ln -sf /lib/systemd/systemd "$root/sbin/init"
chroot "$root" systemctl enable kubelet.service containerd.service undo-mount-hacks.service
chroot "$root" systemctl mask systemd-binfmt.service
mkdir -p "$root/etc/kubernetes/manifests"'

kind_base_image() {
  local files
  files="$(kind_module_dir)/images/base/files"
  [ -d "$files" ] || { echo "==> FAILED: no $files in the kind module" >&2; exit 1; }
  debian_image "$KIND_BASE_IMAGE" \
    systemd,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,ca-certificates,curl,jq,procps,containerd,runc,containernetworking-plugins \
    "bash -c '$KIND_BASE_HOOK' _ \"\$1\" '$files' '$BIN_DIR/crictl'" \
    'ENV container=docker' \
    'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]'
}

# registry.k8s.io/NAME:$KUBE_VERSION: the binary from the cache on the Debian image.
kube_image() {
  local name="$1" tmp
  tmp="$(mktemp -d)"
  cp "$BIN_DIR/$name" "$tmp/$name"
  printf 'FROM %s\nCOPY %s /usr/local/bin/%s\nENTRYPOINT ["/usr/local/bin/%s"]\n' \
    "$KUBE_IMAGES_BASE" "$name" "$name" "$name" >"$tmp/Dockerfile"
  quietly "docker build registry.k8s.io/$name:$KUBE_VERSION" \
    docker_cli build --network=host -t "registry.k8s.io/$name:$KUBE_VERSION" "$tmp"
  rm -rf "$tmp"
}

# What kind's builder does: containerd started in the build container, the images imported
# without unpacking (the container is not privileged; the node's containerd unpacks an image when
# it first runs it), containerd stopped before the commit. Debian's ctr (containerd 1.6) has no
# --label, so the images are not pinned; kind's kubelet never collects images (its threshold is
# 100%). Every step is checked here: a function run by `quietly` is not stopped by `set -e`.
import_images_into() {
  local build="$1" _ image imported
  shift
  docker_cli exec -d "$build" containerd || return 1
  for _ in $(seq 1 40); do
    docker_cli exec "$build" ctr version >/dev/null 2>&1 && break
    sleep 0.25
  done
  docker_cli save "$@" | docker_cli exec -i "$build" ctr -n k8s.io images import --no-unpack \
    --digests - || return 1
  imported="$(docker_cli exec "$build" ctr -n k8s.io images ls -q)" || return 1
  for image in "$@"; do
    grep -qxF "$image" <<<"$imported" || { echo "not imported: $image" >&2; return 1; }
  done
  # shellcheck disable=SC2016 # expanded in the build container
  docker_cli exec "$build" bash -c 'for stat in /proc/[0-9]*/stat; do
    read -r pid name _ <"$stat" && [ "$name" = "(containerd)" ] && kill "$pid"; done; sleep 1'
}

# The node image's recipe: the versions, the recipes of the images it is made from, and the
# functions that make it.
node_image_recipe() {
  local tar
  {
    echo "$KIND_VERSION $KUBE_VERSION $ETCD_TAG $PAUSE_TAG $NO_STORAGE_MANIFEST $ETCD_PROBES_PATCH"
    declare -f kube_image import_images_into kind_node_image
    for tar in "$KIND_BASE_IMAGE" "$KUBE_IMAGES_BASE" "$PAUSE_IMAGE" "$COREDNS_IMAGE"; do
      cat "$(image_tar "$tar").recipe"
    done
  } | sha256sum | cut -c1-16
}

node_image_current() {
  [ "$(docker_cli image inspect -f '{{index .Config.Labels "agentrun.recipe"}}' "$KIND_NODE_IMAGE" \
    2>/dev/null)" = "$1" ]
}

kind_node_image() {
  local recipe name images build began=$SECONDS
  recipe="$(node_image_recipe)"
  start_dockerd
  node_image_current "$recipe" && return
  for name in "$PAUSE_IMAGE" "$COREDNS_IMAGE" "$KIND_BASE_IMAGE" "$KUBE_IMAGES_BASE"; do
    docker_cli image inspect "$name" >/dev/null 2>&1 \
      || quietly "docker load $name" docker_cli load -i "$(image_tar "$name")"
  done
  for name in kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do kube_image "$name"; done
  docker_cli tag "$KUBE_IMAGES_BASE" "registry.k8s.io/etcd:$ETCD_TAG"
  docker_cli tag "$COREDNS_IMAGE" "registry.k8s.io/coredns/coredns:$COREDNS_VERSION"
  docker_cli tag "$PAUSE_IMAGE" "registry.k8s.io/pause:$PAUSE_TAG"
  images=("registry.k8s.io/kube-apiserver:$KUBE_VERSION"
    "registry.k8s.io/kube-controller-manager:$KUBE_VERSION"
    "registry.k8s.io/kube-scheduler:$KUBE_VERSION" "registry.k8s.io/kube-proxy:$KUBE_VERSION"
    "registry.k8s.io/etcd:$ETCD_TAG" "registry.k8s.io/coredns/coredns:$COREDNS_VERSION"
    "registry.k8s.io/pause:$PAUSE_TAG")
  build="agentrun-kind-build-$$"
  quietly "a build container of $KIND_BASE_IMAGE" docker_cli run -d --entrypoint=sleep \
    --name="$build" --network=none --security-opt seccomp=unconfined \
    --stop-signal SIGRTMIN+3 "$KIND_BASE_IMAGE" infinity # systemd stops on it (kind's base sets it)
  for name in kubeadm kubelet kubectl; do
    docker_cli cp "$BIN_DIR/$name" "$build:/usr/bin/$name"
  done
  docker_cli exec "$build" bash -c "mkdir -p /kind/manifests $KUBEADM_PATCHES_DIR \
    && echo $KUBE_VERSION >/kind/version \
    && printf '%s\n' '$NO_STORAGE_MANIFEST' >/kind/manifests/default-storage.yaml \
    && printf '%s\n' '$ETCD_PROBES_PATCH' >$KUBEADM_PATCHES_DIR/etcd+json.yaml"
  quietly "importing ${#images[@]} images into the node's containerd" \
    import_images_into "$build" "${images[@]}"
  quietly "docker commit $KIND_NODE_IMAGE" docker_cli commit \
    --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
    --change "LABEL agentrun.recipe=$recipe" "$build" "$KIND_NODE_IMAGE"
  docker_cli rm -f "$build" >/dev/null
  echo "==> node image $KIND_NODE_IMAGE made in $((SECONDS - began))s"
}

kind_tools_main() {
  images_main
  ensure_go
  current kubeadm "$KUBE_VERSION" || build_kube_commands kubeadm
  [ -x "$BIN_DIR/kubectl" ] || build_kube_commands kubectl # the node's: the host's may be any
  go_install kind "$KIND_VERSION" "sigs.k8s.io/kind" "-s -w"
  mkdir -p "$IMAGE_DIR"
  LOG="$IMAGE_DIR/build.log"
  debian_image "$KUBE_IMAGES_BASE" iptables,conntrack,etcd-server,ca-certificates "" 'ENV LANG=C.UTF-8'
  kind_base_image
  kind_node_image
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  kind_tools_main
  stop_dockerd
fi
