// CUDA conv2d filter gradient: dw = im2col(x)^T (*) dy, x the left operand of every product. K (all output
// pixels) is long and the output small, so K is cut into slices fixed by the shapes and the slices added in order.
// K lies pixel-major where skipping the padding pays (gemm_cuda_padding.cuh), image by image otherwise.
#include "gemm_cuda_padding.cuh"

namespace amdnn {
namespace gpu {

size_t conv2d_backprop_filter_workspace_bytes(const ConvGeometry& g) {
  if (!conv_fits(g)) return workspace_for(g.patch_size(), g.out_c, g.out_pixels());  // the filter gradient refuses it
  const Im2ColTransposedSkippingPadding a{{{nullptr, geometry32(g), static_cast<int>(g.out_pixels()),
                                            static_cast<int>(g.patch_size())}}};
  return padded_workspace_for(a, g.patch_size(), g.out_c, g.out_pixels());
}

LaunchStatus conv2d_backprop_filter(const GpuMultiplier& mult, const ConvGeometry& g, const float* x, const float* dy,
                                    float* dw, void* workspace, cudaStream_t stream) {
  if (!conv_fits(g)) return {false, kTooLarge};
  const int pixels = static_cast<int>(g.out_pixels()), taps = static_cast<int>(g.patch_size());
  const Im2ColTransposed a{x, geometry32(g), pixels, taps};
  const Im2ColTransposedSkippingPadding skipping{{a}};
  const PixelMajorPlan plan = pixel_major_plan(skipping, g.patch_size(), g.out_c, g.out_pixels());
  if (plan.pays) {
    const DyByPixel b{dy, a.g.batch, a.g.out_h * a.g.out_w, a.g.out_c};
    if (a.vector_ok() && b.vector_ok())
      return launch(mult, skipping, b, g.patch_size(), g.out_c, g.out_pixels(), dw, workspace, stream, DenseRows{-1},
                    &plan.split);
    return launch(mult, Im2ColTransposedByPixel{a}, b, g.patch_size(), g.out_c, g.out_pixels(), dw, workspace, stream,
                  DenseRows{-1}, &plan.split);
  }
  const DenseAlongOuter b{dy, static_cast<int>(g.out_c), pixels, static_cast<int>(g.out_c)};
  return launch(mult, a, b, g.patch_size(), g.out_c, g.out_pixels(), dw, workspace, stream);
}

}  // namespace gpu
}  // namespace amdnn

AMDNN_GPU_PATH_COUNTS(filter_grad)
