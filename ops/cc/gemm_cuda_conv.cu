// CUDA conv2d forward: the implicit im2col of x times the filter (HWIO is already [taps, out_c] row-major), its rows
// pixel-major where skipping the padding pays (gemm_cuda_padding.cuh). Its kernels also serve the stride-1 input
// gradient (gemm_cuda_input_grad.cu) and matmul, a 1 x 1 conv (below).
#include "gemm_cuda_padding.cuh"

namespace amdnn {
namespace gpu {

size_t conv2d_workspace_bytes(const ConvGeometry& g) {
  if (!conv_fits(g)) return workspace_for(g.out_pixels(), g.out_c, g.patch_size());  // conv2d refuses it
  const Im2ColPixelMajor a{
      {nullptr, geometry32(g), static_cast<int>(g.out_pixels()), static_cast<int>(g.patch_size())}};
  return padded_workspace_for(a, g.out_pixels(), g.out_c, g.patch_size());
}

LaunchStatus conv2d(const GpuMultiplier& mult, const ConvGeometry& g, const float* x, const float* w, float* y,
                    void* workspace, cudaStream_t stream) {
  if (!conv_fits(g)) return {false, kTooLarge};
  const int rows = static_cast<int>(g.out_pixels()), taps = static_cast<int>(g.patch_size());
  const Im2Col a{x, geometry32(g), rows, taps};
  const DenseAlongOuter b{w, static_cast<int>(g.out_c), taps, static_cast<int>(g.out_c)};
  const PixelMajorRows pixel_major_rows{a.g.batch, a.g.out_h * a.g.out_w, a.g.out_c};
  return launch_skipping_padding<Im2ColPixelMajor>(mult, a, b, g.out_pixels(), g.out_c, g.patch_size(), y, workspace,
                                                   stream, pixel_major_rows);
}

namespace {

// A matmul as a 1 x 1 conv: m images of one pixel of k channels (a [m, k] is their NHWC tensor), b [k, n] the HWIO
// filter, c [m, n] the output. Im2Col reads a as a dense [m, k] loader would, the products in the same k order with
// the same k slices (nothing is padding: pixel_major_plan never pays), so the same bits as a dense [m, k] loader of its
// own would give, without its 19 kernel instantiations; a misaligned matmul takes the forward's single-load kernel
// of its mode rather than the generic kernel of every mode.
ConvGeometry matmul_geometry(int64_t m, int64_t n, int64_t k) {
  ConvGeometry g{};
  g.batch = m;
  g.in_h = g.in_w = g.filter_h = g.filter_w = g.out_h = g.out_w = 1;
  g.in_c = k;
  g.out_c = n;
  g.stride_h = g.stride_w = g.dilation_h = g.dilation_w = 1;
  return g;
}

// Transposes `operand`, stored [rows, cols], into the workspace at `scratch` and points `operand` at the copy and
// `scratch` past it (256-byte aligned). Nothing for an empty operand.
LaunchStatus transposed_copy(const float*& operand, int64_t rows, int64_t cols, char*& scratch, cudaStream_t stream) {
  if (rows * cols == 0) return {};
  float* copy = reinterpret_cast<float*>(scratch);
  const LaunchStatus s = transpose_matrices(operand, 1, rows, cols, copy, stream);
  operand = copy;
  scratch += aligned256(rows * cols * sizeof(float));
  return s;
}

}  // namespace

// Transposed operands are first transposed into the workspace (transpose_matrices: one pass over a small matrix), so
// one loader pair serves all four forms.
size_t matmul_workspace_bytes(int64_t m, int64_t n, int64_t k, bool transpose_a, bool transpose_b) {
  return (transpose_a ? aligned256(m * k * sizeof(float)) : 0) + (transpose_b ? aligned256(k * n * sizeof(float)) : 0) +
         conv2d_workspace_bytes(matmul_geometry(m, n, k));
}

LaunchStatus matmul(const GpuMultiplier& mult, const float* a, const float* b, float* c, int64_t m, int64_t n,
                    int64_t k, bool transpose_a, bool transpose_b, void* workspace, cudaStream_t stream) {
  if (m * k > kMaxElements || k * n > kMaxElements || m * n > kMaxElements)
    return {false, "a matmul operand or result has 2^31 elements or more (the CUDA kernels index with 32 bits)"};
  char* scratch = static_cast<char*>(workspace);
  LaunchStatus s;
  if (transpose_a) s = transposed_copy(a, k, m, scratch, stream);  // a is stored [k, m]
  if (s.ok && transpose_b) s = transposed_copy(b, n, k, scratch, stream);  // b is stored [n, k]
  return s.ok ? conv2d(mult, matmul_geometry(m, n, k), a, b, c, scratch, stream) : s;
}

}  // namespace gpu
}  // namespace amdnn

AMDNN_GPU_PATH_COUNTS(conv)
