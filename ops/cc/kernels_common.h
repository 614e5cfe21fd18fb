// The TensorFlow OpKernels of the ops, shared by every device: attributes, argument and shape checks, the conv
// geometry (TF's SAME/VALID rules) and their error messages, written once. Each op is a class template over a
// Backend, the device-specific part: kernels_cpu.cc (CpuBackend, the CPU ops of conv_cpu.h) and kernels_gpu.cc
// (GpuBackend, the CUDA core of gemm_cuda.h) instantiate and register them.
//
// A Backend is an object held by each kernel (it may keep state, e.g. a device copy of the table) with:
//   using Multiplier = ...;   what its launches read
//   bool load_multiplier(const OpKernel& op, OpKernelContext* ctx, Mode mode, const Tensor& table, Multiplier* out);
//       false after failing ctx with the error of make_multiplier (multiplier_setup.h), prefixed by the op's name
//   void conv2d(ctx, mult, g, x, w, y);  conv2d_backprop_input(ctx, mult, g, w, dy, dx);
//   void conv2d_backprop_filter(ctx, mult, g, x, dy, dw);  matmul(ctx, mult, a, b, c, m, n, k, ta, tb);
//       on the device's memory; a failed launch fails ctx
//   void int_conv2d(ctx, g, x, w, args, y);   the integer op (integer_conv.h), for IntConv2DOp
//   void quantise(ctx, x, count, args, codes, in_range);   the integer modes' quantiser (integer_quantise.h)
//   void finite_range(ctx, x, count, channels, lo, hi, finite);   the ranges its scales come from (the same header)
#ifndef AMDNN_OPS_CC_KERNELS_COMMON_H_
#define AMDNN_OPS_CC_KERNELS_COMMON_H_

#include <algorithm>
#include <string>
#include <vector>

#include "conv_geometry.h"
#include "integer_conv.h"
#include "integer_quantise.h"
#include "multiplier_setup.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace amdnn {
namespace kernels {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Status;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
namespace errors = ::tensorflow::errors;

// Fails ctx with the problem make_multiplier reported (if any), as every backend words it; true when there was none.
inline bool multiplier_ok(const OpKernel& op, OpKernelContext* ctx, const std::string& problem) {
  if (problem.empty()) return true;
  ctx->CtxFailure(__FILE__, __LINE__, errors::InvalidArgument(op.name(), ": ", problem));
  return false;
}

// What every op shares: the multiplier attribute, and the backend that loads the table input and launches.
template <typename Backend>
class AmdnnKernel : public OpKernel {
 public:
  explicit AmdnnKernel(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("multiplier", &multiplier_name_));
    OP_REQUIRES(ctx, parse_mode(multiplier_name_, &mode_),
                errors::InvalidArgument("unknown multiplier '", multiplier_name_, "'; valid: ", valid_mode_names()));
  }

 protected:
  // The multiplier from the table input (checked: empty, or 4^m bytes for the table mode).
  bool load_multiplier(OpKernelContext* ctx, const Tensor& table, typename Backend::Multiplier* out) {
    return backend_.load_multiplier(*this, ctx, mode_, table, out);
  }

  Backend backend_;
  Mode mode_;
  std::string multiplier_name_;
};

// ------------------------------------------------------------------------------------------------ conv2d

inline Status read_sizes(const char* op, const Tensor& sizes, TensorShape* shape) {
  if (sizes.dims() != 1 || sizes.NumElements() != 4)
    return errors::InvalidArgument(op, ": sizes must be a 4-element int32 vector, got shape ", sizes.shape().DebugString());
  const auto v = sizes.vec<int32_t>();
  for (int i = 0; i < 4; ++i)
    if (v(i) < 0) return errors::InvalidArgument(op, ": sizes must be non-negative, got ", v(i), " at ", i);
  *shape = TensorShape({v(0), v(1), v(2), v(3)});
  return Status();
}

inline Status check_out_backprop(const char* op, const TensorShape& expected, const Tensor& dy) {
  if (dy.shape() != expected)
    return errors::InvalidArgument(op, ": out_backprop has shape ", dy.shape().DebugString(),
                                   " but the conv's output shape is ", expected.DebugString());
  return Status();
}

// The conv attributes (strides, dilations, padding) and the geometry they give, with TF's SAME/VALID rules and
// errors naming both shapes: what the float ops and the integer op share.
class ConvAttrs {
 public:
  explicit ConvAttrs(OpKernelConstruction* ctx) : name_(ctx->def().name()) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("strides", &strides_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("dilations", &dilations_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("padding", &padding_));
    OP_REQUIRES(ctx, strides_.size() == 2 && strides_[0] >= 1 && strides_[1] >= 1,
                errors::InvalidArgument(name_, ": strides must be 2 positive integers [h, w], got ",
                                        strides_.size(), " values"));
    OP_REQUIRES(ctx, dilations_.size() == 2 && dilations_[0] >= 1 && dilations_[1] >= 1,
                errors::InvalidArgument(name_, ": dilations must be 2 positive integers [h, w]"));
  }

  Status geometry(const TensorShape& x, const TensorShape& w, ConvGeometry* g) const {
    if (x.dims() != 4 || w.dims() != 4)
      return errors::InvalidArgument(name_, ": input must be 4-D NHWC and filter 4-D HWIO; got input shape ",
                                     x.DebugString(), " and filter shape ", w.DebugString());
    if (x.dim_size(3) != w.dim_size(2))
      return errors::InvalidArgument(name_, ": input channels ", x.dim_size(3),
                                     " differ from filter input channels ", w.dim_size(2), "; input shape ",
                                     x.DebugString(), ", filter shape ", w.DebugString());
    *g = ConvGeometry{x.dim_size(0), x.dim_size(1), x.dim_size(2), x.dim_size(3), w.dim_size(0), w.dim_size(1),
                      w.dim_size(3), strides_[0], strides_[1], dilations_[0], dilations_[1], 0, 0, 0, 0};
    TF_RETURN_IF_ERROR(axis(g->in_h, g->filter_h, g->stride_h, g->dilation_h, x, w, &g->out_h, &g->pad_top));
    TF_RETURN_IF_ERROR(axis(g->in_w, g->filter_w, g->stride_w, g->dilation_w, x, w, &g->out_w, &g->pad_left));
    return Status();
  }

 private:
  Status axis(int64_t in, int64_t filter, int64_t stride, int64_t dilation, const TensorShape& x,
              const TensorShape& w, int64_t* out, int64_t* pad_before) const {
    const int64_t effective = (filter - 1) * dilation + 1;
    if (padding_ == "SAME") {
      *out = (in + stride - 1) / stride;
      *pad_before = std::max<int64_t>((*out - 1) * stride + effective - in, 0) / 2;
      return Status();
    }
    if (in < effective)
      return errors::InvalidArgument(name_, ": with VALID padding the input (shape ", x.DebugString(),
                                     ") is smaller than the dilated filter (shape ", w.DebugString(),
                                     ", dilation ", dilation, "): the output would be empty or negative");
    *out = (in - effective) / stride + 1;
    *pad_before = 0;
    return Status();
  }

  std::string name_;
  std::vector<int32_t> strides_, dilations_;
  std::string padding_;
};

inline TensorShape conv_output_shape(const ConvGeometry& g) {
  return TensorShape({g.batch, g.out_h, g.out_w, g.out_c});
}

template <typename Backend>
class ConvKernel : public AmdnnKernel<Backend> {
 public:
  explicit ConvKernel(OpKernelConstruction* ctx) : AmdnnKernel<Backend>(ctx), attrs_(ctx) {}

 protected:
  Status geometry(const TensorShape& x, const TensorShape& w, ConvGeometry* g) const {
    return attrs_.geometry(x, w, g);
  }
  TensorShape output_shape(const ConvGeometry& g) const { return conv_output_shape(g); }

 private:
  ConvAttrs attrs_;
};

template <typename Backend>
class Conv2DOp : public ConvKernel<Backend> {
 public:
  using ConvKernel<Backend>::ConvKernel;
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& w = ctx->input(1);
    typename Backend::Multiplier multiplier;
    if (!this->load_multiplier(ctx, ctx->input(2), &multiplier)) return;
    ConvGeometry g;
    OP_REQUIRES_OK(ctx, this->geometry(x.shape(), w.shape(), &g));
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, this->output_shape(g), &y));
    this->backend_.conv2d(ctx, multiplier, g, x.flat<float>().data(), w.flat<float>().data(), y->flat<float>().data());
  }
};

template <typename Backend>
class Conv2DBackpropInputOp : public ConvKernel<Backend> {
 public:
  using ConvKernel<Backend>::ConvKernel;
  void Compute(OpKernelContext* ctx) override {
    TensorShape x_shape;
    OP_REQUIRES_OK(ctx, read_sizes("AmdnnConv2DBackpropInput", ctx->input(0), &x_shape));
    const Tensor& w = ctx->input(1);
    const Tensor& dy = ctx->input(2);
    typename Backend::Multiplier multiplier;
    if (!this->load_multiplier(ctx, ctx->input(3), &multiplier)) return;
    ConvGeometry g;
    OP_REQUIRES_OK(ctx, this->geometry(x_shape, w.shape(), &g));
    OP_REQUIRES_OK(ctx, check_out_backprop("AmdnnConv2DBackpropInput", this->output_shape(g), dy));
    Tensor* dx = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x_shape, &dx));
    this->backend_.conv2d_backprop_input(ctx, multiplier, g, w.flat<float>().data(), dy.flat<float>().data(),
                                         dx->flat<float>().data());
  }
};

template <typename Backend>
class Conv2DBackpropFilterOp : public ConvKernel<Backend> {
 public:
  using ConvKernel<Backend>::ConvKernel;
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    TensorShape w_shape;
    OP_REQUIRES_OK(ctx, read_sizes("AmdnnConv2DBackpropFilter", ctx->input(1), &w_shape));
    const Tensor& dy = ctx->input(2);
    typename Backend::Multiplier multiplier;
    if (!this->load_multiplier(ctx, ctx->input(3), &multiplier)) return;
    ConvGeometry g;
    OP_REQUIRES_OK(ctx, this->geometry(x.shape(), w_shape, &g));
    OP_REQUIRES_OK(ctx, check_out_backprop("AmdnnConv2DBackpropFilter", this->output_shape(g), dy));
    Tensor* dw = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, w_shape, &dw));
    this->backend_.conv2d_backprop_filter(ctx, multiplier, g, x.flat<float>().data(), dy.flat<float>().data(),
                                          dw->flat<float>().data());
  }
};

// ------------------------------------------------------------------------------------------------ matmul

template <typename Backend>
class MatMulOp : public AmdnnKernel<Backend> {
 public:
  explicit MatMulOp(OpKernelConstruction* ctx) : AmdnnKernel<Backend>(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("transpose_a", &transpose_a_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("transpose_b", &transpose_b_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    typename Backend::Multiplier multiplier;
    if (!this->load_multiplier(ctx, ctx->input(2), &multiplier)) return;
    OP_REQUIRES(ctx, a.dims() == 2 && b.dims() == 2,
                errors::InvalidArgument(this->name(), ": a and b must be 2-D, got shapes ", a.shape().DebugString(),
                                        " and ", b.shape().DebugString()));
    const int64_t m = a.dim_size(transpose_a_ ? 1 : 0), k = a.dim_size(transpose_a_ ? 0 : 1);
    const int64_t kb = b.dim_size(transpose_b_ ? 1 : 0), n = b.dim_size(transpose_b_ ? 0 : 1);
    OP_REQUIRES(ctx, k == kb,
                errors::InvalidArgument(this->name(), ": inner dimensions differ: a ", a.shape().DebugString(),
                                        transpose_a_ ? " (transposed)" : "", " times b ", b.shape().DebugString(),
                                        transpose_b_ ? " (transposed)" : ""));
    Tensor* c = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({m, n}), &c));
    this->backend_.matmul(ctx, multiplier, a.flat<float>().data(), b.flat<float>().data(), c->flat<float>().data(), m,
                          n, k, transpose_a_, transpose_b_);
  }

 private:
  bool transpose_a_, transpose_b_;
};

// ------------------------------------------------------------------------------------------------ integer conv

// AmdnnIntConv2D: the integer modes' forward (integer_conv.h) on codes. Inputs: codes (uint8 NHWC), filter codes
// (uint8 HWIO), table (int32, 65536), zero_a (int32, 1), zero_w and rescale (int32 and float, one per output
// channel), all in the device's memory. The backend's int_conv2d(ctx, g, x, w, args, y) launches it.
template <typename Backend>
class IntConv2DOp : public OpKernel {
 public:
  explicit IntConv2DOp(OpKernelConstruction* ctx) : OpKernel(ctx), attrs_(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("signed_codes", &signed_codes_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& w = ctx->input(1);
    ConvGeometry g;
    OP_REQUIRES_OK(ctx, attrs_.geometry(x.shape(), w.shape(), &g));
    OP_REQUIRES(ctx, g.patch_size() <= kIntMaxTaps,
                errors::InvalidArgument(name(), ": ", g.patch_size(), " taps per output (filter shape ",
                                        w.shape().DebugString(), "); the integer sums hold at most ", kIntMaxTaps));
    const Tensor& table = ctx->input(2);
    OP_REQUIRES(ctx, table.NumElements() == kIntTableEntries,
                errors::InvalidArgument(name(), ": table must hold 65536 int32 products (256 x 256), got shape ",
                                        table.shape().DebugString()));
    const Tensor& zero_a = ctx->input(3);
    OP_REQUIRES(ctx, zero_a.NumElements() == 1,
                errors::InvalidArgument(name(), ": zero_a must hold 1 value, got shape ", zero_a.shape().DebugString()));
    const Tensor& zero_w = ctx->input(4);
    const Tensor& rescale = ctx->input(5);
    OP_REQUIRES(ctx, zero_w.NumElements() == g.out_c && rescale.NumElements() == g.out_c,
                errors::InvalidArgument(name(), ": zero_w and rescale must hold one value per output channel (",
                                        g.out_c, "), got shapes ", zero_w.shape().DebugString(), " and ",
                                        rescale.shape().DebugString()));
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, conv_output_shape(g), &y));
    IntConvArgs args;
    args.table = table.flat<int32_t>().data();
    args.signed_codes = signed_codes_;
    args.zero_a = zero_a.flat<int32_t>().data();
    args.zero_w = zero_w.flat<int32_t>().data();
    args.rescale = rescale.flat<float>().data();
    backend_.int_conv2d(ctx, g, x.flat<uint8_t>().data(), w.flat<uint8_t>().data(), args, y->flat<float>().data());
  }

 private:
  ConvAttrs attrs_;
  bool signed_codes_ = true;
  Backend backend_;
};

// ------------------------------------------------------------------------------------------------ quantiser

// AmdnnQuantise: the integer modes' quantiser (integer_quantise.h). Inputs: values (float, any shape), scale and
// zero (float, 1 value, or one per index of the last axis), in the device's memory. The backend's quantise(ctx, x,
// count, args, codes, in_range) launches it.
template <typename Backend>
class QuantiseOp : public OpKernel {
 public:
  explicit QuantiseOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    int64_t qmin = 0, qmax = 0;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("qmin", &qmin));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("qmax", &qmax));
    OP_REQUIRES(ctx, quantise_codes_ok(qmin, qmax),
                errors::InvalidArgument(name(), ": codes [", qmin, ", ", qmax, "] ", kQuantiseCodesRule));
    args_.qmin = static_cast<float>(qmin);
    args_.qmax = static_cast<float>(qmax);
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& scale = ctx->input(1);
    const Tensor& zero = ctx->input(2);
    const int64_t channels = scale.NumElements();
    const int64_t last = x.dims() > 0 ? x.dim_size(x.dims() - 1) : 1;
    OP_REQUIRES(ctx, quantise_channels_ok(channels, zero.NumElements(), x.dims(), last),
                errors::InvalidArgument(name(), ": scale and zero must hold 1 value, or one per index of the input's "
                                        "last axis (", last, "); got shapes ", scale.shape().DebugString(), " and ",
                                        zero.shape().DebugString(), " for input ", x.shape().DebugString()));
    Tensor* codes = nullptr;
    Tensor* in_range = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &codes));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, x.shape(), &in_range));
    QuantiseArgs args = args_;
    args.scale = scale.flat<float>().data();
    args.zero = zero.flat<float>().data();
    args.channels = channels;
    backend_.quantise(ctx, x.flat<float>().data(), x.NumElements(), args, codes->flat<uint8_t>().data(),
                      in_range->flat<bool>().data());
  }

 private:
  QuantiseArgs args_;
  Backend backend_;
};

// AmdnnFiniteRange: the ranges the integer modes' scales come from (integer_quantise.h). Input: values (float, any
// shape; rank >= 1 per channel). Outputs lo, hi and finite of 1 value, or one per index of the last axis.
template <typename Backend>
class FiniteRangeOp : public OpKernel {
 public:
  explicit FiniteRangeOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("per_channel", &per_channel_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    OP_REQUIRES(ctx, !per_channel_ || x.dims() > 0,
                errors::InvalidArgument(name(), ": per-channel ranges need an input of rank 1 or more (channels on "
                                        "its last axis); got a scalar"));
    const int64_t channels = per_channel_ ? x.dim_size(x.dims() - 1) : 1;
    Tensor* lo = nullptr;
    Tensor* hi = nullptr;
    Tensor* finite = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({channels}), &lo));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({channels}), &hi));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({channels}), &finite));
    backend_.finite_range(ctx, x.flat<float>().data(), x.NumElements(), channels, lo->flat<float>().data(),
                          hi->flat<float>().data(), finite->flat<bool>().data());
  }

 private:
  bool per_channel_ = false;
  Backend backend_;
};

}  // namespace kernels
}  // namespace amdnn

#endif  // AMDNN_OPS_CC_KERNELS_COMMON_H_
