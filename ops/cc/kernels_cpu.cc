// CPU OpKernels of the ops in ops_interface.cc: the shared kernels of kernels_common.h (argument checks and conv
// geometry) over a CPU backend that calls the framework-free CPU ops of conv_cpu.h (which the PyTorch binding calls
// too) on TF's CPU thread pool.
#include <algorithm>
#include <functional>
#include <mutex>
#include <vector>

#include "conv_cpu.h"
#include "kernels_common.h"
#include "tensorflow/core/lib/core/threadpool.h"

namespace amdnn {
namespace kernels {
namespace {

// The CPU side of the shared kernels: the multiplier expanded on the host, the ops on TF's CPU worker threads.
class CpuBackend {
 public:
  using Multiplier = ::amdnn::Multiplier;

  // Set up once per kernel: the expanded multiplier is kept with the table bytes it came from (none for the named
  // modes) and reused while they are the same, instead of expanding (am16: 16 K MBM products) in every Compute.
  bool load_multiplier(const OpKernel& op, OpKernelContext* ctx, Mode mode, const Tensor& table, Multiplier* out) {
    const auto bytes = table.flat<uint8_t>();
    {
      std::lock_guard<std::mutex> lock(mutex_);  // Compute may run concurrently on one kernel
      if (ready_ && cached_table_.size() == static_cast<size_t>(bytes.size()) &&
          std::equal(cached_table_.begin(), cached_table_.end(), bytes.data())) {
        *out = cached_;
        return true;
      }
    }
    if (!multiplier_ok(op, ctx, make_multiplier(mode, bytes.data(), bytes.size(), out))) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    cached_ = *out;
    cached_table_.assign(bytes.data(), bytes.data() + bytes.size());
    ready_ = true;
    return true;
  }

  void conv2d(OpKernelContext* ctx, const Multiplier& mult, const ConvGeometry& g, const float* x, const float* w,
              float* y) {
    conv2d_cpu(mult, g, x, w, y, thread_pool(ctx), num_threads(ctx));
  }
  void conv2d_backprop_input(OpKernelContext* ctx, const Multiplier& mult, const ConvGeometry& g, const float* w,
                             const float* dy, float* dx) {
    conv2d_backprop_input_cpu(mult, g, w, dy, dx, thread_pool(ctx));
  }
  void conv2d_backprop_filter(OpKernelContext* ctx, const Multiplier& mult, const ConvGeometry& g, const float* x,
                              const float* dy, float* dw) {
    conv2d_backprop_filter_cpu(mult, g, x, dy, dw, thread_pool(ctx), num_threads(ctx));
  }
  void int_conv2d(OpKernelContext* ctx, const ConvGeometry& g, const uint8_t* x, const uint8_t* w,
                  const IntConvArgs& args, float* y) {
    int_conv2d_cpu(g, x, w, args, y, thread_pool(ctx));
  }
  void quantise(OpKernelContext* ctx, const float* x, int64_t count, const QuantiseArgs& args, uint8_t* codes,
                bool* in_range) {
    quantise_cpu(x, count, args, codes, in_range, thread_pool(ctx));
  }
  void finite_range(OpKernelContext* ctx, const float* x, int64_t count, int64_t channels, float* lo, float* hi,
                    bool* finite) {
    finite_range_cpu(x, count, channels, lo, hi, finite, thread_pool(ctx));
  }
  void matmul(OpKernelContext* ctx, const Multiplier& mult, const float* a, const float* b, float* c, int64_t m,
              int64_t n, int64_t k, bool transpose_a, bool transpose_b) {
    matmul_cpu(mult, a, b, c, m, n, k, transpose_a, transpose_b, thread_pool(ctx), num_threads(ctx));
  }

 private:
  static int num_threads(OpKernelContext* ctx) {
    return ctx->device()->tensorflow_cpu_worker_threads()->num_threads;
  }

  std::mutex mutex_;
  bool ready_ = false;
  Multiplier cached_;
  std::vector<uint8_t> cached_table_;

  static ParallelFor thread_pool(OpKernelContext* ctx) {
    auto* pool = ctx->device()->tensorflow_cpu_worker_threads()->workers;
    return [pool](int64_t n, int64_t cost, const std::function<void(int64_t, int64_t)>& work) {
      pool->ParallelFor(n, cost, work);
    };
  }
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

// ------------------------------------------------------------------------------------------------ kernel level

class CpuKernelsOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    Tensor* level = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &level));
    level->scalar<::tensorflow::tstring>()() = cpu_kernel_level();
    std::vector<std::string> fast;
    for (const std::string& name : mode_names()) {
      Mode mode;
      if (parse_mode(name, &mode) && cpu_fast_kernel(mode)) fast.push_back(name);
    }
    Tensor* modes = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({static_cast<int64_t>(fast.size())}), &modes));
    for (size_t i = 0; i < fast.size(); ++i) modes->vec<::tensorflow::tstring>()(i) = fast[i];
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("AmdnnCpuKernels").Device(::tensorflow::DEVICE_CPU), CpuKernelsOp);
REGISTER_KERNEL_BUILDER(Name("AmdnnPathCounts").Device(::tensorflow::DEVICE_CPU), PathCountsOp);
REGISTER_KERNEL_BUILDER(Name("AmdnnConv2D").Device(::tensorflow::DEVICE_CPU), Conv2DOp<CpuBackend>);
REGISTER_KERNEL_BUILDER(Name("AmdnnConv2DBackpropInput").Device(::tensorflow::DEVICE_CPU).HostMemory("input_sizes"),
                        Conv2DBackpropInputOp<CpuBackend>);
REGISTER_KERNEL_BUILDER(Name("AmdnnConv2DBackpropFilter").Device(::tensorflow::DEVICE_CPU).HostMemory("filter_sizes"),
                        Conv2DBackpropFilterOp<CpuBackend>);
REGISTER_KERNEL_BUILDER(Name("AmdnnMatMul").Device(::tensorflow::DEVICE_CPU), MatMulOp<CpuBackend>);
REGISTER_KERNEL_BUILDER(Name("AmdnnIntConv2D").Device(::tensorflow::DEVICE_CPU), IntConv2DOp<CpuBackend>);
REGISTER_KERNEL_BUILDER(Name("AmdnnQuantise").Device(::tensorflow::DEVICE_CPU), QuantiseOp<CpuBackend>);
REGISTER_KERNEL_BUILDER(Name("AmdnnFiniteRange").Device(::tensorflow::DEVICE_CPU), FiniteRangeOp<CpuBackend>);

}  // namespace kernels
}  // namespace amdnn
