"""The test suite, one folder per package (tests/ops, tests/models, tests/orchestrator, ...). A package, so that a
test imports a shared helper by its full name (`from tests.ops.kernels import kernel_modes`), never a sibling test
module or a conftest; fixtures live in each folder's conftest.py."""
