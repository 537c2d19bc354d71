#!/usr/bin/env bash
# Installs everything `make test` and `make demo` need on a fresh Debian machine.
# Idempotent: every step checks first, so a second run costs seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v etcd >/dev/null || need_apt+=(etcd-server)
command -v sqlite3 >/dev/null || need_apt+=(sqlite3)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "==> apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! python3 -c 'import agentrun, pytest, redis, asyncpg, kopf' >/dev/null 2>&1 \
   || [ pyproject.toml -nt .agentrun-deps-stamp ]; then
  echo "==> pip install -e .[dev]"
  python3 -m pip install -q --disable-pip-version-check -e '.[dev]'
  touch .agentrun-deps-stamp
fi
