#!/usr/bin/env bash
# Builds and runs the GPU check of the shared multiplier header (needs nvcc and a CUDA GPU; not part of CI).
set -euo pipefail
cd "$(dirname "$0")"
arch=${CUDA_ARCH:-sm_90}
nvcc -O2 -std=c++17 -arch="$arch" -I../../ops/cc multiplier_header_check.cu -o "${TMPDIR:-/tmp}/amdnn_header_check"
"${TMPDIR:-/tmp}/amdnn_header_check"
