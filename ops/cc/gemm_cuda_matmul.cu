// CUDA matmul: c [m, n] = a [m, k] (*) b [k, n]. Transposed operands are first transposed into the workspace by a
// tiled copy (one pass over a small matrix), so one loader pair serves all four forms.
#include "gemm_cuda_kernel.cuh"

namespace amdnn {
namespace gpu {
namespace {

// out [cols, rows] = in [rows, cols]^T through a 32 x 33 shared tile (coalesced both ways, no bank conflicts).
__global__ void transpose_kernel(const float* in, int rows, int cols, float* out) {
  __shared__ float tile[32][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  for (int r = blockIdx.y * 32 + threadIdx.y; r < min(rows, blockIdx.y * 32 + 32); r += 8)
    if (c < cols) tile[r - blockIdx.y * 32][threadIdx.x] = in[static_cast<long long>(r) * cols + c];
  __syncthreads();
  const int r_out = blockIdx.y * 32 + threadIdx.x;
  for (int c_out = blockIdx.x * 32 + threadIdx.y; c_out < min(cols, blockIdx.x * 32 + 32); c_out += 8)
    if (r_out < rows) out[static_cast<long long>(c_out) * rows + r_out] = tile[threadIdx.x][c_out - blockIdx.x * 32];
}

LaunchStatus transpose(const float* in, int64_t rows, int64_t cols, float* out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>((rows + 31) / 32));
  transpose_kernel<<<grid, dim3(32, 8), 0, stream>>>(in, static_cast<int>(rows), static_cast<int>(cols), out);
  const cudaError_t status = cudaGetLastError();
  return status == cudaSuccess ? LaunchStatus{} : LaunchStatus{false, cudaGetErrorString(status)};
}

}  // namespace

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
    const LaunchStatus s = transpose(a, k, m, a_t, stream);
    if (!s.ok) return s;
    a = a_t;
    scratch += aligned256(m * k * sizeof(float));
  }
  if (transpose_b && k * n > 0) {  // b is stored [n, k]
    float* b_t = reinterpret_cast<float*>(scratch);
    const LaunchStatus s = transpose(b, n, k, b_t, stream);
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
