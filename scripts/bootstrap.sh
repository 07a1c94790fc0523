#!/usr/bin/env bash
# Create .venv with everything the workbook needs (idempotent: a stamp newer than the requirement
# files means it is done). Used by run_all.sh and run_tests.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# the offline widget renderer of the HTML reports (npm, into data/cache/npm/); quick when present, never fails
bash scripts/fetch_widget_embed.sh
stamp=.venv/.bootstrapped
if [[ -f $stamp && $stamp -nt requirements.txt && $stamp -nt requirements-data.txt && $stamp -nt pyproject.toml ]]; then
  exit 0
fi
echo "bootstrapping .venv (first run: a few minutes)"
[[ -x .venv/bin/python ]] || python3 -m venv .venv
# pip's noise about this machine's absent local indexes is filtered; a failing pip still stops the script
quiet() { "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }; }
quiet .venv/bin/pip install -q --upgrade pip
quiet .venv/bin/pip install -q -r requirements.txt
quiet .venv/bin/pip install -q --no-deps -r requirements-data.txt
quiet .venv/bin/pip install -q --no-deps -e .
touch "$stamp"
