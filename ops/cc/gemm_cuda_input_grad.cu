// CUDA conv2d input gradient: dx = dy (*) w^T as one implicit GEMM over input pixels (no col2im, no atomics), each
// dx element one running sum over (kh, kw, co) in order; dy is the left operand of every product.
#include "gemm_cuda_kernel.cuh"

namespace amdnn {
namespace gpu {

LaunchStatus conv2d_backprop_input(const GpuMultiplier& mult, const ConvGeometry& g, const float* w, const float* dy,
                                   float* dx, void* workspace, cudaStream_t stream) {
  if (!conv_fits(g)) return {false, kTooLarge};
  const int64_t rows = g.batch * g.in_h * g.in_w, k = g.filter_h * g.filter_w * g.out_c;
  const DyGather a{dy, geometry32(g), static_cast<int>(rows), static_cast<int>(k)};
  const FilterTransposed b{w, static_cast<int>(g.in_c), static_cast<int>(g.out_c), static_cast<int>(k)};
  return launch(mult, a, b, rows, g.in_c, k, dx, workspace, stream);
}

}  // namespace gpu
}  // namespace amdnn

AMDNN_GPU_PATH_COUNTS(input_grad)
