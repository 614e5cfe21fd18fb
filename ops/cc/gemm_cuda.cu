// The CUDA core's shared entry points: workspace sizes of the forward and filter-gradient convolutions, and the
// path counters of all op files.
#include "gemm_cuda_padding.cuh"

namespace amdnn {
namespace gpu {

PathCounts path_counts_conv();
PathCounts path_counts_input_grad();
PathCounts path_counts_filter_grad();
PathCounts path_counts_matmul();

size_t conv2d_workspace_bytes(const ConvGeometry& g) {
  if (!conv_fits(g)) return workspace_for(g.out_pixels(), g.out_c, g.patch_size());  // conv2d refuses it
  const Im2ColPixelMajor a{
      {nullptr, geometry32(g), static_cast<int>(g.out_pixels()), static_cast<int>(g.patch_size())}};
  return padded_workspace_for(a, g.out_pixels(), g.out_c, g.patch_size());
}

size_t conv2d_backprop_filter_workspace_bytes(const ConvGeometry& g) {
  if (!conv_fits(g)) return workspace_for(g.patch_size(), g.out_c, g.out_pixels());  // the filter gradient refuses it
  const Im2ColTransposedSkippingPadding a{{{nullptr, geometry32(g), static_cast<int>(g.out_pixels()),
                                            static_cast<int>(g.patch_size())}}};
  return padded_workspace_for(a, g.patch_size(), g.out_c, g.out_pixels());
}

PathCounts path_counts() {
  PathCounts total;
  for (const PathCounts& c : {path_counts_conv(), path_counts_input_grad(), path_counts_filter_grad(),
                              path_counts_matmul()}) {
    total.fast += c.fast;
    total.generic += c.generic;
  }
  return total;
}

}  // namespace gpu
}  // namespace amdnn
