// The one computation behind every op: C = A (*) B, each product through a multiplier, fp32 accumulation in k order.
//
// Conv2d forward and both gradients and matmul and its gradients all reduce to this GEMM over "sources" that present
// a logical matrix row by row (dense, transposed, or an implicit im2col of an NHWC tensor), so the multiplier code
// lives in one place. Accumulation: each C element is one running fp32 sum over k = 0..K-1 in order; work is split
// only over rows and columns of C, never over k, so the bits do not depend on the thread count.
// This header is free of TensorFlow so the kernels compile (and are tested) quickly; a CUDA GEMM will take the same
// arguments.
#ifndef AMDNN_OPS_CC_GEMM_H_
#define AMDNN_OPS_CC_GEMM_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>

#include "multiplier.h"

namespace amdnn {

// A logical matrix, read one row segment at a time.
class MatrixSource {
 public:
  virtual ~MatrixSource() = default;
  // Writes elements (row, col0 .. col0 + count - 1) to out.
  virtual void read(int64_t row, int64_t col0, int64_t count, float* out) const = 0;
};

// A row-major matrix in memory, or the transpose of one.
class DenseSource final : public MatrixSource {
 public:
  // `data` holds the stored matrix with `stored_cols` columns; transposed=true presents its transpose.
  DenseSource(const float* data, int64_t stored_cols, bool transposed)
      : data_(data), stored_cols_(stored_cols), transposed_(transposed) {}
  void read(int64_t row, int64_t col0, int64_t count, float* out) const override;

 private:
  const float* data_;
  int64_t stored_cols_;
  bool transposed_;
};

// Geometry of an NHWC conv2d with an HWIO filter.
struct ConvGeometry {
  int64_t batch, in_h, in_w, in_c;
  int64_t filter_h, filter_w, out_c;
  int64_t stride_h, stride_w, dilation_h, dilation_w;
  int64_t pad_top, pad_left;
  int64_t out_h, out_w;
  int64_t patch_size() const { return filter_h * filter_w * in_c; }  // K of the forward GEMM
  int64_t out_pixels() const { return batch * out_h * out_w; }       // M of the forward GEMM
};

// The im2col matrix [out_pixels, patch] of x without materialising it; transposed=true presents [patch, out_pixels].
class Im2ColSource final : public MatrixSource {
 public:
  Im2ColSource(const float* x, const ConvGeometry& g, bool transposed) : x_(x), g_(g), transposed_(transposed) {}
  void read(int64_t row, int64_t col0, int64_t count, float* out) const override;

 private:
  float at(int64_t pixel, int64_t patch_index) const;
  const float* x_;
  ConvGeometry g_;
  bool transposed_;
};

// A multiplier ready for the kernels: the mode and, for table modes, the canonical 128 x 128 table.
struct Multiplier {
  Mode mode = Mode::kAcc32;
  std::array<uint8_t, kTableSize> table7{};
};

// Runs work(begin, end) over [0, num_tasks) on a thread pool; cost_per_task in cycles guides the sharding.
using ParallelFor = std::function<void(int64_t num_tasks, int64_t cost_per_task,
                                       const std::function<void(int64_t, int64_t)>& work)>;

// Range summary of an operand: whether the vectorised formulas are exact for every product (see gemm_cpu.cc).
struct OperandRange {
  bool has_inf_or_nan = false;
  int32_t min_exponent = 255;  // over normal operands (biased exponent 1..254); 255/0 when there are none
  int32_t max_exponent = 0;
};
OperandRange summarize_operand(const float* values, int64_t count);
bool fast_path_is_exact(Mode mode, const OperandRange& a, const OperandRange& b);

// C[m, n] (row-major, leading dimension ldc) = A[m, k] (*) B[k, n]. A is the left operand of every product (the
// table's first index). fast_path: from fast_path_is_exact over the operands' values.
void approximate_gemm(const Multiplier& multiplier, const MatrixSource& a, const MatrixSource& b, int64_t m,
                      int64_t n, int64_t k, float* c, int64_t ldc, bool fast_path, const ParallelFor& parallel_for);

// A ParallelFor that runs everything on the calling thread.
void run_serially(int64_t num_tasks, int64_t cost_per_task, const std::function<void(int64_t, int64_t)>& work);

// Which kernels this build contains, e.g. "avx512 (vbmi tables)" or "generic".
std::string kernel_description();

}  // namespace amdnn

#endif  // AMDNN_OPS_CC_GEMM_H_
