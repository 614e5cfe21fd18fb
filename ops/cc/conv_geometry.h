// The geometry of an NHWC conv2d with an HWIO filter: what the CPU GEMM, the CUDA core and every binding share.
#ifndef AMDNN_OPS_CC_CONV_GEOMETRY_H_
#define AMDNN_OPS_CC_CONV_GEOMETRY_H_

#include <cstdint>

namespace amdnn {

// Sizes, strides, dilations and the padding before each spatial axis (the padding after follows from out_h/out_w).
struct ConvGeometry {
  int64_t batch, in_h, in_w, in_c;
  int64_t filter_h, filter_w, out_c;
  int64_t stride_h, stride_w, dilation_h, dilation_w;
  int64_t pad_top, pad_left;
  int64_t out_h, out_w;
  int64_t patch_size() const { return filter_h * filter_w * in_c; }  // K of the forward GEMM
  int64_t out_pixels() const { return batch * out_h * out_w; }       // M of the forward GEMM
};

}  // namespace amdnn

#endif  // AMDNN_OPS_CC_CONV_GEOMETRY_H_
