// The CPU ops on raw pointers (conv_cpu.h): how each op becomes one call of the GEMM.
#include "conv_cpu.h"

#include <algorithm>
#include <vector>

namespace amdnn {
namespace {

// The multiplier with its table's operands swapped: product(b, a) under it is product(a, b) under the original.
// Only lut tables can be non-symmetric (every named mode, am16's table included, is symmetric).
Multiplier transposed_table(const Multiplier& multiplier) {
  if (multiplier.mode != Mode::kTable) return multiplier;
  Multiplier swapped = multiplier;
  std::copy(multiplier.columns7.begin(), multiplier.columns7.begin() + kTableSize, swapped.table7.begin());
  std::copy(multiplier.table7.begin(), multiplier.table7.end(), swapped.columns7.begin());
  return swapped;
}

void col2im(const ConvGeometry& g, const float* columns, float* dx_image) {
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

}  // namespace

bool fast_path_for(Mode mode, const float* a, int64_t a_count, const float* b, int64_t b_count,
                   const ParallelFor& parallel_for) {
  return fast_path_is_exact(mode, summarize_operand(a, a_count, parallel_for),
                            summarize_operand(b, b_count, parallel_for));
}

void conv2d_cpu(const Multiplier& mult, const ConvGeometry& g, const float* x, const float* w, float* y,
                const ParallelFor& parallel_for, int num_threads) {
  const Im2ColSource patches(g);
  const DenseSource filter(g.out_c);
  const bool fast = fast_path_for(mult.mode, x, g.batch * g.in_h * g.in_w * g.in_c, w, g.patch_size() * g.out_c,
                                  parallel_for);
  approximate_gemm(mult, GemmOperand{&patches, x}, GemmOperand{&filter, w}, g.out_pixels(), g.out_c, g.patch_size(),
                   y, g.out_c, fast, parallel_for, num_threads);
}

void conv2d_backprop_input_cpu(const Multiplier& mult, const ConvGeometry& g, const float* w, const float* dy,
                               float* dx, const ParallelFor& parallel_for) {
  const int64_t dx_count = g.batch * g.in_h * g.in_w * g.in_c, dy_count = g.out_pixels() * g.out_c;
  std::fill(dx, dx + dx_count, 0.0f);
  if (dx_count == 0 || dy_count == 0) return;
  const int64_t pixels = g.out_h * g.out_w, patch = g.patch_size();
  const bool fast = fast_path_for(mult.mode, dy, dy_count, w, patch * g.out_c, parallel_for);
  const DenseSource grad(g.out_c), filter_t(patch);
  std::vector<float> w_t(static_cast<size_t>(patch * g.out_c));  // [out_c, patch]
  transpose(w, patch, g.out_c, w_t.data(), parallel_for);
  // One image per task: images write disjoint parts of dx, and within an image col2im adds in a fixed order.
  auto work = [&](int64_t begin, int64_t end) {
    std::vector<float> columns(static_cast<size_t>(pixels * patch));
    for (int64_t n = begin; n < end; ++n) {
      const GemmOperand image_grad{&grad, dy + n * pixels * g.out_c};
      approximate_gemm(mult, image_grad, GemmOperand{&filter_t, w_t.data()}, pixels, patch, g.out_c, columns.data(),
                       patch, fast, run_serially, 1);
      col2im(g, columns.data(), dx + n * g.in_h * g.in_w * g.in_c);
    }
  };
  parallel_for(g.batch, pixels * patch * g.out_c * 2, work);
}

void conv2d_backprop_filter_cpu(const Multiplier& mult, const ConvGeometry& g, const float* x, const float* dy,
                                float* dw, const ParallelFor& parallel_for, int num_threads) {
  // dw = x^T (*) dy computed as its transpose dw^T = dy^T (*) x: the im2col matrix is then read along its rows
  // (contiguous channels) and packed once. The products keep x as their left operand through the transposed
  // table (every other mode is symmetric in its operands). dw^T is small (out_c x patch) and transposed at the end.
  const int64_t dy_count = g.out_pixels() * g.out_c;
  std::vector<float> dy_t(static_cast<size_t>(dy_count));  // [out_c, out_pixels]
  transpose(dy, g.out_pixels(), g.out_c, dy_t.data(), parallel_for);
  std::vector<float> dw_t(static_cast<size_t>(g.patch_size() * g.out_c));  // [out_c, patch]
  const DenseSource grad_t(g.out_pixels());
  const Im2ColSource patches(g);
  const bool fast = fast_path_for(mult.mode, dy, dy_count, x, g.batch * g.in_h * g.in_w * g.in_c, parallel_for);
  approximate_gemm(transposed_table(mult), GemmOperand{&grad_t, dy_t.data()}, GemmOperand{&patches, x}, g.out_c,
                   g.patch_size(), g.out_pixels(), dw_t.data(), g.patch_size(), fast, parallel_for, num_threads);
  transpose(dw_t.data(), g.out_c, g.patch_size(), dw, parallel_for);
}

void matmul_cpu(const Multiplier& mult, const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k,
                bool transpose_a, bool transpose_b, const ParallelFor& parallel_for, int num_threads) {
  // Transposed operands are materialised once, so packing reads rows.
  std::vector<float> a_t, b_t;
  const bool fast = fast_path_for(mult.mode, a, m * k, b, k * n, parallel_for);
  if (transpose_a) {
    a_t.resize(static_cast<size_t>(m * k));
    transpose(a, k, m, a_t.data(), parallel_for);
    a = a_t.data();
  }
  if (transpose_b) {
    b_t.resize(static_cast<size_t>(k * n));
    transpose(b, n, k, b_t.data(), parallel_for);
    b = b_t.data();
  }
  const DenseSource left(k), right(n);
  approximate_gemm(mult, GemmOperand{&left, a}, GemmOperand{&right, b}, m, n, k, c, n, fast, parallel_for,
                   num_threads);
}

}  // namespace amdnn
