// GPU OpKernels of the ops in ops_interface.cc: the shared kernels of kernels_common.h (the same attributes, checks
// and error messages as on CPU) over a GPU backend, a thin adapter to the CUDA core of gemm_cuda.h. Every launch goes
// on TF's compute stream of the op's device; scratch memory comes from TF's allocator (allocate_temp); nothing waits
// for the device.
//
// The table input. The op's `table` holds the ApproxTrain file's 4^m bytes; the CUDA core reads the canonical
// 128 x 128 table (16384 bytes) in device memory. The GPU kernels take `table` in host memory (HostMemory), validate
// and expand it with make_multiplier on the host exactly as the CPU kernels do (same errors), and keep one device
// copy per distinct table per kernel, keyed by the table's bytes: the expansion and the upload run once, at the first
// step, and every later step only compares the (at most 16384) bytes. The upload is a cudaMemcpyAsync on the op's
// stream from pinned host memory allocated through TF's allocator (on_host + gpu_compatible), so the copy is truly
// asynchronous; both the pinned buffer and the device copy are held by the kernel for its lifetime, so the host
// buffer outlives the copy and the device table outlives every launch that reads it (launches on the same stream
// are ordered after the copy). The cache grows by one 16 KB pair per distinct table a node is fed: one in practice.
// Other modes take no table (an empty input); am16's table is built into the CUDA core.
#ifndef EIGEN_USE_GPU  // the build passes -DEIGEN_USE_GPU too
#define EIGEN_USE_GPU
#endif

#include <cuda_runtime_api.h>

#include <cstring>
#include <map>
#include <string>

#include "gemm_cuda.h"
#include "kernels_common.h"
#include "tensorflow/core/platform/mutex.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace amdnn {
namespace kernels {
namespace {

cudaStream_t stream_of(OpKernelContext* ctx) { return ctx->eigen_device<Eigen::GpuDevice>().stream(); }

// Fails ctx when a launch of the CUDA core failed; true when it succeeded.
bool launched(OpKernelContext* ctx, const gpu::LaunchStatus& status) {
  if (status.ok) return true;
  ctx->CtxFailure(__FILE__, __LINE__,
                  errors::Internal(ctx->op_kernel().name(), ": CUDA launch failed: ", status.what));
  return false;
}

// Scratch device memory of `bytes` (none for 0), alive until the launches on the stream that read it have run:
// TF's GPU allocator reuses memory in stream order.
bool workspace(OpKernelContext* ctx, size_t bytes, Tensor* scratch, void** data) {
  *data = nullptr;
  if (bytes == 0) return true;
  const Status status =
      ctx->allocate_temp(::tensorflow::DT_UINT8, TensorShape({static_cast<int64_t>(bytes)}), scratch);
  if (!status.ok()) {
    ctx->CtxFailure(__FILE__, __LINE__, status);
    return false;
  }
  *data = scratch->flat<uint8_t>().data();
  return true;
}

// The GPU side of the shared kernels (see the file comment for the table).
class GpuBackend {
 public:
  using Multiplier = gpu::GpuMultiplier;

  bool load_multiplier(const OpKernel& op, OpKernelContext* ctx, Mode mode, const Tensor& table, Multiplier* out) {
    out->mode = mode;
    out->table7 = nullptr;
    const auto bytes = table.flat<uint8_t>();
    if (mode != Mode::kTable) {
      if (bytes.size() == 0) return true;
      ::amdnn::Multiplier unused;  // a table where none is taken: make_multiplier words the error
      return multiplier_ok(op, ctx, make_multiplier(mode, bytes.data(), bytes.size(), &unused));
    }
    const std::string key(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    ::tensorflow::mutex_lock lock(mu_);
    auto found = tables_.find(key);
    if (found == tables_.end()) {
      ::amdnn::Multiplier host;
      if (!multiplier_ok(op, ctx, make_multiplier(mode, bytes.data(), bytes.size(), &host))) return false;
      DeviceTable entry;
      ::tensorflow::AllocatorAttributes pinned;
      pinned.set_on_host(true);
      pinned.set_gpu_compatible(true);
      const TensorShape shape({kTableSize});
      Status status = ctx->allocate_temp(::tensorflow::DT_UINT8, shape, &entry.pinned, pinned);
      if (status.ok()) status = ctx->allocate_temp(::tensorflow::DT_UINT8, shape, &entry.device);
      if (!status.ok()) {
        ctx->CtxFailure(__FILE__, __LINE__, status);
        return false;
      }
      std::memcpy(entry.pinned.flat<uint8_t>().data(), host.table7.data(), kTableSize);
      const cudaError_t copied = cudaMemcpyAsync(entry.device.flat<uint8_t>().data(),
                                                 entry.pinned.flat<uint8_t>().data(), kTableSize,
                                                 cudaMemcpyHostToDevice, stream_of(ctx));
      if (copied != cudaSuccess) {
        ctx->CtxFailure(__FILE__, __LINE__, errors::Internal(op.name(), ": copying the multiplier table to the GPU "
                                                             "failed: ", cudaGetErrorString(copied)));
        return false;
      }
      found = tables_.emplace(key, std::move(entry)).first;
    }
    out->table7 = found->second.device.flat<uint8_t>().data();
    return true;
  }

  void conv2d(OpKernelContext* ctx, const Multiplier& mult, const ConvGeometry& g, const float* x, const float* w,
              float* y) {
    Tensor scratch;
    void* ws;
    if (!workspace(ctx, gpu::conv2d_workspace_bytes(g), &scratch, &ws)) return;
    launched(ctx, gpu::conv2d(mult, g, x, w, y, ws, stream_of(ctx)));
  }
  void conv2d_backprop_input(OpKernelContext* ctx, const Multiplier& mult, const ConvGeometry& g, const float* w,
                             const float* dy, float* dx) {
    Tensor scratch;
    void* ws;
    if (!workspace(ctx, gpu::conv2d_backprop_input_workspace_bytes(g), &scratch, &ws)) return;
    launched(ctx, gpu::conv2d_backprop_input(mult, g, w, dy, dx, ws, stream_of(ctx)));
  }
  void conv2d_backprop_filter(OpKernelContext* ctx, const Multiplier& mult, const ConvGeometry& g, const float* x,
                              const float* dy, float* dw) {
    Tensor scratch;
    void* ws;
    if (!workspace(ctx, gpu::conv2d_backprop_filter_workspace_bytes(g), &scratch, &ws)) return;
    launched(ctx, gpu::conv2d_backprop_filter(mult, g, x, dy, dw, ws, stream_of(ctx)));
  }
  void matmul(OpKernelContext* ctx, const Multiplier& mult, const float* a, const float* b, float* c, int64_t m,
              int64_t n, int64_t k, bool transpose_a, bool transpose_b) {
    Tensor scratch;
    void* ws;
    if (!workspace(ctx, gpu::matmul_workspace_bytes(m, n, k, transpose_a, transpose_b), &scratch, &ws)) return;
    launched(ctx, gpu::matmul(mult, a, b, c, m, n, k, transpose_a, transpose_b, ws, stream_of(ctx)));
  }
  // The integer op (integer_conv.h): every input in device memory, the zero points and scales too, so a step's
  // quantisation never goes through the host; no scratch memory.
  void int_conv2d(OpKernelContext* ctx, const ConvGeometry& g, const uint8_t* x, const uint8_t* w,
                  const IntConvArgs& args, float* y) {
    launched(ctx, gpu::int_conv2d(g, x, w, args, y, stream_of(ctx)));
  }
  void quantise(OpKernelContext* ctx, const float* x, int64_t count, const QuantiseArgs& args, uint8_t* codes,
                bool* in_range) {
    launched(ctx, gpu::quantise(x, count, args, codes, in_range, stream_of(ctx)));
  }
  void finite_range(OpKernelContext* ctx, const float* x, int64_t count, int64_t channels, float* lo, float* hi,
                    bool* finite) {
    launched(ctx, gpu::finite_range(x, count, channels, lo, hi, finite, stream_of(ctx)));
  }

 private:
  struct DeviceTable {
    Tensor pinned;  // the host source of the copy, kept so that it outlives the asynchronous copy
    Tensor device;  // the canonical table the launches read
  };
  ::tensorflow::mutex mu_;
  std::map<std::string, DeviceTable> tables_;  // by the table input's bytes
};

}  // namespace

using ::tensorflow::DEVICE_GPU;
REGISTER_KERNEL_BUILDER(Name("AmdnnConv2D").Device(DEVICE_GPU).HostMemory("table"), Conv2DOp<GpuBackend>);
REGISTER_KERNEL_BUILDER(
    Name("AmdnnConv2DBackpropInput").Device(DEVICE_GPU).HostMemory("input_sizes").HostMemory("table"),
    Conv2DBackpropInputOp<GpuBackend>);
REGISTER_KERNEL_BUILDER(
    Name("AmdnnConv2DBackpropFilter").Device(DEVICE_GPU).HostMemory("filter_sizes").HostMemory("table"),
    Conv2DBackpropFilterOp<GpuBackend>);
REGISTER_KERNEL_BUILDER(Name("AmdnnMatMul").Device(DEVICE_GPU).HostMemory("table"), MatMulOp<GpuBackend>);
REGISTER_KERNEL_BUILDER(Name("AmdnnIntConv2D").Device(DEVICE_GPU), IntConv2DOp<GpuBackend>);
REGISTER_KERNEL_BUILDER(Name("AmdnnQuantise").Device(DEVICE_GPU), QuantiseOp<GpuBackend>);
REGISTER_KERNEL_BUILDER(Name("AmdnnFiniteRange").Device(DEVICE_GPU), FiniteRangeOp<GpuBackend>);

}  // namespace kernels
}  // namespace amdnn
