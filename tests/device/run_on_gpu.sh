#!/usr/bin/env bash
# The GPU checks (need nvcc, a CUDA GPU and torch with CUDA; not part of CI, which has no GPU):
# 1. the shared multiplier header, host against device bits (multiplier_header_check.cu);
# 2. the launch rule: programmatic launches only for code compiled from compute_90+ PTX (programmatic_launch_check.cu,
#    built as a multi-architecture library builds it, from compute_80 PTX, and from the GPU's own);
# 3. the CUDA kernels through the PyTorch binding (test_gpu_ops.py), built on first use.
#     bash tests/device/run_on_gpu.sh [pytest arguments]
# The binding is built by $CXX (else g++). A toolchain whose C++ exceptions cannot unwind into torch (the lent GPU
# machines set CXX to a wrapper of a relocated GCC 13.3 that does this) fails test_raw_op_errors_raise_in_python and
# the bad-input tests: run with CXX=/usr/bin/g++ there.
set -euo pipefail
cd "$(dirname "$0")"
arch=${CUDA_ARCH:-sm_90}
nvcc -O2 -std=c++17 -arch="$arch" -I../../ops/cc multiplier_header_check.cu -o "${TMPDIR:-/tmp}/amdnn_header_check"
"${TMPDIR:-/tmp}/amdnn_header_check"
for gencode in "arch=compute_80,code=$arch" "arch=compute_${arch#sm_},code=$arch"; do
  nvcc -std=c++17 -gencode "$gencode" -I../../ops/cc programmatic_launch_check.cu -o "${TMPDIR:-/tmp}/amdnn_pdl_check"
  "${TMPDIR:-/tmp}/amdnn_pdl_check"
done
cd ../..
AMDNN_DEVICE_TESTS=1 python3 -m pytest -p no:cacheprovider tests/device "$@"
