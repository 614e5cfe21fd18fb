// CPU OpKernels of the ops in ops_interface.cc: argument checks, conv geometry, and calls into the GEMM.
#include <algorithm>
#include <vector>

#include "gemm.h"
#include "multiplier_setup.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/lib/core/threadpool.h"

namespace amdnn {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Status;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
namespace errors = ::tensorflow::errors;

namespace {

// What every op shares: the multiplier attribute and the table input, and the thread pool.
class AmdnnKernel : public OpKernel {
 public:
  explicit AmdnnKernel(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("multiplier", &multiplier_name_));
    OP_REQUIRES(ctx, parse_mode(multiplier_name_, &mode_),
                errors::InvalidArgument("unknown multiplier '", multiplier_name_, "'; valid: ", valid_mode_names()));
  }

 protected:
  // Builds the multiplier from the table input (checked: empty, or 4^m bytes for the table mode).
  bool load_multiplier(OpKernelContext* ctx, const Tensor& table, Multiplier* out) {
    const auto bytes = table.flat<uint8_t>();
    const std::string problem = make_multiplier(mode_, bytes.data(), bytes.size(), out);
    if (!problem.empty()) {
      ctx->CtxFailure(__FILE__, __LINE__, errors::InvalidArgument(name(), ": ", problem));
      return false;
    }
    return true;
  }

  static int num_threads(OpKernelContext* ctx) {
    return ctx->device()->tensorflow_cpu_worker_threads()->num_threads;
  }

  static ParallelFor thread_pool(OpKernelContext* ctx) {
    auto* pool = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    return [pool](int64_t n, int64_t cost, const std::function<void(int64_t, int64_t)>& work) {
      pool->ParallelFor(n, cost, work);
    };
  }

  Mode mode_;
  std::string multiplier_name_;
};

GemmOperand operand(const MatrixSource& source, const Tensor& values) {
  return GemmOperand{&source, values.flat<float>().data()};
}

bool fast_path(Mode mode, const Tensor& a, const Tensor& b) {
  const auto fa = a.flat<float>(), fb = b.flat<float>();
  return fast_path_is_exact(mode, summarize_operand(fa.data(), fa.size()), summarize_operand(fb.data(), fb.size()));
}

// The multiplier with its table's operands swapped: product(b, a) under it is product(a, b) under the original.
// Only lut tables can be non-symmetric (every named mode, am16's table included, is symmetric).
Multiplier transposed_table(const Multiplier& multiplier) {
  if (multiplier.mode != Mode::kTable) return multiplier;
  Multiplier swapped = multiplier;
  for (int fa = 0; fa < 128; ++fa)
    for (int fb = 0; fb < 128; ++fb) swapped.table7[(fa << 7) | fb] = multiplier.table7[(fb << 7) | fa];
  return swapped;
}

// ------------------------------------------------------------------------------------------------ conv2d

class ConvKernel : public AmdnnKernel {
 public:
  explicit ConvKernel(OpKernelConstruction* ctx) : AmdnnKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("strides", &strides_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("dilations", &dilations_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("padding", &padding_));
    OP_REQUIRES(ctx, strides_.size() == 2 && strides_[0] >= 1 && strides_[1] >= 1,
                errors::InvalidArgument(name(), ": strides must be 2 positive integers [h, w], got ",
                                        strides_.size(), " values"));
    OP_REQUIRES(ctx, dilations_.size() == 2 && dilations_[0] >= 1 && dilations_[1] >= 1,
                errors::InvalidArgument(name(), ": dilations must be 2 positive integers [h, w]"));
  }

 protected:
  // Geometry from the input and filter shapes, with TF's SAME/VALID rules; errors name both shapes.
  Status geometry(const TensorShape& x, const TensorShape& w, ConvGeometry* g) const {
    if (x.dims() != 4 || w.dims() != 4)
      return errors::InvalidArgument(name(), ": input must be 4-D NHWC and filter 4-D HWIO; got input shape ",
                                     x.DebugString(), " and filter shape ", w.DebugString());
    if (x.dim_size(3) != w.dim_size(2))
      return errors::InvalidArgument(name(), ": input channels ", x.dim_size(3), " differ from filter input channels ",
                                     w.dim_size(2), "; input shape ", x.DebugString(), ", filter shape ",
                                     w.DebugString());
    *g = ConvGeometry{x.dim_size(0), x.dim_size(1), x.dim_size(2), x.dim_size(3), w.dim_size(0), w.dim_size(1),
                      w.dim_size(3), strides_[0], strides_[1], dilations_[0], dilations_[1], 0, 0, 0, 0};
    TF_RETURN_IF_ERROR(axis(g->in_h, g->filter_h, g->stride_h, g->dilation_h, x, w, &g->out_h, &g->pad_top));
    TF_RETURN_IF_ERROR(axis(g->in_w, g->filter_w, g->stride_w, g->dilation_w, x, w, &g->out_w, &g->pad_left));
    return Status();
  }

  TensorShape output_shape(const ConvGeometry& g) const { return TensorShape({g.batch, g.out_h, g.out_w, g.out_c}); }

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
      return errors::InvalidArgument(name(), ": with VALID padding the input (shape ", x.DebugString(),
                                     ") is smaller than the dilated filter (shape ", w.DebugString(),
                                     ", dilation ", dilation, "): the output would be empty or negative");
    *out = (in - effective) / stride + 1;
    *pad_before = 0;
    return Status();
  }

  std::vector<int32_t> strides_, dilations_;
  std::string padding_;
};

class Conv2DOp : public ConvKernel {
 public:
  using ConvKernel::ConvKernel;
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& w = ctx->input(1);
    Multiplier multiplier;
    if (!load_multiplier(ctx, ctx->input(2), &multiplier)) return;
    ConvGeometry g;
    OP_REQUIRES_OK(ctx, geometry(x.shape(), w.shape(), &g));
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, output_shape(g), &y));
    const Im2ColSource patches(g);
    const DenseSource filter(g.out_c);
    approximate_gemm(multiplier, operand(patches, x), operand(filter, w), g.out_pixels(), g.out_c, g.patch_size(),
                     y->flat<float>().data(), g.out_c, fast_path(mode_, x, w),
                     thread_pool(ctx), num_threads(ctx));
  }
};

Status read_sizes(const char* op, const Tensor& sizes, TensorShape* shape) {
  if (sizes.dims() != 1 || sizes.NumElements() != 4)
    return errors::InvalidArgument(op, ": sizes must be a 4-element int32 vector, got shape ", sizes.shape().DebugString());
  const auto v = sizes.vec<int32_t>();
  for (int i = 0; i < 4; ++i)
    if (v(i) < 0) return errors::InvalidArgument(op, ": sizes must be non-negative, got ", v(i), " at ", i);
  *shape = TensorShape({v(0), v(1), v(2), v(3)});
  return Status();
}

Status check_out_backprop(const char* op, const TensorShape& expected, const Tensor& dy) {
  if (dy.shape() != expected)
    return errors::InvalidArgument(op, ": out_backprop has shape ", dy.shape().DebugString(),
                                   " but the conv's output shape is ", expected.DebugString());
  return Status();
}

class Conv2DBackpropInputOp : public ConvKernel {
 public:
  using ConvKernel::ConvKernel;
  void Compute(OpKernelContext* ctx) override {
    TensorShape x_shape;
    OP_REQUIRES_OK(ctx, read_sizes("AmdnnConv2DBackpropInput", ctx->input(0), &x_shape));
    const Tensor& w = ctx->input(1);
    const Tensor& dy = ctx->input(2);
    Multiplier multiplier;
    if (!load_multiplier(ctx, ctx->input(3), &multiplier)) return;
    ConvGeometry g;
    OP_REQUIRES_OK(ctx, geometry(x_shape, w.shape(), &g));
    OP_REQUIRES_OK(ctx, check_out_backprop("AmdnnConv2DBackpropInput", output_shape(g), dy));
    Tensor* dx = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x_shape, &dx));
    float* dx_data = dx->flat<float>().data();
    std::fill(dx_data, dx_data + dx->NumElements(), 0.0f);
    if (dx->NumElements() == 0 || dy.NumElements() == 0) return;
    const bool fast = fast_path(mode_, dy, w);
    const float* dy_data = dy.flat<float>().data();
    const int64_t pixels = g.out_h * g.out_w, patch = g.patch_size();
    const DenseSource grad(g.out_c), filter_t(patch);
    std::vector<float> w_t(static_cast<size_t>(w.NumElements()));  // [out_c, patch]
    transpose(w.flat<float>().data(), patch, g.out_c, w_t.data());
    // One image per task: images write disjoint parts of dx, and within an image col2im adds in a fixed order.
    auto work = [&](int64_t begin, int64_t end) {
      std::vector<float> columns(static_cast<size_t>(pixels * patch));
      for (int64_t n = begin; n < end; ++n) {
        const GemmOperand image_grad{&grad, dy_data + n * pixels * g.out_c};
        approximate_gemm(multiplier, image_grad, GemmOperand{&filter_t, w_t.data()}, pixels, patch, g.out_c,
                         columns.data(), patch, fast, run_serially, 1);
        col2im(g, columns.data(), dx_data + n * g.in_h * g.in_w * g.in_c);
      }
    };
    thread_pool(ctx)(g.batch, pixels * patch * g.out_c * 2, work);
  }

 private:
  static void col2im(const ConvGeometry& g, const float* columns, float* dx_image) {
    for (int64_t ho = 0; ho < g.out_h; ++ho)
      for (int64_t wo = 0; wo < g.out_w; ++wo) {
        const float* row = columns + (ho * g.out_w + wo) * g.patch_size();
        for (int64_t kh = 0; kh < g.filter_h; ++kh) {
          const int64_t hi = ho * g.stride_h + kh * g.dilation_h - g.pad_top;
          if (hi < 0 || hi >= g.in_h) continue;
          for (int64_t kw = 0; kw < g.filter_w; ++kw) {
            const int64_t wi = wo * g.stride_w + kw * g.dilation_w - g.pad_left;
            if (wi < 0 || wi >= g.in_w) continue;
            const float* src = row + (kh * g.filter_w + kw) * g.in_c;
            float* dst = dx_image + (hi * g.in_w + wi) * g.in_c;
            for (int64_t ci = 0; ci < g.in_c; ++ci) dst[ci] += src[ci];
          }
        }
      }
  }
};

class Conv2DBackpropFilterOp : public ConvKernel {
 public:
  using ConvKernel::ConvKernel;
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    TensorShape w_shape;
    OP_REQUIRES_OK(ctx, read_sizes("AmdnnConv2DBackpropFilter", ctx->input(1), &w_shape));
    const Tensor& dy = ctx->input(2);
    Multiplier multiplier;
    if (!load_multiplier(ctx, ctx->input(3), &multiplier)) return;
    ConvGeometry g;
    OP_REQUIRES_OK(ctx, geometry(x.shape(), w_shape, &g));
    OP_REQUIRES_OK(ctx, check_out_backprop("AmdnnConv2DBackpropFilter", output_shape(g), dy));
    Tensor* dw = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, w_shape, &dw));
    // dw = x^T (*) dy computed as its transpose dw^T = dy^T (*) x: the im2col matrix is then read along its rows
    // (contiguous channels) and packed once. The products keep x as their left operand through the transposed
    // table (every other mode is symmetric in its operands). dw^T is small (out_c x patch) and transposed at the end.
    std::vector<float> dy_t(static_cast<size_t>(dy.NumElements()));  // [out_c, out_pixels]
    transpose(dy.flat<float>().data(), g.out_pixels(), g.out_c, dy_t.data());
    std::vector<float> dw_t(static_cast<size_t>(dw->NumElements()));  // [out_c, patch]
    const DenseSource grad_t(g.out_pixels());
    const Im2ColSource patches(g);
    approximate_gemm(transposed_table(multiplier), GemmOperand{&grad_t, dy_t.data()}, operand(patches, x), g.out_c,
                     g.patch_size(), g.out_pixels(), dw_t.data(), g.patch_size(), fast_path(mode_, dy, x),
                     thread_pool(ctx), num_threads(ctx));
    transpose(dw_t.data(), g.out_c, g.patch_size(), dw->flat<float>().data());
  }
};

// ------------------------------------------------------------------------------------------------ matmul

class MatMulOp : public AmdnnKernel {
 public:
  explicit MatMulOp(OpKernelConstruction* ctx) : AmdnnKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("transpose_a", &transpose_a_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("transpose_b", &transpose_b_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    Multiplier multiplier;
    if (!load_multiplier(ctx, ctx->input(2), &multiplier)) return;
    OP_REQUIRES(ctx, a.dims() == 2 && b.dims() == 2,
                errors::InvalidArgument(name(), ": a and b must be 2-D, got shapes ", a.shape().DebugString(),
                                        " and ", b.shape().DebugString()));
    const int64_t m = a.dim_size(transpose_a_ ? 1 : 0), k = a.dim_size(transpose_a_ ? 0 : 1);
    const int64_t kb = b.dim_size(transpose_b_ ? 1 : 0), n = b.dim_size(transpose_b_ ? 0 : 1);
    OP_REQUIRES(ctx, k == kb,
                errors::InvalidArgument(name(), ": inner dimensions differ: a ", a.shape().DebugString(),
                                        transpose_a_ ? " (transposed)" : "", " times b ", b.shape().DebugString(),
                                        transpose_b_ ? " (transposed)" : ""));
    Tensor* c = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({m, n}), &c));
    // Transposed operands are materialised once, so packing reads rows.
    std::vector<float> a_t, b_t;
    const float* a_data = a.flat<float>().data();
    const float* b_data = b.flat<float>().data();
    if (transpose_a_) {
      a_t.resize(static_cast<size_t>(a.NumElements()));
      transpose(a_data, a.dim_size(0), a.dim_size(1), a_t.data());
      a_data = a_t.data();
    }
    if (transpose_b_) {
      b_t.resize(static_cast<size_t>(b.NumElements()));
      transpose(b_data, b.dim_size(0), b.dim_size(1), b_t.data());
      b_data = b_t.data();
    }
    const DenseSource left(k), right(n);
    approximate_gemm(multiplier, GemmOperand{&left, a_data}, GemmOperand{&right, b_data}, m, n, k,
                     c->flat<float>().data(), n, fast_path(mode_, a, b), thread_pool(ctx), num_threads(ctx));
  }

 private:
  bool transpose_a_, transpose_b_;
};

// ------------------------------------------------------------------------------------------------ path counts

class PathCountsOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({4}), &out));
    const PathCounts counts = path_counts();
    auto v = out->vec<int64_t>();
    v(0) = counts.fast_calls;
    v(1) = counts.generic_calls;
    v(2) = counts.fast_products;
    v(3) = counts.generic_products;
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("AmdnnPathCounts").Device(::tensorflow::DEVICE_CPU), PathCountsOp);
REGISTER_KERNEL_BUILDER(Name("AmdnnConv2D").Device(::tensorflow::DEVICE_CPU), Conv2DOp);
REGISTER_KERNEL_BUILDER(Name("AmdnnConv2DBackpropInput").Device(::tensorflow::DEVICE_CPU).HostMemory("input_sizes"),
                        Conv2DBackpropInputOp);
REGISTER_KERNEL_BUILDER(Name("AmdnnConv2DBackpropFilter").Device(::tensorflow::DEVICE_CPU).HostMemory("filter_sizes"),
                        Conv2DBackpropFilterOp);
REGISTER_KERNEL_BUILDER(Name("AmdnnMatMul").Device(::tensorflow::DEVICE_CPU), MatMulOp);

}  // namespace amdnn
