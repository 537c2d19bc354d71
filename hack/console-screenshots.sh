#!/usr/bin/env bash
# The console's screenshots in docs/ come from its browser tests (tests/kube/test_console.py),
# run against a real API server and operators, never drawn by hand: this runs them with
# AGENTRUN_SCREENSHOTS pointed at a temporary folder and copies the two the docs show.
set -euo pipefail
cd "$(dirname "$0")/.."
shots=$(mktemp -d)
trap 'rm -rf "$shots"' EXIT
AGENTRUN_SCREENSHOTS="$shots" .venv/bin/python -m pytest tests/kube/test_console.py -q -p no:cacheprovider
for name in console-inbox console-run-completed; do
  cp "$shots/$name.png" "docs/images/$name.png"
  echo "docs/images/$name.png"
done
