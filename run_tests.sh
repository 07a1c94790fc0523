#!/usr/bin/env bash
# The test command (CI runs exactly this): bootstraps .venv if needed, then runs pytest.
# Extra arguments go to pytest, e.g. ./run_tests.sh -m "not slow" for the fast unit tests only.
set -euo pipefail
cd "$(dirname "$0")"
./scripts/bootstrap.sh
exec .venv/bin/python -m pytest -q "$@"
