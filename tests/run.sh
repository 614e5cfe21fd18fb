#!/usr/bin/env bash
# The test command (README quick start, and what .ci/run calls): sets up .venv on first use, then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m orchestrator.environment --extras test >/dev/null
exec .venv/bin/python -m pytest "$@"
