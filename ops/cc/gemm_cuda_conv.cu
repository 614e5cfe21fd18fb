// CUDA conv2d forward: the implicit im2col of x times the filter (HWIO is already [taps, out_c] row-major), its rows
// pixel-major where skipping the padding pays (gemm_cuda_padding.cuh).
#include "gemm_cuda_padding.cuh"

namespace amdnn {
namespace gpu {

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

}  // namespace gpu
}  // namespace amdnn

AMDNN_GPU_PATH_COUNTS(conv)
