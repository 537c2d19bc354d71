#!/usr/bin/env bash
# Makes every image the single-node cluster (hack/cluster.sh) runs, without a container registry,
# and saves each as a tarball that hack/cluster.sh loads into the node's containerd:
#   agentrun-base:bookworm      Debian 12 with Python 3.11, its venv module and tini (the
#                               operator's PID 1, the Dockerfile's entry point): mmdebstrap, then
#                               `docker import` (no base image comes from a registry)
#   agentrun-redis:bookworm     Debian 12's redis-server, made the same way (the chart's Redis;
#                               $AGENTRUN_E2E_REDIS_IMAGE names it otherwise)
#   agentrun-operator:e2e       the repository's Dockerfile on agentrun-base
#                               ($AGENTRUN_E2E_OPERATOR_IMAGE names it otherwise)
#   agentrun-pause:local        hack/images/pause, a static Go program in an empty image: the
#                               process each pod sandbox holds its namespaces with
#   agentrun-coredns:VERSION    the coredns binary hack/cluster-tools.sh builds, in an empty image
#
# Each image is rebuilt only when its recipe changes (a hash of the mmdebstrap arguments, of the
# build context, or of the binary it wraps, kept beside its tarball). When every recipe is
# unchanged this returns at once without starting Docker; otherwise it starts Debian's dockerd
# for the builds and stops it (by its pid) when done. dockerd runs with its own data root in the
# cache folder, a private socket, and --iptables=false --ip-forward=false --bridge=none, so it
# changes no firewall rule or sysctl; builds use the host's network (--network=host), BuildKit
# through Debian's docker client, and the host's CA bundle as a build secret (this network's
# egress proxy re-signs TLS, and pip must trust it). A dockerd already answering on that socket (the
# one a kind cluster runs on, hack/kind-cluster.sh) is used as it is and left running.
set -euo pipefail
# shellcheck source=hack/cluster-tools.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster-tools.sh"

CACHE_DIR="$(dirname "$BIN_DIR")"
IMAGE_DIR="$CACHE_DIR/images"
DEBIAN_SUITE=bookworm
BASE_IMAGE="agentrun-base:$DEBIAN_SUITE"
# The two images the end-to-end suite installs the chart with; the cluster scripts load them.
REDIS_IMAGE="${AGENTRUN_E2E_REDIS_IMAGE:-agentrun-redis:$DEBIAN_SUITE}"
OPERATOR_IMAGE="${AGENTRUN_E2E_OPERATOR_IMAGE:-agentrun-operator:e2e}"
PAUSE_IMAGE=agentrun-pause:local
COREDNS_IMAGE="agentrun-coredns:$COREDNS_VERSION"
CLUSTER_IMAGES=("$REDIS_IMAGE" "$OPERATOR_IMAGE" "$PAUSE_IMAGE" "$COREDNS_IMAGE")

DOCKER_RUN=/run/agentrun-docker
DOCKER=/usr/bin/docker # Debian's client: it drives dockerd's BuildKit (another on PATH may not)
CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt
DOCKERD_PID=""

# The tarball an image is saved to, and the recipe stamp beside it.
image_tar() { echo "$IMAGE_DIR/${1//[:\/]/_}.tar"; }
image_current() { [ -s "$(image_tar "$1")" ] && [ "$(cat "$(image_tar "$1").recipe" 2>/dev/null)" = "$2" ]; }

docker_cli() { DOCKER_HOST="unix://$DOCKER_RUN/docker.sock" DOCKER_BUILDKIT=1 "$DOCKER" "$@"; }

docker_answers() { docker_cli version >/dev/null 2>&1; }

# A dockerd for this script's builds, stopped when it exits (unless one already answers).
start_dockerd() {
  [ -n "$DOCKERD_PID" ] && return
  docker_answers && return
  launch_dockerd
  trap stop_dockerd EXIT
}

# Starts dockerd in its own session (arguments added to its own) and waits until it answers; its
# pid is in DOCKERD_PID.
launch_dockerd() {
  mkdir -p "$DOCKER_RUN" "$CACHE_DIR/docker"
  echo "==> starting dockerd (data root $CACHE_DIR/docker; no firewall rules, no bridge)"
  setsid dockerd --data-root "$CACHE_DIR/docker" --exec-root "$DOCKER_RUN/exec" \
    --pidfile "$DOCKER_RUN/dockerd.pid" --host "unix://$DOCKER_RUN/docker.sock" \
    --storage-driver=overlay2 --iptables=false --ip-forward=false --ip-masq=false \
    --bridge=none --userland-proxy=false "$@" </dev/null >"$DOCKER_RUN/dockerd.log" 2>&1 &
  DOCKERD_PID=$!
  local _
  for _ in $(seq 1 120); do
    docker_answers && return
    kill -0 "$DOCKERD_PID" 2>/dev/null || break
    sleep 0.25
  done
  tail -n 40 "$DOCKER_RUN/dockerd.log" >&2
  echo "==> FAILED: dockerd did not start (log: $DOCKER_RUN/dockerd.log)" >&2
  exit 1
}

stop_dockerd() {
  [ -n "$DOCKERD_PID" ] || return 0
  kill -TERM "$DOCKERD_PID" 2>/dev/null || true
  wait "$DOCKERD_PID" 2>/dev/null || true
  DOCKERD_PID=""
}

# docker save of a built image into its tarball, then the recipe stamp (last: a tarball without
# its stamp is stale).
save_image() {
  local image="$1" recipe="$2" tar
  tar="$(image_tar "$image")"
  quietly "docker save $image" docker_cli save -o "$tar.tmp" "$image"
  mv "$tar.tmp" "$tar"
  echo "$recipe" >"$tar.recipe"
}

# A Debian root file system made by mmdebstrap from the host's apt sources, imported as an image.
# $3 is a shell command run on the finished tree (mmdebstrap's customize hook, the tree as "$1"),
# the rest are `docker import --change` instructions.
debian_image() {
  local image="$1" packages="$2" hook="$3" changes=("${@:4}") recipe tmp sources
  recipe="$(printf '%s\n' "mmdebstrap --variant=minbase $DEBIAN_SUITE" "$packages" "$hook" \
    "${changes[@]}" | sha256sum | cut -c1-16)"
  image_current "$image" "$recipe" && return
  start_dockerd
  tmp="$(mktemp -d)"
  sources=/etc/apt/sources.list.d/debian.sources
  [ -f "$sources" ] || sources=/etc/apt/sources.list
  quietly "mmdebstrap $DEBIAN_SUITE with $packages (a minute or two, once)" \
    mmdebstrap --variant=minbase --include="$packages" --customize-hook="${hook:-true}" \
    "$DEBIAN_SUITE" "$tmp/rootfs.tar" "$sources"
  local change args=()
  for change in "${changes[@]}"; do args+=(--change "$change"); done
  quietly "docker import $image" docker_cli import "${args[@]}" "$tmp/rootfs.tar" "$image"
  rm -rf "$tmp"
  save_image "$image" "$recipe"
}

# An image holding one static binary and nothing else.
scratch_image() {
  local image="$1" binary="$2" recipe="$3" tmp
  image_current "$image" "$recipe" && return
  start_dockerd
  tmp="$(mktemp -d)"
  cp "$binary" "$tmp/$(basename "$binary")"
  printf 'FROM scratch\nCOPY %s /%s\nENTRYPOINT ["/%s"]\n' "$(basename "$binary")" \
    "$(basename "$binary")" "$(basename "$binary")" >"$tmp/Dockerfile"
  quietly "docker build $image" docker_cli build --network=host -t "$image" "$tmp"
  rm -rf "$tmp"
  save_image "$image" "$recipe"
}

pause_image() {
  local source=hack/images/pause/main.go recipe
  recipe="$(sha256sum "$source" | cut -c1-16)"
  image_current "$PAUSE_IMAGE" "$recipe" && return
  quietly "go build hack/images/pause" env CGO_ENABLED=0 GOTOOLCHAIN=local GO111MODULE=off \
    nice -n 10 go build -trimpath -ldflags "-s -w" -o "$IMAGE_DIR/pause" "$source"
  scratch_image "$PAUSE_IMAGE" "$IMAGE_DIR/pause" "$recipe"
}

# The build context as the Dockerfile sees it (.dockerignore's list), hashed: the image is rebuilt
# exactly when one of those files changes.
operator_recipe() {
  {
    echo "$BASE_IMAGE $(cat "$(image_tar "$BASE_IMAGE").recipe")"
    tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
      --exclude=__pycache__ --exclude='*.pyc' --exclude='*.egg-info' \
      -cf - Dockerfile .dockerignore pyproject.toml README.md operator
  } | sha256sum | cut -c1-16
}

operator_image() {
  local recipe
  recipe="$(operator_recipe)"
  image_current "$OPERATOR_IMAGE" "$recipe" && return
  start_dockerd
  # A Docker data root lost since the base was made: its tarball has it.
  docker_cli image inspect "$BASE_IMAGE" >/dev/null 2>&1 \
    || quietly "docker load $BASE_IMAGE" docker_cli load -i "$(image_tar "$BASE_IMAGE")"
  quietly "docker build $OPERATOR_IMAGE from the Dockerfile on $BASE_IMAGE" \
    docker_cli build --network=host --build-arg "BASE_IMAGE=$BASE_IMAGE" \
    --secret "id=ca-certificates,src=$CA_BUNDLE" -t "$OPERATOR_IMAGE" .
  save_image "$OPERATOR_IMAGE" "$recipe"
}

images_main() {
  cluster_tools_main
  mkdir -p "$IMAGE_DIR"
  LOG="$IMAGE_DIR/build.log"
  debian_image "$BASE_IMAGE" python3,python3-venv,ca-certificates,tini "" 'ENV LANG=C.UTF-8'
  debian_image "$REDIS_IMAGE" redis-server 'mkdir -p "$1/data"' 'WORKDIR /data' 'USER 999:999' \
    'ENTRYPOINT ["redis-server", "--protected-mode", "no"]'
  operator_image
  pause_image
  scratch_image "$COREDNS_IMAGE" "$BIN_DIR/coredns" "$COREDNS_VERSION"
  stop_dockerd
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then images_main; fi
