// CUDA conv2d forward: the implicit im2col of x times the filter (HWIO is already [taps, out_c] row-major).
#include "gemm_cuda_kernel.cuh"

namespace amdnn {
namespace gpu {

LaunchStatus conv2d(const GpuMultiplier& mult, const ConvGeometry& g, const float* x, const float* w, float* y,
                    void* workspace, cudaStream_t stream) {
  if (!conv_fits(g)) return {false, kTooLarge};
  const int rows = static_cast<int>(g.out_pixels()), taps = static_cast<int>(g.patch_size());
  const Im2Col a{x, geometry32(g), rows, taps};
  const DenseAlongOuter b{w, static_cast<int>(g.out_c), taps, static_cast<int>(g.out_c)};
  return launch(mult, a, b, g.out_pixels(), g.out_c, g.patch_size(), y, workspace, stream);
}

}  // namespace gpu
}  // namespace amdnn

AMDNN_GPU_PATH_COUNTS(conv)
