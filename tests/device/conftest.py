"""tests/device runs on a GPU machine only (tests/device/run_on_gpu.sh sets AMDNN_DEVICE_TESTS=1); the CPU suite
and CI, which have no GPU, do not collect it."""

import os

collect_ignore_glob = [] if os.environ.get("AMDNN_DEVICE_TESTS") == "1" else ["test_*.py"]
