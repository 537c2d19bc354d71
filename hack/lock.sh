#!/usr/bin/env bash
# Regenerates constraints.txt, the lock every `make deps` installs with: the newest versions
# within pyproject.toml's ranges, resolved in a throwaway virtualenv so the project's own .venv
# and the system interpreter are untouched. Review the diff, then commit it.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "==> resolving .[dev] afresh in $tmp/venv"
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check -e '.[dev]'
{
  echo "# The lock: exact versions of everything .[dev] installs, made by \`make lock\` (hack/lock.sh)."
  echo "# hack/install-deps.sh installs with \`pip install -c constraints.txt\`."
  echo "# zstandard writes and reads SegmentForm.ZSTD transcript segments (pyproject.toml says why"
  echo "# its range stops at the next 0.x minor)."
  echo "# ahocorasick-rs finds the literals that gate redaction's rules (pyproject.toml says why,"
  echo "# and why its range stops at 2)."
  "$tmp/venv/bin/python" -m pip freeze --disable-pip-version-check --exclude-editable
} >constraints.txt
echo "==> constraints.txt: $(grep -vc '^#' constraints.txt) pins"
