#!/usr/bin/env bash
# Installs everything `make test` and `make demo` need on a fresh Debian machine, one line of
# progress per stage. Idempotent: every step checks first, so a second run costs about a second.
#
#   Debian packages  redis-server, etcd-server, sqlite3, postgresql, python3-venv, golang-go, tini,
#                    chromium-headless-shell (the console's browser tests)
#   Go toolchain     Debian's `go` fetches the version hack/kube/go.mod asks for through the Go
#                    module proxy (GOTOOLCHAIN=auto), so an old Debian Go is enough
#   .venv            the project's own virtualenv in the checkout, made with `python3 -m venv`;
#                    the project and its dev tools are installed there, pinned by constraints.txt.
#                    The system interpreter is never written to.
#
# VENV overrides the virtualenv's folder (default: .venv in the checkout).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV="${VENV:-.venv}"
PYTHON="$VENV/bin/python"
STAMP="$VENV/.agentrun-deps-stamp"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v etcd >/dev/null || need_apt+=(etcd-server)
command -v sqlite3 >/dev/null || need_apt+=(sqlite3)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
command -v go >/dev/null || need_apt+=(golang-go)
# The image's PID 1: tests/kube/test_operator_start_stop.py runs the chart's command as it.
command -v tini >/dev/null || need_apt+=(tini)
# The console's browser tests (tests/console) drive Debian's headless Chromium with Playwright.
command -v chromium-headless-shell >/dev/null || need_apt+=(chromium-headless-shell)
# `python3 -m venv` needs ensurepip, which Debian ships apart from python3 (python3-venv).
if [ ! -x "$PYTHON" ] && ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  need_apt+=(python3-venv)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "==> apt-get install ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x "$PYTHON" ]; then
  echo "==> python3 -m venv $VENV ($(python3 --version 2>&1))"
  python3 -m venv "$VENV"
fi

# Reinstall when what decides the environment changed: the package metadata or the lock.
want="$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$want" ] || ! "$PYTHON" -c 'import agentrun' 2>/dev/null; then
  echo "==> $VENV: pip install -e .[dev] -c constraints.txt"
  "$PYTHON" -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[dev]'
  echo "$want" >"$STAMP"
fi
