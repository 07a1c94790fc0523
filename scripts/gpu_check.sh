#!/usr/bin/env bash
# The GPU checklist (README "Your own pair"): on a CUDA machine, greedy lossless in bfloat16 and float32 and the
# speed table for one pair, each as JSON in figures/gpu_check/, summarised into figures/gpu_check/summary.json,
# which RESULTS.md renders. Usage: scripts/gpu_check.sh [PAIR] [PROMPTS]   (default: smollm2-edd, 20+20 prompts)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
PY=.venv/bin/python
PAIR=${1:-smollm2-edd}
PROMPTS=${2:-mtbench:20+humaneval:20}
OUT=figures/gpu_check
$PY -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else "no CUDA device: the GPU checklist needs one")'
mkdir -p "$OUT"
STRATEGIES="chain:k=2 chain:k=5 eagle2:K=8,d_max=6,N=32 dyspec:m=32,K=8,d_max=8 sequoia:n=32 pct:k=5,d_max=10"
status=0
for dtype in bfloat16 float32; do
  $PY -m spectree lossless --pair "$PAIR" --dtype "$dtype" --device cuda --kernels stock --prompts "$PROMPTS" \
    --max-new-tokens 64 --strategies $STRATEGIES --json "$OUT/lossless-$dtype.json" || status=1
done
$PY -m spectree bench --pair "$PAIR" --dtype bfloat16 --device cuda --kernels stock --prompts "$PROMPTS" \
  --max-new-tokens 128 --strategies ar $STRATEGIES --json "$OUT/bench.json"
$PY -m spectree.reports.gpu_check "$OUT"
exit $status
