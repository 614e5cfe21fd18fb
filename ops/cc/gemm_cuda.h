// The CUDA core: conv2d (forward, input gradient, filter gradient) and matmul through a multiplier on the GPU.
//
// Plain C++ launch functions on raw device pointers and a CUDA stream, no framework headers: the TensorFlow and
// PyTorch bindings both call these. Layouts are TensorFlow's: NHWC input, HWIO filter, row-major matrices.
// Sources: gemm_cuda_modes.cuh (the fast formulas of each mode), gemm_cuda_loaders.cuh (operands and the implicit
// im2col views), gemm_cuda_kernel.cuh (the tiled kernel and its launch); the op files gemm_cuda_conv.cu (the
// forward, whose kernels also run the stride-1 input gradient and matmul), gemm_cuda_input_grad.cu (its stride
// phases) and gemm_cuda_filter_grad.cu.
// Every product is the mode's product of multiplier.h, bit for bit; each output is one running fp32 sum over k in
// order, except where a GEMM has too few output tiles to fill the GPU (the filter gradient, small matmuls): there
// K is cut into a number of slices fixed by the shapes alone, each slice summed in order, and the slices added in
// order by a second kernel. Results therefore depend only on the inputs and shapes: the same bits run after run and
// on any GPU. Launch functions never synchronise the stream.
#ifndef AMDNN_OPS_CC_GEMM_CUDA_H_
#define AMDNN_OPS_CC_GEMM_CUDA_H_

#include <cstddef>
#include <cstdint>

#include "conv_geometry.h"
#include "multiplier.h"

typedef struct CUstream_st* cudaStream_t;  // the runtime's own typedef, so bindings need no CUDA header here

namespace amdnn {
namespace gpu {

// A multiplier for the GPU kernels. table7: device pointer to the canonical 128 x 128 byte table (c << 7 | M), read
// for Mode::kTable only (null otherwise).
struct GpuMultiplier {
  Mode mode = Mode::kAcc32;
  const uint8_t* table7 = nullptr;
};

// The CUDA kernels index with 32 bits: no operand, result or grid of theirs has more elements than this.
constexpr int64_t kMaxElements = (int64_t{1} << 31) - 1;

// Status of a launch: empty on success, else what failed (the CUDA error string and which launch).
struct LaunchStatus {
  bool ok = true;
  const char* what = "";
};

// Bytes of scratch device memory each call needs (0 if none); the caller allocates it (the frameworks' allocators).
size_t conv2d_workspace_bytes(const ConvGeometry& g);
size_t conv2d_backprop_input_workspace_bytes(const ConvGeometry& g);       // with room for the HWOI copy
size_t conv2d_backprop_input_hwoi_workspace_bytes(const ConvGeometry& g);
size_t conv2d_backprop_filter_workspace_bytes(const ConvGeometry& g);
size_t matmul_workspace_bytes(int64_t m, int64_t n, int64_t k, bool transpose_a, bool transpose_b);

// y [batch, out_h, out_w, out_c] = x [batch, in_h, in_w, in_c] conv w [filter_h, filter_w, in_c, out_c].
LaunchStatus conv2d(const GpuMultiplier& mult, const ConvGeometry& g, const float* x, const float* w, float* y,
                    void* workspace, cudaStream_t stream);
// dx [batch, in_h, in_w, in_c] = dy (*) w^T: every (output pixel, tap) that reads an input pixel contributes,
// dy the left operand of each product. The kernels read the filter as HWOI [filter_h, filter_w, out_c, in_c]: the
// first form copies an HWIO w there (in the workspace), the second takes one already in HWOI. Same bits. A strided
// conv's phases run side by side on side streams forked from `stream` and joined back into it (gemm_cuda_streams.h),
// one after the other on a stream being captured into a CUDA graph: `stream` sees the whole result either way.
LaunchStatus conv2d_backprop_input(const GpuMultiplier& mult, const ConvGeometry& g, const float* w, const float* dy,
                                   float* dx, void* workspace, cudaStream_t stream);
LaunchStatus conv2d_backprop_input_hwoi(const GpuMultiplier& mult, const ConvGeometry& g, const float* w_hwoi,
                                        const float* dy, float* dx, void* workspace, cudaStream_t stream);
// dw [filter_h, filter_w, in_c, out_c] = im2col(x)^T (*) dy, x the left operand of each product.
LaunchStatus conv2d_backprop_filter(const GpuMultiplier& mult, const ConvGeometry& g, const float* x, const float* dy,
                                    float* dw, void* workspace, cudaStream_t stream);
// c [m, n] = op(a) (*) op(b), op transposing a stored [k, m] (transpose_a) or b stored [n, k] (transpose_b);
// a is the left operand of each product.
LaunchStatus matmul(const GpuMultiplier& mult, const float* a, const float* b, float* c, int64_t m, int64_t n,
                    int64_t k, bool transpose_a, bool transpose_b, void* workspace, cudaStream_t stream);

// Filter layouts for bindings whose filters are OIHW [out_c, in_c, filter_h, filter_w] (torch's); taps =
// filter_h * filter_w. To HWIO for conv2d, to HWOI for conv2d_backprop_input_hwoi, and conv2d_backprop_filter's
// HWIO result back to OIHW. Coalesced transposes (gemm_cuda_layouts.cu); pure copies, no arithmetic.
LaunchStatus filter_oihw_to_hwio(const float* oihw, int64_t out_c, int64_t in_c, int64_t taps, float* hwio,
                                 cudaStream_t stream);
LaunchStatus filter_oihw_to_hwoi(const float* oihw, int64_t out_c, int64_t in_c, int64_t taps, float* hwoi,
                                 cudaStream_t stream);
LaunchStatus filter_hwio_to_oihw(const float* hwio, int64_t out_c, int64_t in_c, int64_t taps, float* oihw,
                                 cudaStream_t stream);
// out[c] = in[c]^T for `count` row-major matrices of rows x cols, one after the other (out's of cols x rows): the
// same transpose, for matmul's transposed operands and an HWIO filter's HWOI copy (a matrix per tap).
LaunchStatus transpose_matrices(const float* in, int64_t count, int64_t rows, int64_t cols, float* out,
                                cudaStream_t stream);

// Counts, since the library was loaded, of (block, k-tile) steps that ran the fast formulas and of those that fell
// back to the generic per-product definition (an operand out of the fast range, inf or NaN). Reading synchronises
// the device; for reports and tests, not for the training step.
struct PathCounts {
  unsigned long long fast = 0;
  unsigned long long generic = 0;
};
PathCounts path_counts();

}  // namespace gpu
}  // namespace amdnn

#endif  // AMDNN_OPS_CC_GEMM_CUDA_H_
