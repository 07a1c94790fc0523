#!/usr/bin/env bash
# The GPU checklist (README "Your own pair"; lib/spectree/gpu/gpu_check.py): on a bare, offline CUDA machine,
# greedy lossless in bf16 and fp32 for every policy family and retrieval mode, the GPU cost model of three target
# shapes and a speed table, on random-weight pairs built there; at most 8 files in one folder, which RESULTS.md
# renders. No pip, no download, no .venv needed: it runs on whatever Python has torch, with lib/ on the path.
# Usage: scripts/gpu_check.sh [--dry-run] [--device cpu|cuda] [--out DIR] [--summarize]
#        (--dry-run: the same steps on the CPU at tiny shapes, into figures/gpu_check-dry-run/)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-}
if [[ -z $PY ]]; then
  for candidate in .venv/bin/python python3 python; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import torch' >/dev/null 2>&1; then
      PY=$candidate
      break
    fi
  done
fi
[[ -n $PY ]] || { echo "gpu_check: error: no Python here imports torch (set PYTHON=/path/to/python)" >&2; exit 2; }
export PYTHONPATH="$PWD/lib${PYTHONPATH:+:$PYTHONPATH}"
exec "$PY" -m spectree.gpu.gpu_check "$@"
