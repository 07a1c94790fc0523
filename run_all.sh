#!/usr/bin/env bash
# Batch reproduction: every notebook through papermill with a profile's parameters, then an HTML report
# per notebook, figures/index.html and figures/RESULTS.md (the default profile also writes ./RESULTS.md).
# Usage: ./run_all.sh [--profile quick|default|paper] [--only NAME] [--force] [--pair PAIR] [--set [NOTEBOOK.]KEY=VALUE]
# --pair runs every notebook on PAIR (a named pair, a preset of params/pairs.yaml or TARGET+DRAFT, docs/pairs.md);
# a notebook that cannot apply to it says why in its summary.
# Every notebook in notebooks/ is listed here, and only those (tests/runs/test_notebooks.py checks both ways).
set -euo pipefail
cd "$(dirname "$0")"
./scripts/bootstrap.sh
NOTEBOOKS=(
  00_quickstart.ipynb
  01_train_drafts.ipynb
  02_tree_strategies.ipynb
  03_speed_benchmark.ipynb
  04_entropy_rank.ipynb
  05_calibration.ipynb
  06_acceptance_vs_probability.ipynb
  07_entropy_match.ipynb
  08_classifier_surfaces.ipynb
  09_block_sparsity.ipynb
  10_explorer.ipynb
  11_draft_quality.ipynb
  12_retrieval.ipynb
  13_engine_settings.ipynb
)
exec .venv/bin/python -m spectree.runs.runner --notebooks "${NOTEBOOKS[@]}" "$@"
