// The one computation behind every op: C = A (*) B, each product through a multiplier, fp32 accumulation in k order.
//
// Conv2d forward and both gradients and matmul and its gradients all reduce to this GEMM over "sources" that present
// a logical matrix row by row (dense, or an implicit im2col of an NHWC tensor), so the multiplier code
// lives in one place. Accumulation: each C element is one running fp32 sum over k = 0..K-1 in order; work is split
// only over rows and columns of C, never over k, so the bits do not depend on the thread count.
// This header is free of TensorFlow so the kernels compile (and are tested) quickly; a CUDA GEMM will take the same
// arguments.
#ifndef AMDNN_OPS_CC_GEMM_H_
#define AMDNN_OPS_CC_GEMM_H_

#include <array>
#include <cstdint>
#include <functional>

#include "conv_geometry.h"
#include "multiplier.h"

namespace amdnn {

// A logical matrix over a stored tensor, read one row segment at a time. The element type is 32-bit: the kernels
// read the raw fp32 bits or planes decoded from them with the same layout, through the same source.
class MatrixSource {
 public:
  virtual ~MatrixSource() = default;
  // Writes elements (row, col0 .. col0 + count - 1) of the matrix over `data` to out.
  virtual void read(const uint32_t* data, int64_t row, int64_t col0, int64_t count, uint32_t* out) const = 0;
  // read() of rows row0 .. row0 + rows - 1, row r to out + r * out_stride (the packers' loops: one call a block).
  virtual void read_rows(const uint32_t* data, int64_t row0, int64_t rows, int64_t col0, int64_t count,
                         uint32_t* out, int64_t out_stride) const {
    for (int64_t r = 0; r < rows; ++r) read(data, row0 + r, col0, count, out + r * out_stride);
  }
};

// A row-major matrix in memory with `cols` columns. (Transposed operands are materialised with transpose() first:
// one pass over the tensor, after which every read is a memcpy instead of a strided gather per pack.)
class DenseSource final : public MatrixSource {
 public:
  explicit DenseSource(int64_t cols) : cols_(cols) {}
  void read(const uint32_t* data, int64_t row, int64_t col0, int64_t count, uint32_t* out) const override;

 private:
  int64_t cols_;
};


// The im2col matrix [out_pixels, patch] of an NHWC tensor without materialising it: each row is (kh, kw) runs of
// in_c contiguous channels, read with memcpy.
class Im2ColSource final : public MatrixSource {
 public:
  explicit Im2ColSource(const ConvGeometry& g) : g_(g) {}
  void read(const uint32_t* data, int64_t row, int64_t col0, int64_t count, uint32_t* out) const override;
  // The columns' (kh, kw, ci) runs are found once for the block and the pixel steps along the rows, where a read()
  // a row divided ~6 times (at 32 columns a row, the filter gradient's packing of im2col(x), about half its time on
  // 16 threads; 13-18 % off it: docs/performance.md, Known gaps). read() is its block of one row.
  void read_rows(const uint32_t* data, int64_t row0, int64_t rows, int64_t col0, int64_t count, uint32_t* out,
                 int64_t out_stride) const override;

 private:
  ConvGeometry g_;
};

// One operand of a GEMM: the logical matrix and the stored tensor it reads.
struct GemmOperand {
  const MatrixSource* source;
  const float* values;
};

// A multiplier ready for the kernels: the mode and, for table modes (and am16, which the AVX-512 kernels look up
// like a table), the canonical 128 x 128 table, and the same table by columns (columns7[Fb * 128 + Fa]) followed by
// a row of 128 zeros: the AVX2 kernel expands the right operand's columns (see gemm_cpu_avx2.h), a rule 2 zero's
// being that zero row.
struct Multiplier {
  Mode mode = Mode::kAcc32;
  std::array<uint8_t, kTableSize> table7{};
  std::array<uint8_t, kTableSize + 128> columns7{};
};

// Runs work(begin, end) over [0, num_tasks) on a thread pool; cost_per_task in cycles guides the sharding.
using ParallelFor = std::function<void(int64_t num_tasks, int64_t cost_per_task,
                                       const std::function<void(int64_t, int64_t)>& work)>;

// out[cols, rows] = in[rows, cols]^T, by bands of rows on the pool (a filter gradient's dy is 8.4 M values at 32 x
// 32 x 64, batch 128: memory-bound, too long for one thread of 16).
void transpose(const float* in, int64_t rows, int64_t cols, float* out, const ParallelFor& parallel_for);

// Range summary of an operand: whether the vectorised formulas are exact for every product (see gemm_cpu.cc).
struct OperandRange {
  bool has_inf_or_nan = false;
  int32_t min_exponent = 255;  // over normal operands (biased exponent 1..254); 255/0 when there are none
  int32_t max_exponent = 0;
};
OperandRange summarize_operand(const float* values, int64_t count);
// The same over the pool, by chunks (min and max: the same summary for any split).
OperandRange summarize_operand(const float* values, int64_t count, const ParallelFor& parallel_for);
bool fast_path_is_exact(Mode mode, const OperandRange& a, const OperandRange& b);

// C[m, n] = A[m, k] (*) B[k, n], stored row-major with leading dimension ldc. A is the left operand of every
// product (the table's first index). fast_path: fast_path_is_exact over the whole operands' values; when false, each
// block of the GEMM (an MC x KC block of A with a KC x NC block of B) is checked on its own values and takes the
// fast kernel if they allow it. num_threads sizes the work split.
void approximate_gemm(const Multiplier& multiplier, const GemmOperand& a, const GemmOperand& b, int64_t m, int64_t n,
                      int64_t k, float* c, int64_t ldc, bool fast_path, const ParallelFor& parallel_for,
                      int num_threads);

// Which kernel the CPU GEMM ran, counted for every approximate_gemm call with products (m * n * k of them),
// process-wide and atomic: a call is generic when any of its blocks took the generic kernel, and the products are
// split between the two by block. Read by the AmdnnPathCounts op (ops.path_counts()): a fast path that silently fell
// back to the generic kernel shows here, and tests check that ordinary training takes the fast path.
struct PathCounts {
  int64_t fast_calls, generic_calls, fast_products, generic_products;
};
PathCounts path_counts();

// The instruction-set level the CPU GEMM was compiled for, and whether it has a fast kernel for a mode.
const char* cpu_kernel_level();
bool cpu_fast_kernel(Mode mode);

// A ParallelFor that runs everything on the calling thread.
void run_serially(int64_t num_tasks, int64_t cost_per_task, const std::function<void(int64_t, int64_t)>& work);

}  // namespace amdnn

#endif  // AMDNN_OPS_CC_GEMM_H_
