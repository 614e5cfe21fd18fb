#!/usr/bin/env bash
# The test command (README quick start, and what .ci/run calls): sets up .venv on first use, then runs every test.
# As root with apt, it also installs the system data the tests read (Debian's Fashion-MNIST); the cluster tests
# install the Slurm packages if missing and start a private Slurm (configuration, state and database under
# /var/lib/amdnn-test-slurm, free ports, SLURM_CONF) beside any Slurm the machine has, without writing to /etc, and
# stop it at the end (tests/cluster/slurm_cluster.py). AMDNN_TEST_SLURM=system runs them on the machine's own Slurm.
# The dashboard test needs Debian's chromium and chromium-driver: installed here as root, else the run stops saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! dpkg -s dataset-fashion-mnist >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist) >/dev/null \
    || echo "tests/run.sh: could not install dataset-fashion-mnist; its loader test will say so" >&2
fi
# The dashboard test drives Debian's chromium through chromium-driver (tests/dashboard/test_dashboard_browser.py).
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >/dev/null \
      || { echo "tests/run.sh: installing chromium and chromium-driver failed; the dashboard test needs them" >&2; exit 1; }
  else
    echo "tests/run.sh: chromium and chromium-driver are missing; as root: apt-get install chromium chromium-driver" >&2
    exit 1
  fi
fi
python3 -m orchestrator.environment --extras test >/dev/null
# Two workers (pytest-xdist): one alone left a third of CI's 2 cores idle while tests waited on schedulers and
# subprocesses (50 min at 62 % busy; 34 min on two). A folder or file goes to one worker whole (tests/conftest.py).
# AMDNN_TEST_WORKERS=0 runs in this process, for a debugger or -x.
exec .venv/bin/python -m pytest -n "${AMDNN_TEST_WORKERS:-2}" "$@"
