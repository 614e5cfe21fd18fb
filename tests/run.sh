#!/usr/bin/env bash
# The test command (README quick start, and what .ci/run calls): sets up .venv on first use, then runs every test.
# As root with apt, it also installs the system data the tests read (Debian's Fashion-MNIST); the cluster tests
# install and start their own Slurm (tests/cluster/).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! dpkg -s dataset-fashion-mnist >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist) >/dev/null \
    || echo "tests/run.sh: could not install dataset-fashion-mnist; its loader test will say so" >&2
fi
python3 -m orchestrator.environment --extras test >/dev/null
exec .venv/bin/python -m pytest "$@"
