// CPU GEMM through a multiplier: packed, cache-blocked, multi-threaded over tiles of C, vectorised per x86-64 level.
//
// Two kernels compute the same bits:
// - the generic kernel calls product<M>() of multiplier.h for every pair (any CPU, any operands);
// - the fast kernel decodes each operand once while packing (sign/exponent and mantissa parts, a zero mask) and
//   then needs 1-11 vector instructions per 8 or 16 products (see docs/performance.md). Its formulas assume that
//   no product over- or underflows and no operand is inf/NaN; fast_path_is_exact() checks that from a range summary
//   of both operands (exponent sums in [128, 380]), which holds for any practical layer; otherwise the generic
//   kernel runs. Both accumulate each C element over k in order, so they agree bit for bit.
// This file is the skeleton every level shares (sources, range check, decoding, packing, blocking, threading); the
// instruction set is a thin layer that supplies the register tile, the formulation per mode and the inner product:
// gemm_cpu_avx512.h (x86-64-v4, with or without VBMI), gemm_cpu_avx2.h (x86-64-v3), or none (generic kernel only).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "gemm.h"
#include "gemm_cpu_layer.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#include "gemm_cpu_avx512.h"
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "gemm_cpu_avx2.h"
#else
namespace amdnn {
namespace cpu_layer {
constexpr const char* kLevel = "no vector layer (generic kernel only)";
constexpr int64_t kMR = 6;
constexpr int64_t kNR = 32;
constexpr bool kMaskRegisters = false;
template <Mode M>
constexpr Form kForm = Form::kNone;
template <Mode M>
void micro_fast(const MicroArgs&) {}
inline void round_to_half_in_place(uint32_t*, size_t) {}
inline void expand_columns(const uint32_t*, int64_t, const uint8_t*, uint8_t*) {}
}  // namespace cpu_layer
}  // namespace amdnn
#endif

namespace amdnn {

// ---------------------------------------------------------------------------------------------- sources

void DenseSource::read(const uint32_t* data, int64_t row, int64_t col0, int64_t count, uint32_t* out) const {
  std::memcpy(out, data + row * cols_ + col0, static_cast<size_t>(count) * sizeof(uint32_t));
}

void transpose(const float* in, int64_t rows, int64_t cols, float* out, const ParallelFor& parallel_for) {
  constexpr int64_t kBlock = 32;  // 32 x 32 floats: both sides stay in L1
  // A task a band of kBlock rows: each writes its own columns of out.
  parallel_for((rows + kBlock - 1) / kBlock, kBlock * cols * 4, [&](int64_t first, int64_t last) {
    for (int64_t i0 = first * kBlock; i0 < std::min(rows, last * kBlock); i0 += kBlock)
      for (int64_t j0 = 0; j0 < cols; j0 += kBlock)
        for (int64_t i = i0; i < std::min(rows, i0 + kBlock); ++i)
          for (int64_t j = j0; j < std::min(cols, j0 + kBlock); ++j) out[j * rows + i] = in[i * cols + j];
  });
}

void Im2ColSource::read_rows(const uint32_t* data, int64_t row0, int64_t rows, int64_t col0, int64_t count,
                             uint32_t* out, int64_t out_stride) const {
  struct Run {
    int64_t at, length, ci, dh, dw;  // out offset, columns, first channel, tap offsets less the padding
  };
  thread_local std::vector<Run> runs;  // a call per packed block: no allocation once it has grown
  runs.clear();
  for (int64_t done = 0; done < count;) {
    const int64_t p = col0 + done, segment = p / g_.in_c, ci = p % g_.in_c;
    const int64_t kh = segment / g_.filter_w, kw = segment % g_.filter_w;
    const int64_t length = std::min(count - done, g_.in_c - ci);
    runs.push_back({done, length, ci, kh * g_.dilation_h - g_.pad_top, kw * g_.dilation_w - g_.pad_left});
    done += length;
  }
  const int64_t pixels = g_.out_h * g_.out_w;
  int64_t n = row0 / pixels, ho = (row0 % pixels) / g_.out_w, wo = row0 % g_.out_w;
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t* dst = out + r * out_stride;
    for (const Run& run : runs) {
      const int64_t hi = ho * g_.stride_h + run.dh, wi = wo * g_.stride_w + run.dw;
      if (hi < 0 || hi >= g_.in_h || wi < 0 || wi >= g_.in_w) {
        std::fill(dst + run.at, dst + run.at + run.length, 0u);  // zero padding: +0.0, a zero in every decoded plane
      } else {
        const uint32_t* src = data + ((n * g_.in_h + hi) * g_.in_w + wi) * g_.in_c + run.ci;
        std::memcpy(dst + run.at, src, static_cast<size_t>(run.length) * sizeof(uint32_t));
      }
    }
    if (++wo == g_.out_w) {  // the next row is the next output pixel
      wo = 0;
      if (++ho == g_.out_h) {
        ho = 0;
        ++n;
      }
    }
  }
}

void Im2ColSource::read(const uint32_t* data, int64_t row, int64_t col0, int64_t count, uint32_t* out) const {
  read_rows(data, row, 1, col0, count, out, count);
}

// ---------------------------------------------------------------------------------------------- range check

OperandRange summarize_operand(const float* values, int64_t count) {
  // Over the exponent fields in place: the largest (0x7F800000 = inf/NaN present) and the smallest non-zero one.
  // It reads every operand of every op call, so 16 (AVX-512) or 8 (AVX2) values per instruction (GCC 12 does not
  // vectorise this reduction by itself).
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(values);
  uint32_t lo = kExpMask, hi = 0;
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512i exp_mask = _mm512_set1_epi32(static_cast<int>(kExpMask));
  __m512i lo16 = exp_mask, hi16 = _mm512_setzero_si512();
  for (; i + 16 <= count; i += 16) {
    const __m512i e = _mm512_and_si512(_mm512_loadu_si512(bits + i), exp_mask);
    hi16 = _mm512_max_epu32(hi16, e);
    lo16 = _mm512_min_epu32(lo16, _mm512_mask_mov_epi32(e, _mm512_testn_epi32_mask(e, e), exp_mask));
  }
  lo = _mm512_reduce_min_epu32(lo16);
  hi = _mm512_reduce_max_epu32(hi16);
#elif defined(__AVX2__)
  const __m256i exp_mask = _mm256_set1_epi32(static_cast<int>(kExpMask)), zero = _mm256_setzero_si256();
  __m256i lo8 = exp_mask, hi8 = zero;
  for (; i + 8 <= count; i += 8) {
    const __m256i e = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + i)), exp_mask);
    hi8 = _mm256_max_epu32(hi8, e);
    lo8 = _mm256_min_epu32(lo8, _mm256_or_si256(e, _mm256_and_si256(_mm256_cmpeq_epi32(e, zero), exp_mask)));
  }
  alignas(32) uint32_t lanes_lo[8], lanes_hi[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes_lo), lo8);
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes_hi), hi8);
  for (int j = 0; j < 8; ++j) {
    lo = std::min(lo, lanes_lo[j]);
    hi = std::max(hi, lanes_hi[j]);
  }
#endif
  for (; i < count; ++i) {
    const uint32_t e = bits[i] & kExpMask;
    hi = e > hi ? e : hi;
    lo = (e != 0 && e < lo) ? e : lo;
  }
  if (hi == kExpMask) return OperandRange{true, 255, 0};
  return OperandRange{false, static_cast<int32_t>(lo >> 23), static_cast<int32_t>(hi >> 23)};
}

OperandRange summarize_operand(const float* values, int64_t count, const ParallelFor& parallel_for) {
  constexpr int64_t kChunk = int64_t{1} << 20;  // 4 MB a task: ~0.3 ms at one core's memory bandwidth
  const int64_t chunks = (count + kChunk - 1) / kChunk;
  if (chunks <= 1) return summarize_operand(values, count);
  std::vector<OperandRange> parts(static_cast<size_t>(chunks));
  parallel_for(chunks, kChunk, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c)
      parts[c] = summarize_operand(values + c * kChunk, std::min(kChunk, count - c * kChunk));
  });
  OperandRange all;
  for (const OperandRange& part : parts) {
    if (part.has_inf_or_nan) return OperandRange{true, 255, 0};
    all.min_exponent = std::min(all.min_exponent, part.min_exponent);
    all.max_exponent = std::max(all.max_exponent, part.max_exponent);
  }
  return all;
}

bool fast_path_is_exact(Mode mode, const OperandRange& a, const OperandRange& b) {
  if (mode == Mode::kFp16) return true;  // IEEE half arithmetic throughout: no range rules to emulate
  if (a.has_inf_or_nan || b.has_inf_or_nan) return false;
  // Every product is a zero when one side is all zeros; the kernels without mask registers still form (and then
  // scale by 0) the other side's parts, which stay finite below exponent 254.
  if (a.max_exponent == 0 || b.max_exponent == 0) return a.max_exponent <= 253 && b.max_exponent <= 253;
  // Biased exponents with Ea + Eb - 127 in [1, 253] keep every product, carry included, a normal number; and
  // below 254 each, pb * T (the table kernels' intermediate, up to 2^(Eb-126)) stays finite.
  return a.min_exponent + b.min_exponent >= 128 && a.max_exponent + b.max_exponent <= 380 &&
         a.max_exponent <= 253 && b.max_exponent <= 253;
}

namespace {

using cpu_layer::Decoded;
using cpu_layer::Form;
using cpu_layer::kMR;
using cpu_layer::kNR;
using cpu_layer::MicroArgs;

// ---------------------------------------------------------------------------------------------- blocking

// Register tile MR x NR: the layer's (AVX-512: 6 x 32, AVX2: 6 x 16; 12 accumulators either way). KC keeps a B
// micro-panel (KC x NR, up to three 4-byte planes) inside L1; an A block (MC x KC, up to three planes) stays
// inside L2, and a large MC means B is re-packed less often (once per MC rows).
constexpr int64_t kKC = 128;
constexpr int64_t kMC = 384;
constexpr int64_t kNC = 512;
static_assert(kMC % kMR == 0 && kNC % kNR == 0, "blocks hold whole register tiles");

// TensorFlow's CPU threads set FTZ and DAZ; the definitions are IEEE, so the kernels run with both off.
class ScopedIeeeArithmetic {
 public:
#if defined(__SSE__)
  ScopedIeeeArithmetic() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ & ~(0x8000u | 0x0040u)); }
  ~ScopedIeeeArithmetic() { _mm_setcsr(saved_); }

 private:
  unsigned int saved_;
#endif
};

// ---------------------------------------------------------------------------------------------- decoding

// What the packers store per formulation (see cpu_layer::Form): part1 for the modes whose products need a second
// field; without mask registers part2 (the left operand's scale, the right one's lane mask); with them a 16-bit mask
// per left operand and a 32-bit one per k of the right operand; and the permute masks of kTablePermute.
template <Mode M>
constexpr Form kForm = cpu_layer::kForm<M>;
template <Mode M>
constexpr bool kFastKernel = kForm<M> != Form::kNone;
template <Mode M>
constexpr bool kUsesPart1 = kForm<M> == Form::kMbmFormula || kForm<M> == Form::kTablePermute ||
                            kForm<M> == Form::kTableDwords || kForm<M> == Form::kTableColumns;
template <Mode M>
constexpr bool kNeedsZeroMask = kForm<M> == Form::kAddBits || kForm<M> == Form::kMbmFormula;
template <Mode M>
constexpr bool kUsesPart2 = (kNeedsZeroMask<M> && !cpu_layer::kMaskRegisters) || kForm<M> == Form::kTableColumns;
template <Mode M>
constexpr bool kMasked = kNeedsZeroMask<M> && cpu_layer::kMaskRegisters;
template <Mode M>
constexpr bool kTableLookup = kForm<M> == Form::kTablePermute;
template <Mode M>
constexpr bool kExpandsColumns = kForm<M> == Form::kTableColumns;

// lane: the right operand's lane in its register tile (j mod NR), on which the dword forms' control word depends.
template <Mode M, bool kLeft>
inline Decoded decode(uint32_t u, int64_t lane) {
  constexpr Form F = kForm<M>;
  const bool nonzero = (u & kExpMask) != 0u;
  // part2 where there are no mask registers: the left operand's FMA scale (1.0f or 0.0f), the right one's lane mask.
  // A zero left operand's part0 is 0 (instead of its bits less the bias) so that its products stay finite.
  const uint32_t takes_part = kLeft ? (nonzero ? kOneBits : 0u) : (nonzero ? 0xFFFFFFFFu : 0u);
  if constexpr (M == Mode::kAcc32) return {nonzero ? u : (u & kSignMask), 0u, 0u, nonzero};
  if constexpr (M == Mode::kFp16) return {bits_of(round_to_half(float_of(u))), 0u, 0u, nonzero};
  if constexpr (M == Mode::kAcc16) return {nonzero ? (u & 0xFFFF0000u) : 0u, 0u, 0u, nonzero};
  if constexpr (F == Form::kAddBits) {
    // Mitchell is the integer sum of the operands' bit patterns less the bias: the mantissa carry lands in the
    // exponent by itself and the sign bits add to their xor.
    const uint32_t kept = (M == Mode::kMit16) ? (u & 0xFFFF0000u) : u;
    return {kLeft ? (nonzero ? kept - kOneBits : 0u) : kept, 0u, takes_part, nonzero};
  }
  if constexpr (F == Form::kMbmFormula) {
    constexpr cpu_layer::MbmConstants c = cpu_layer::kMbm<M>;
    const uint32_t kept = (u & c.kept) | c.forced, field = (u & c.field) | c.forced;
    if constexpr (kLeft) return {nonzero ? kept - kOneBits : 0u, field - c.shift, takes_part, nonzero};
    return {kept, field, takes_part, nonzero};
  }
  // Tables (am16 and lut): the product is pa * (pb * T) with pa = +-2^(Ea-127) (0 for a rule 2 zero), pb likewise
  // and T = 2^c (1 + M/128) the table entry: pb * T is pb's bits plus the entry c << 7 | M placed at bit 16, and
  // the multiplication by the power of two pa is exact in range, so an FMA adds exactly the product. The left
  // operand picks the table row (byte offset), the right one the byte within it (kTablePermute: in byte 2 of the
  // lane, where vpermt2b reads it; kTableDwords: cpu_layer::dwords_control).
  const uint32_t field = (u >> 16) & 0x7Fu;
  if constexpr (F == Form::kTableColumns) {
    // The left operand's row in a k's expanded columns (its table row at 128 / NR times that); the right one's
    // column (the zero column for a rule 2 zero) and, for blocks that permute rows, its control word.
    if constexpr (kLeft) return {u & 0xFF800000u, field * static_cast<uint32_t>(kNR), 0u, nonzero};
    return {nonzero ? (u & 0xFF800000u) : 0u, nonzero ? field : 128u,
            nonzero ? cpu_layer::dwords_control(field, lane) : cpu_layer::kDwordsZeroControl, nonzero};
  }
  if constexpr (kLeft) return {u & 0xFF800000u, field << kTableBits, 0u, nonzero};
  if constexpr (F == Form::kTableDwords)
    return {nonzero ? (u & 0xFF800000u) : 0u,
            nonzero ? cpu_layer::dwords_control(field, lane) : cpu_layer::kDwordsZeroControl, takes_part, nonzero};
  return {nonzero ? (u & 0xFF800000u) : 0u, field << 16, takes_part, nonzero};
}

// ---------------------------------------------------------------------------------------------- packing

// Packed blocks of one task: A as [panel][r][k] (row-major per panel, so packing is a copy), B as [panel][k][NR].
// Kept per thread across calls: TF's worker threads live as long as the process, and fresh buffers cost page faults.
struct Packed {
  std::vector<uint32_t> a0, a1, a2, b0, b1, b2, b_mask;
  std::vector<uint16_t> a_mask;
  std::vector<uint64_t> b_permute_mask;  // tables: per k and 16-lane half, byte 2 of each non-zero lane
  std::vector<uint8_t> b_columns;        // kTableColumns: one B panel's expanded columns, [kc][128][NR]
};

// Packing copies the raw bits (im2col read on the fly; padding rows and columns +0.0, which take no part); a block
// that takes the fast kernel is then decoded in place into the parts its layer reads.
void pack_a(const MatrixSource& source, const uint32_t* raw, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
            Packed& p) {
  const int64_t rows = (mc + kMR - 1) / kMR * kMR;
  p.a0.resize(static_cast<size_t>(rows * kc));
  source.read_rows(raw, m0, mc, k0, kc, p.a0.data(), kc);  // row i at i * kc: panel * MR * kc + r * kc
  std::fill(p.a0.data() + mc * kc, p.a0.data() + rows * kc, 0u);
}

void pack_b(const MatrixSource& source, const uint32_t* raw, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
            Packed& p) {
  const int64_t panels = (nc + kNR - 1) / kNR;
  p.b0.resize(static_cast<size_t>(panels * kc * kNR));
  for (int64_t panel = 0; panel < panels; ++panel) {  // a panel's rows are kNR apart
    const int64_t cols = std::min(kNR, nc - panel * kNR);
    uint32_t* dst = p.b0.data() + panel * kc * kNR;
    source.read_rows(raw, k0, kc, n0 + panel * kNR, cols, dst, kNR);
    if (cols < kNR)  // the columns past nc: +0.0
      for (int64_t kk = 0; kk < kc; ++kk) std::fill(dst + kk * kNR + cols, dst + (kk + 1) * kNR, 0u);
  }
}

// fp16 decodes to the operand rounded to binary16 and back, nothing else: the layer's conversion instructions do
// that many at a time (the scalar round_to_half is ~30 instructions a value, as much as the products it feeds on
// layers of 64 channels).
template <Mode M>
bool decoded_by_layer(std::vector<uint32_t>& plane) {
  if constexpr (M != Mode::kFp16) return false;
  cpu_layer::round_to_half_in_place(plane.data(), plane.size());
  return true;
}

template <Mode M>
void decode_a(Packed& p) {
  if (decoded_by_layer<M>(p.a0)) return;
  const size_t size = p.a0.size();
  if constexpr (kUsesPart1<M>) p.a1.resize(size);
  if constexpr (kUsesPart2<M>) p.a2.resize(size);
  if constexpr (kMasked<M>) p.a_mask.resize(size);
  for (size_t i = 0; i < size; ++i) {
    const Decoded d = decode<M, true>(p.a0[i], 0);
    p.a0[i] = d.part0;
    if constexpr (kUsesPart1<M>) p.a1[i] = d.part1;
    if constexpr (kUsesPart2<M>) p.a2[i] = d.part2;
    if constexpr (kMasked<M>) p.a_mask[i] = d.nonzero ? 0xFFFF : 0;
  }
}

template <Mode M>
void decode_b(Packed& p) {
  if (decoded_by_layer<M>(p.b0)) return;
  const size_t size = p.b0.size(), rows = size / kNR;  // rows: panel * kc + k
  if constexpr (kUsesPart1<M>) p.b1.resize(size);
  if constexpr (kUsesPart2<M>) p.b2.resize(size);
  if constexpr (kMasked<M>) p.b_mask.resize(rows);
  if constexpr (kTableLookup<M>) p.b_permute_mask.resize(rows * 2);
  for (size_t row = 0; row < rows; ++row) {
    uint32_t mask = 0;
    for (size_t j = 0; j < static_cast<size_t>(kNR); ++j) {
      const size_t at = row * kNR + j;
      const Decoded d = decode<M, false>(p.b0[at], static_cast<int64_t>(j));
      p.b0[at] = d.part0;
      if constexpr (kUsesPart1<M>) p.b1[at] = d.part1;
      if constexpr (kUsesPart2<M>) p.b2[at] = d.part2;
      mask |= static_cast<uint32_t>(d.nonzero) << j;
    }
    if constexpr (kMasked<M>) p.b_mask[row] = mask;
    if constexpr (kTableLookup<M>) {
      for (int half = 0; half < 2; ++half) {
        uint64_t bytes = 0;
        for (int j = 0; j < 16; ++j) bytes |= static_cast<uint64_t>((mask >> (16 * half + j)) & 1u) << (4 * j + 2);
        p.b_permute_mask[row * 2 + half] = bytes;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------- micro-kernels

template <Mode M>
void micro_generic(const MicroArgs& x) {
  if (!x.load_acc)
    for (int64_t r = 0; r < kMR; ++r) std::fill(x.acc + r * x.ld_acc, x.acc + r * x.ld_acc + kNR, 0.0f);
  for (int64_t k = 0; k < x.kc; ++k) {
    const uint32_t* b_row = x.b0 + k * kNR;
    for (int64_t r = 0; r < kMR; ++r) {
      const float a = float_of(x.a0[r * x.kc + k]);
      float* acc = x.acc + r * x.ld_acc;
      for (int64_t j = 0; j < kNR; ++j) acc[j] += product<M>(a, float_of(b_row[j]), x.table7);
    }
  }
}

// ---------------------------------------------------------------------------------------------- driver

struct GemmProblem {
  const Multiplier* multiplier;
  const MatrixSource* a;
  const MatrixSource* b;
  const uint32_t* a_raw;
  const uint32_t* b_raw;
  int64_t m, n, k;
  float* c;
  int64_t ldc;
  int64_t mc, nc;
  bool all_fast;  // the whole operands' ranges allow the fast kernel: no per-block check

  float* at(int64_t i, int64_t j) const { return c + i * ldc + j; }
};

// One MC x NC block of C over all of K. Each K block takes the fast kernel when the whole operands allow it
// (all_fast) or else when its own packed A and B blocks do (the same range rule over the block's values): a single
// tiny gradient value sends only the blocks that read it to the generic kernel. Returns the generic products.
template <Mode M>
int64_t run_block(const GemmProblem& g, int64_t m0, int64_t n0, Packed& p) {
  const int64_t mc = std::min(g.mc, g.m - m0), nc = std::min(g.nc, g.n - n0);
  const int64_t a_panels = (mc + kMR - 1) / kMR, b_panels = (nc + kNR - 1) / kNR;
  alignas(64) float tile[kMR * kNR];
  int64_t generic_products = 0;
  for (int64_t k0 = 0; k0 < g.k; k0 += kKC) {
    const int64_t kc = std::min(kKC, g.k - k0);
    pack_b(*g.b, g.b_raw, k0, kc, n0, nc, p);
    pack_a(*g.a, g.a_raw, m0, mc, k0, kc, p);
    bool fast = false;
    if constexpr (kFastKernel<M>) {
      fast = g.all_fast || fast_path_is_exact(M, summarize_operand(reinterpret_cast<const float*>(p.a0.data()),
                                                                   static_cast<int64_t>(p.a0.size())),
                                              summarize_operand(reinterpret_cast<const float*>(p.b0.data()),
                                                                static_cast<int64_t>(p.b0.size())));
      if (fast) {
        decode_a<M>(p);
        decode_b<M>(p);
      }
    }
    if (!fast) generic_products += mc * nc * kc;
    auto run_tile = [&](int64_t pa, int64_t pb, const uint8_t* b_columns) {
      const int64_t i0 = m0 + pa * kMR, j0 = n0 + pb * kNR;
      const int64_t rows = std::min(kMR, mc - pa * kMR), cols = std::min(kNR, nc - pb * kNR);
      // The running sums continue across k blocks through C, so the order is that of one pass over k. Full tiles
      // accumulate in C itself; edge tiles go through the tile buffer.
      const bool direct = rows == kMR && cols == kNR;
      if (!direct && k0 > 0) {
        std::fill(tile, tile + kMR * kNR, 0.0f);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < cols; ++j) tile[r * kNR + j] = *g.at(i0 + r, j0 + j);
      }
      const int64_t a_at = pa * kMR * kc, b_at = pb * kc * kNR;
      const MicroArgs x{kc,
                        p.a0.data() + a_at,
                        fast && kUsesPart1<M> ? p.a1.data() + a_at : nullptr,
                        fast && kUsesPart2<M> ? p.a2.data() + a_at : nullptr,
                        fast && kMasked<M> ? p.a_mask.data() + a_at : nullptr,
                        p.b0.data() + b_at,
                        fast && kUsesPart1<M> ? p.b1.data() + b_at : nullptr,
                        fast && kUsesPart2<M> ? p.b2.data() + b_at : nullptr,
                        fast && kMasked<M> ? p.b_mask.data() + pb * kc : nullptr,
                        fast && kTableLookup<M> ? p.b_permute_mask.data() + pb * kc * 2 : nullptr,
                        b_columns,
                        direct ? g.c + i0 * g.ldc + j0 : tile,
                        direct ? g.ldc : kNR,
                        k0 > 0,
                        g.multiplier->table7.data()};
      if (fast) {
        cpu_layer::micro_fast<M>(x);
      } else {
        micro_generic<M>(x);
      }
      if (!direct)
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < cols; ++j) *g.at(i0 + r, j0 + j) = tile[r * kNR + j];
    };
    if (kExpandsColumns<M> && fast && mc >= cpu_layer::kColumnsMinRows) {
      // One B panel's expanded columns (kc x 128 x NR bytes: 256 KB for kc = 128, NR = 16) stay in L2 while every
      // A panel of the block runs against them: B panels outer, built once each.
      p.b_columns.resize(static_cast<size_t>(kc * 128 * kNR));
      for (int64_t pb = 0; pb < b_panels; ++pb) {
        cpu_layer::expand_columns(p.b1.data() + pb * kc * kNR, kc, g.multiplier->columns7.data(),
                                  p.b_columns.data());
        for (int64_t pa = 0; pa < a_panels; ++pa) run_tile(pa, pb, p.b_columns.data());
      }
    } else {
      for (int64_t pa = 0; pa < a_panels; ++pa)
        for (int64_t pb = 0; pb < b_panels; ++pb) run_tile(pa, pb, nullptr);
    }
  }
  return generic_products;
}

// fast calls, generic calls, fast products, generic products (see PathCounts). Relaxed: counters, no ordering.
std::atomic<int64_t> path_counters[4];

template <Mode M>
void run_mode(const GemmProblem& g, const ParallelFor& parallel_for) {
  const int64_t n_blocks = (g.n + g.nc - 1) / g.nc, tasks = ((g.m + g.mc - 1) / g.mc) * n_blocks;
  const int64_t cost = g.mc * g.nc * g.k * 2;  // ~2 cycles per product on the fast path
  std::atomic<int64_t> generic{0};
  parallel_for(tasks, cost, [&](int64_t begin, int64_t end) {
    ScopedIeeeArithmetic ieee;
    thread_local Packed packed;
    int64_t generic_here = 0;
    for (int64_t t = begin; t < end; ++t) generic_here += run_block<M>(g, (t / n_blocks) * g.mc, (t % n_blocks) * g.nc, packed);
    generic.fetch_add(generic_here, std::memory_order_relaxed);
  });
  // A call counts as generic when any of its blocks was.
  const int64_t generic_products = generic.load(), products = g.m * g.n * g.k;
  path_counters[generic_products == 0 ? 0 : 1].fetch_add(1, std::memory_order_relaxed);
  path_counters[2].fetch_add(products - generic_products, std::memory_order_relaxed);
  path_counters[3].fetch_add(generic_products, std::memory_order_relaxed);
}

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

}  // namespace

void approximate_gemm(const Multiplier& multiplier, const GemmOperand& a, const GemmOperand& b, int64_t m, int64_t n,
                      int64_t k, float* c, int64_t ldc, bool fast_path, const ParallelFor& parallel_for,
                      int num_threads) {
  if (m <= 0 || n <= 0) return;
  GemmProblem g{&multiplier, a.source, b.source, reinterpret_cast<const uint32_t*>(a.values),
                reinterpret_cast<const uint32_t*>(b.values), m, n, k, c, ldc,
                std::min(kMC, round_up(m, kMR)), std::min(kNC, round_up(n, kNR)), fast_path};
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) *g.at(i, j) = 0.0f;
    return;
  }
  // Enough tasks to keep every thread busy on small layers (4x4x512 at batch 32 is only 512 rows). A smaller MC
  // re-packs B more often, a smaller NC re-packs A more often: split the side whose operand is smaller.
  const int64_t min_tasks = 3 * std::max(num_threads, 1);
  auto tasks = [&] { return ((g.m + g.mc - 1) / g.mc) * ((g.n + g.nc - 1) / g.nc); };
  while (tasks() < min_tasks && (g.mc > kMR || g.nc > kNR)) {
    const bool split_n = g.nc > kNR && (g.m <= g.n || g.mc <= kMR);
    if (split_n) {
      g.nc = round_up(g.nc / 2, kNR);
    } else {
      g.mc = round_up(g.mc / 2, kMR);
    }
  }
  dispatch_mode(
      multiplier.mode, [&](auto mode) { run_mode<decltype(mode)::value>(g, parallel_for); }, [] {});
}

const char* cpu_kernel_level() { return cpu_layer::kLevel; }

bool cpu_fast_kernel(Mode mode) {
  return dispatch_mode(mode, [](auto m) { return kFastKernel<decltype(m)::value>; }, [] { return false; });
}

PathCounts path_counts() {
  return PathCounts{path_counters[0].load(std::memory_order_relaxed), path_counters[1].load(std::memory_order_relaxed),
                    path_counters[2].load(std::memory_order_relaxed), path_counters[3].load(std::memory_order_relaxed)};
}

void run_serially(int64_t num_tasks, int64_t, const std::function<void(int64_t, int64_t)>& work) {
  work(0, num_tasks);
}

}  // namespace amdnn
