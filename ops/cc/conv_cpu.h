// The CPU ops on raw pointers, framework-free: conv2d forward and both gradients, and matmul, over the CPU GEMM.
// The TensorFlow kernels (kernels_cpu.cc) and the PyTorch binding (torch_binding.cc) both call these, so every
// framework gets the same bits. Layouts: NHWC input, HWIO filter, row-major matrices; outputs are fully written.
#ifndef AMDNN_OPS_CC_CONV_CPU_H_
#define AMDNN_OPS_CC_CONV_CPU_H_

#include <cstdint>

#include "conv_geometry.h"
#include "gemm.h"

namespace amdnn {

// Whether the fast kernels are exact for every product of two operand tensors (range summaries of both, over the
// pool).
bool fast_path_for(Mode mode, const float* a, int64_t a_count, const float* b, int64_t b_count,
                   const ParallelFor& parallel_for);

// y [batch, out_h, out_w, out_c] = x conv w.
void conv2d_cpu(const Multiplier& mult, const ConvGeometry& g, const float* x, const float* w, float* y,
                const ParallelFor& parallel_for, int num_threads);
// dx [batch, in_h, in_w, in_c] = col2im(dy (*) w^T), dy the left operand.
void conv2d_backprop_input_cpu(const Multiplier& mult, const ConvGeometry& g, const float* w, const float* dy,
                               float* dx, const ParallelFor& parallel_for);
// dw [filter_h, filter_w, in_c, out_c] = im2col(x)^T (*) dy, x the left operand.
void conv2d_backprop_filter_cpu(const Multiplier& mult, const ConvGeometry& g, const float* x, const float* dy,
                                float* dw, const ParallelFor& parallel_for, int num_threads);
// c [m, n] = op(a) (*) op(b); a stored [k, m] when transpose_a, b stored [n, k] when transpose_b.
void matmul_cpu(const Multiplier& mult, const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k,
                bool transpose_a, bool transpose_b, const ParallelFor& parallel_for, int num_threads);

}  // namespace amdnn

#endif  // AMDNN_OPS_CC_CONV_CPU_H_
