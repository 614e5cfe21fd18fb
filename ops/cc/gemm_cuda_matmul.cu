// CUDA matmul: c [m, n] = a [m, k] (*) b [k, n]. Transposed operands are first transposed into the workspace
// (transpose_matrices: one pass over a small matrix), so one loader pair serves all four forms.
#include "gemm_cuda_kernel.cuh"

namespace amdnn {
namespace gpu {

size_t matmul_workspace_bytes(int64_t m, int64_t n, int64_t k, bool transpose_a, bool transpose_b) {
  return (transpose_a ? aligned256(m * k * sizeof(float)) : 0) + (transpose_b ? aligned256(k * n * sizeof(float)) : 0) +
         workspace_for(m, n, k);
}

LaunchStatus matmul(const GpuMultiplier& mult, const float* a, const float* b, float* c, int64_t m, int64_t n,
                    int64_t k, bool transpose_a, bool transpose_b, void* workspace, cudaStream_t stream) {
  if (m * k > kMaxElements || k * n > kMaxElements || m * n > kMaxElements)
    return {false, "a matmul operand or result has 2^31 elements or more (the CUDA kernels index with 32 bits)"};
  char* scratch = static_cast<char*>(workspace);
  if (transpose_a && m * k > 0) {  // a is stored [k, m]
    float* a_t = reinterpret_cast<float*>(scratch);
    const LaunchStatus s = transpose_matrices(a, 1, k, m, a_t, stream);
    if (!s.ok) return s;
    a = a_t;
    scratch += aligned256(m * k * sizeof(float));
  }
  if (transpose_b && k * n > 0) {  // b is stored [n, k]
    float* b_t = reinterpret_cast<float*>(scratch);
    const LaunchStatus s = transpose_matrices(b, 1, n, k, b_t, stream);
    if (!s.ok) return s;
    b = b_t;
    scratch += aligned256(k * n * sizeof(float));
  }
  const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
  return launch(mult, DenseAlongK{a, mi, ki, ki}, DenseAlongOuter{b, ni, ki, ni}, m, n, k, c, scratch, stream);
}

}  // namespace gpu
}  // namespace amdnn

AMDNN_GPU_PATH_COUNTS(matmul)
