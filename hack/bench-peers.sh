#!/usr/bin/env bash
# Runs bench/peers.py (our checkpoints against LangGraph's checkpointers) in a virtualenv of its
# own, so LangGraph never becomes a dependency of the project or of the main dev environment.
# The venv is created once under ${XDG_CACHE_HOME:-$HOME/.cache}/agentrun/bench-peers-venv and
# reused while the pins below (and pyproject.toml) are unchanged: a stamp file holds them.
# It runs the whole-run comparison, `python -m bench.peers_run` (a booking run through AgentRunner
# against the same run in a LangGraph graph); `--per-boundary` as the first argument runs the
# per-boundary one, `python -m bench.peers`, instead. The other arguments are passed on (try
# --help, --quick). The checkout's own `operator/` comes first on PYTHONPATH, so the venv's
# editable install of whichever checkout made it is never what runs.
set -euo pipefail
cd "$(dirname "$0")/.."

PINS=(
  "langgraph==1.2.24"
  "langgraph-checkpoint==4.3.2"
  "langgraph-checkpoint-postgres==3.2.0"
  "langgraph-checkpoint-sqlite==3.1.2"
  "psycopg[binary]==3.3.9"
  "psycopg-pool==3.3.3"
  "aiosqlite==0.22.1"
)
VENV="${XDG_CACHE_HOME:-$HOME/.cache}/agentrun/bench-peers-venv"
STAMP="$VENV/.agentrun-bench-peers-stamp"
PYTHON="$VENV/bin/python"
WANT="$(printf '%s\n' "${PINS[@]}"; echo "pyproject.toml $(sha256sum pyproject.toml | cut -d' ' -f1)")"

fail() {
  echo "bench-peers: $*" >&2
  exit 1
}

if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  if [ ! -x "$PYTHON" ]; then
    echo "==> creating the bench-peers virtualenv: python3 -m venv $VENV"
    mkdir -p "$(dirname "$VENV")"
    python3 -m venv "$VENV" || fail "python3 -m venv $VENV failed"
  fi
  rm -f "$STAMP"
  echo "==> [$VENV] pip install -e '.[redis,postgres,dev]' (this project)"
  "$PYTHON" -m pip install --disable-pip-version-check -q -e '.[redis,postgres,dev]' \
    || fail "pip install of the project into $VENV failed (see above)"
  echo "==> [$VENV] pip install ${PINS[*]}"
  "$PYTHON" -m pip install --disable-pip-version-check -q "${PINS[@]}" \
    || fail "pip install of the LangGraph checkpointers into $VENV failed (see above)"
  "$PYTHON" -c 'import langgraph.graph, langgraph.checkpoint.postgres.aio, langgraph.checkpoint.sqlite.aio' \
    || fail "LangGraph's savers do not import in $VENV"
  echo "==> installed:"
  "$PYTHON" -m pip freeze --disable-pip-version-check | grep -i -E 'langgraph|langchain|psycopg|aiosqlite' \
    | sed 's/^/    /'
  printf '%s\n' "$WANT" >"$STAMP"
else
  echo "==> bench-peers virtualenv up to date: $VENV"
fi

MODULE=bench.peers_run
if [ "${1:-}" = "--per-boundary" ]; then
  MODULE=bench.peers
  shift
fi
export PYTHONPATH="$PWD/operator:$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" -m "$MODULE" "$@"
