"""Tests of ops/: the modes and their reference, the tables, the builds, both bindings' kernels. Helpers that
several test modules share: luts.py (the published tables), kernels.py (kernel modes, raw ops, single-product
checks), spec_tables.py (the spec's tables as data); level_check.py is the per-CPU-level script test_kernel_targets
runs."""
