// CUDA conv2d filter gradient: dw = im2col(x)^T (*) dy, x the left operand of every product. K (all output
// pixels) is long and the output small, so K is cut into slices fixed by the shapes and the slices added in order.
#include "gemm_cuda_kernel.cuh"

namespace amdnn {
namespace gpu {

LaunchStatus conv2d_backprop_filter(const GpuMultiplier& mult, const ConvGeometry& g, const float* x, const float* dy,
                                    float* dw, void* workspace, cudaStream_t stream) {
  if (!conv_fits(g)) return {false, kTooLarge};
  const int pixels = static_cast<int>(g.out_pixels()), taps = static_cast<int>(g.patch_size());
  const Im2ColTransposed a{x, geometry32(g), pixels, taps};
  const DenseAlongOuter b{dy, static_cast<int>(g.out_c), pixels, static_cast<int>(g.out_c)};
  return launch(mult, a, b, g.patch_size(), g.out_c, g.out_pixels(), dw, workspace, stream);
}

}  // namespace gpu
}  // namespace amdnn

AMDNN_GPU_PATH_COUNTS(filter_grad)
