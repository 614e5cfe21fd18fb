// CPU GEMM through a multiplier: packed, cache-blocked, multi-threaded over tiles of C, vectorised with AVX-512.
//
// Two kernels compute the same bits:
// - the generic kernel calls product<M>() of multiplier.h for every pair (any CPU, any operands);
// - the fast kernel decodes each operand once while packing (sign/exponent and mantissa parts, a zero mask) and
//   then needs 1-10 vector instructions per 16 products (see docs/performance.md). Its formulas assume that no
//   product over- or underflows and no operand is inf/NaN; fast_path_is_exact() checks that from a range summary of
//   both operands (exponent sums in [128, 380]), which holds for any practical layer; otherwise the generic kernel
//   runs. Both accumulate each C element over k in order, so they agree bit for bit.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "gemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#define AMDNN_FAST_AVX512 1
#endif
#if defined(AMDNN_FAST_AVX512) && defined(__AVX512VBMI__)
#define AMDNN_FAST_TABLES 1  // vpermi2b looks up 64 table bytes at once
#endif

namespace amdnn {

// ---------------------------------------------------------------------------------------------- sources

void DenseSource::read(const uint32_t* data, int64_t row, int64_t col0, int64_t count, uint32_t* out) const {
  std::memcpy(out, data + row * cols_ + col0, static_cast<size_t>(count) * sizeof(uint32_t));
}

void transpose(const float* in, int64_t rows, int64_t cols, float* out) {
  constexpr int64_t kBlock = 32;  // 32 x 32 floats: both sides stay in L1
  for (int64_t i0 = 0; i0 < rows; i0 += kBlock)
    for (int64_t j0 = 0; j0 < cols; j0 += kBlock)
      for (int64_t i = i0; i < std::min(rows, i0 + kBlock); ++i)
        for (int64_t j = j0; j < std::min(cols, j0 + kBlock); ++j) out[j * rows + i] = in[i * cols + j];
}

void Im2ColSource::read(const uint32_t* data, int64_t row, int64_t col0, int64_t count, uint32_t* out) const {
  const int64_t n = row / (g_.out_h * g_.out_w), rest = row % (g_.out_h * g_.out_w);
  const int64_t ho = rest / g_.out_w, wo = rest % g_.out_w;
  int64_t done = 0;
  while (done < count) {
    const int64_t p = col0 + done;
    const int64_t segment = p / g_.in_c, ci = p % g_.in_c;
    const int64_t kh = segment / g_.filter_w, kw = segment % g_.filter_w;
    const int64_t run = std::min(count - done, g_.in_c - ci);
    const int64_t hi = ho * g_.stride_h + kh * g_.dilation_h - g_.pad_top;
    const int64_t wi = wo * g_.stride_w + kw * g_.dilation_w - g_.pad_left;
    if (hi < 0 || hi >= g_.in_h || wi < 0 || wi >= g_.in_w) {
      std::fill(out + done, out + done + run, 0u);  // zero padding: +0.0, and a zero in every decoded plane
    } else {
      const uint32_t* src = data + ((n * g_.in_h + hi) * g_.in_w + wi) * g_.in_c + ci;
      std::memcpy(out + done, src, static_cast<size_t>(run) * sizeof(uint32_t));
    }
    done += run;
  }
}

// ---------------------------------------------------------------------------------------------- range check

OperandRange summarize_operand(const float* values, int64_t count) {
  // Over the exponent fields in place: the largest (0x7F800000 = inf/NaN present) and the smallest non-zero one.
  // It reads every operand of every op call, so 16 values per instruction where AVX-512 is there (GCC 12 does not
  // vectorise this reduction by itself).
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(values);
  uint32_t lo = kExpMask, hi = 0;
  int64_t i = 0;
#if defined(AMDNN_FAST_AVX512)
  const __m512i exp_mask = _mm512_set1_epi32(static_cast<int>(kExpMask));
  __m512i lo16 = exp_mask, hi16 = _mm512_setzero_si512();
  for (; i + 16 <= count; i += 16) {
    const __m512i e = _mm512_and_si512(_mm512_loadu_si512(bits + i), exp_mask);
    hi16 = _mm512_max_epu32(hi16, e);
    lo16 = _mm512_min_epu32(lo16, _mm512_mask_mov_epi32(e, _mm512_testn_epi32_mask(e, e), exp_mask));
  }
  lo = _mm512_reduce_min_epu32(lo16);
  hi = _mm512_reduce_max_epu32(hi16);
#endif
  for (; i < count; ++i) {
    const uint32_t e = bits[i] & kExpMask;
    hi = e > hi ? e : hi;
    lo = (e != 0 && e < lo) ? e : lo;
  }
  if (hi == kExpMask) return OperandRange{true, 255, 0};
  return OperandRange{false, static_cast<int32_t>(lo >> 23), static_cast<int32_t>(hi >> 23)};
}

bool fast_path_is_exact(Mode mode, const OperandRange& a, const OperandRange& b) {
  if (mode == Mode::kFp16) return true;  // IEEE half arithmetic throughout: no range rules to emulate
  if (a.has_inf_or_nan || b.has_inf_or_nan) return false;
  if (a.max_exponent == 0 || b.max_exponent == 0) return true;  // every product is a zero
  // Biased exponents with Ea + Eb - 127 in [1, 253] keep every product, carry included, a normal number; and
  // below 254 each, pb * T (the table kernels' intermediate, up to 2^(Eb-126)) stays finite.
  return a.min_exponent + b.min_exponent >= 128 && a.max_exponent + b.max_exponent <= 380 &&
         a.max_exponent <= 253 && b.max_exponent <= 253;
}

namespace {

// ---------------------------------------------------------------------------------------------- blocking

// Register tile MR x NR (6 rows x two 16-lane vectors: 12 accumulators). KC keeps a B micro-panel (KC x NR, two
// 4-byte planes) at 32 KB, inside the 48 KB L1 of current Xeons; an A block (MC x KC, up to three planes) stays
// inside L2, and a large MC means B is re-packed less often (once per MC rows).
constexpr int64_t kMR = 6;
constexpr int64_t kNR = 32;
constexpr int64_t kKC = 128;
constexpr int64_t kMC = 384;
constexpr int64_t kNC = 512;

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

// The fast kernels decode both operands while packing them, into up to two 32-bit parts and a "takes part" mask
// (rule 2 zeros do not). The left operand (A) is then read by broadcasts straight from memory (an embedded
// {1to16} operand costs no shuffle-port uop) and its mask by a mask-register load, which keeps port 5 free for
// the table permutes.
#if defined(AMDNN_FAST_TABLES)
constexpr bool kAm16ByTable = true;  // one vpermt2b per 16 products
#else
constexpr bool kAm16ByTable = false;  // the MBM formula on 7-bit fields, like am32
#endif
template <Mode M>
constexpr bool kMbmArithmetic = M == Mode::kAm32 || (M == Mode::kAm16 && !kAm16ByTable);
template <Mode M>
constexpr bool kTableLookup = M == Mode::kTable || (M == Mode::kAm16 && kAm16ByTable);
template <Mode M>
constexpr bool kUsesPart1 = M == Mode::kAm32 || M == Mode::kAm16 || M == Mode::kTable;
template <Mode M>
constexpr bool kMasked = M == Mode::kMit32 || M == Mode::kMit16 || kMbmArithmetic<M>;

// The MBM formula with the mantissa fields in place (bit 22 down): y = Fa + Fb - shift, correction
// clamp(C0 - floor_grid(y / 2), C1, C0), zero where y >= top. Per mode: the bits kept, the forced low bit, the grid
// of the kept field, and the region boundaries (ONE - C0 - 1 unit; 2 ONE - C1 - shift). C0 = 655360 and
// C1 = 327680 are the same numbers for m = 23 and m = 7 (10 << 16, 5 << 16).
struct MbmConstants {
  uint32_t kept, forced, field, grid, shift, top;
};
template <Mode M>
constexpr MbmConstants kMbm = M == Mode::kAm32
                                  ? MbmConstants{0xFFFFFFFFu, 0u, kMantMask, 0xFFFFFFFFu, 0x75FFFFu, 0x850001u}
                                  : MbmConstants{0xFFFF0000u, 0x10000u, 0x7F0000u, 0xFFFF0000u, 0x750000u, 0x860000u};

struct Decoded {
  uint32_t part0;
  uint32_t part1;
  bool nonzero;
};

template <Mode M, bool kLeft>
inline Decoded decode(uint32_t u) {
  const bool nonzero = (u & kExpMask) != 0u;
  if constexpr (M == Mode::kAcc32) return {nonzero ? u : (u & kSignMask), 0u, nonzero};
  if constexpr (M == Mode::kFp16) return {bits_of(round_to_half(float_of(u))), 0u, nonzero};
  if constexpr (M == Mode::kAcc16) return {nonzero ? (u & 0xFFFF0000u) : 0u, 0u, nonzero};
  if constexpr (M == Mode::kMit32 || M == Mode::kMit16) {
    // Mitchell is the integer sum of the operands' bit patterns less the bias: the mantissa carry lands in the
    // exponent by itself and the sign bits add to their xor.
    const uint32_t kept = (M == Mode::kMit16) ? (u & 0xFFFF0000u) : u;
    return {kLeft ? kept - kOneBits : kept, 0u, nonzero};
  }
  if constexpr (kMbmArithmetic<M>) {
    constexpr MbmConstants c = kMbm<M>;
    const uint32_t kept = (u & c.kept) | c.forced, field = (u & c.field) | c.forced;
    return kLeft ? Decoded{kept - kOneBits, field - c.shift, nonzero} : Decoded{kept, field, nonzero};
  }
  // Tables (am16 and lut): the product is pa * (pb * T) with pa = +-2^(Ea-127) (0 for a rule 2 zero), pb likewise
  // and T = 2^c (1 + M/128) the table entry: pb * T is pb's bits plus the entry c << 7 | M placed at bit 16, and
  // the multiplication by the power of two pa is exact in range, so an FMA adds exactly the product. The left
  // operand picks the table row (byte offset), the right one the byte within it.
  const uint32_t field = (u >> 16) & 0x7Fu;
  if constexpr (kLeft) return {u & 0xFF800000u, field << kTableBits, nonzero};
  return {nonzero ? (u & 0xFF800000u) : 0u, field << 16, nonzero};
}

// ---------------------------------------------------------------------------------------------- packing

// Packed blocks of one task: A as [panel][r][k] (row-major per panel, so packing is a copy), B as [panel][k][NR].
// Kept per thread across calls: TF's worker threads live as long as the process, and fresh buffers cost page faults.
struct Packed {
  std::vector<uint32_t> a0, a1, b0, b1, b_mask, staging;
  std::vector<uint16_t> a_mask;
  std::vector<uint64_t> b_permute_mask;  // tables: per k and 16-lane half, byte 2 of each non-zero lane
};

template <Mode M, bool kFast>
void pack_a(const MatrixSource& source, const uint32_t* raw, int64_t m0, int64_t mc, int64_t k0, int64_t kc,
            Packed& p) {
  const int64_t panels = (mc + kMR - 1) / kMR, size = panels * kMR * kc;
  p.a0.resize(static_cast<size_t>(size));
  if (kFast && kUsesPart1<M>) p.a1.resize(static_cast<size_t>(size));
  if (kFast && kMasked<M>) p.a_mask.resize(static_cast<size_t>(size));
  for (int64_t i = 0; i < panels * kMR; ++i) {
    const int64_t at = i * kc;  // panel * MR * kc + r * kc
    uint32_t* row = p.a0.data() + at;
    if (i >= mc) {  // padding rows: +0.0 (takes no part); their accumulators are never stored
      std::fill(row, row + kc, 0u);
      if (kFast && kUsesPart1<M>) std::fill(p.a1.begin() + at, p.a1.begin() + at + kc, 0u);
      if (kFast && kMasked<M>) std::fill(p.a_mask.begin() + at, p.a_mask.begin() + at + kc, uint16_t{0});
      continue;
    }
    source.read(raw, m0 + i, k0, kc, row);
    if constexpr (kFast) {
      for (int64_t k = 0; k < kc; ++k) {
        const Decoded d = decode<M, true>(row[k]);
        row[k] = d.part0;
        if constexpr (kUsesPart1<M>) p.a1[at + k] = d.part1;
        if constexpr (kMasked<M>) p.a_mask[at + k] = d.nonzero ? 0xFFFF : 0;
      }
    }
  }
}

template <Mode M, bool kFast>
void pack_b(const MatrixSource& source, const uint32_t* raw, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
            Packed& p) {
  const int64_t panels = (nc + kNR - 1) / kNR;
  p.b0.resize(static_cast<size_t>(panels * kc * kNR));
  if (kFast && kUsesPart1<M>) p.b1.resize(p.b0.size());
  if (kFast && kMasked<M>) p.b_mask.resize(static_cast<size_t>(panels * kc));
  if (kFast && kTableLookup<M>) p.b_permute_mask.resize(static_cast<size_t>(panels * kc * 2));
  p.staging.assign(static_cast<size_t>(panels * kNR), 0u);  // columns past nc: +0.0 (takes no part)
  for (int64_t kk = 0; kk < kc; ++kk) {
    source.read(raw, k0 + kk, n0, nc, p.staging.data());
    for (int64_t panel = 0; panel < panels; ++panel) {
      const uint32_t* in = p.staging.data() + panel * kNR;
      uint32_t* out0 = p.b0.data() + (panel * kc + kk) * kNR;
      if constexpr (!kFast) {
        std::memcpy(out0, in, kNR * sizeof(uint32_t));
      } else {
        uint32_t* out1 = kUsesPart1<M> ? p.b1.data() + (panel * kc + kk) * kNR : nullptr;
        uint32_t mask = 0;
        for (int64_t j = 0; j < kNR; ++j) {
          const Decoded d = decode<M, false>(in[j]);
          out0[j] = d.part0;
          if constexpr (kUsesPart1<M>) out1[j] = d.part1;
          mask |= static_cast<uint32_t>(d.nonzero) << j;
        }
        if constexpr (kMasked<M>) p.b_mask[panel * kc + kk] = mask;
        if constexpr (kTableLookup<M>) {
          for (int half = 0; half < 2; ++half) {
            uint64_t bytes = 0;
            for (int j = 0; j < 16; ++j) bytes |= static_cast<uint64_t>((mask >> (16 * half + j)) & 1u) << (4 * j + 2);
            p.b_permute_mask[(panel * kc + kk) * 2 + half] = bytes;
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------- micro-kernels

struct MicroArgs {
  int64_t kc;
  const uint32_t* a0;  // [MR][kc]
  const uint32_t* a1;
  const uint16_t* a_mask;
  const uint32_t* b0;  // [kc][NR]
  const uint32_t* b1;
  const uint32_t* b_mask;  // [kc], bit j for lane j
  const uint64_t* b_permute_mask;  // [kc][2]
  float* acc;              // [MR] rows of NR, ld_acc apart: C itself for full tiles, else a tile buffer
  int64_t ld_acc;
  bool load_acc;           // continue the running sums in acc (a later K block) instead of starting at 0
  const uint8_t* table7;
};

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

#if defined(AMDNN_FAST_AVX512)
// 16 products of a (broadcast) with 16 lanes of b, as the value (or bits) to add to the accumulator.
template <Mode M>
inline __m512 fast_product16(__m512i a0, __m512i b0, __m512i a1, __m512i b1, __m512i row_lo, __m512i row_hi) {
  if constexpr (M == Mode::kAcc32) {
    return _mm512_mul_ps(_mm512_castsi512_ps(a0), _mm512_castsi512_ps(b0));
  } else if constexpr (M == Mode::kFp16) {
    const __m512 p = _mm512_mul_ps(_mm512_castsi512_ps(a0), _mm512_castsi512_ps(b0));
    return _mm512_cvtph_ps(_mm512_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  } else if constexpr (M == Mode::kAcc16) {
    const __m512 p = _mm512_mul_ps(_mm512_castsi512_ps(a0), _mm512_castsi512_ps(b0));
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(p), _mm512_set1_epi32(int(0xFFFF0000u))));
  } else if constexpr (M == Mode::kMit32 || M == Mode::kMit16) {
    return _mm512_castsi512_ps(_mm512_add_epi32(a0, b0));
  } else if constexpr (kMbmArithmetic<M>) {
    // The MBM correction as a function of s = Fa + Fb is C0 below ONE - C0, falls by one unit per two of s across
    // [ONE - C0, ONE) (the halved carry case), is C1 up to 2 ONE - C1 and 0 above.
    constexpr MbmConstants c = kMbm<M>;
    const __m512i c0 = _mm512_set1_epi32(0xA0000), c1 = _mm512_set1_epi32(0x50000);
    const __m512i y = _mm512_add_epi32(a1, b1);
    __m512i half = _mm512_srai_epi32(y, 1);
    if constexpr (c.grid != 0xFFFFFFFFu) half = _mm512_and_si512(half, _mm512_set1_epi32(int(c.grid)));
    __m512i v = _mm512_min_epi32(_mm512_sub_epi32(c0, half), c0);
    const __mmask16 below_top = _mm512_cmplt_epi32_mask(y, _mm512_set1_epi32(int(c.top)));
    v = _mm512_maskz_max_epi32(below_top, v, c1);
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_add_epi32(a0, b0), v));
  } else {
    return _mm512_setzero_ps();  // tables: see table_term16
  }
}

#if defined(AMDNN_FAST_TABLES)
// pb * T for 16 lanes: byte 2 of every lane of b1 holds Fb and the looked-up byte c << 7 | M lands in byte 2; the
// permute mask zeroes the lanes of rule 2 zeros (their b0 is 0 too), so those lanes add 0 * pa.
inline __m512 table_term16(__m512i b0, __m512i b1, __mmask64 lanes, __m512i row_lo, __m512i row_hi) {
  const __m512i entry = _mm512_maskz_permutex2var_epi8(lanes, row_lo, b1, row_hi);
  return _mm512_castsi512_ps(_mm512_add_epi32(b0, entry));
}
#endif

template <Mode M>
void micro_fast(const MicroArgs& x) {
  __m512 acc[kMR][2];
  for (int r = 0; r < kMR; ++r) {
    acc[r][0] = x.load_acc ? _mm512_loadu_ps(x.acc + r * x.ld_acc) : _mm512_setzero_ps();
    acc[r][1] = x.load_acc ? _mm512_loadu_ps(x.acc + r * x.ld_acc + 16) : _mm512_setzero_ps();
  }
  __m512i b1_lo = _mm512_setzero_si512(), b1_hi = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
  __m512i row_lo = _mm512_setzero_si512(), row_hi = _mm512_setzero_si512();
  __mmask16 b_lo_mask = 0xFFFF, b_hi_mask = 0xFFFF;
  const int64_t kc = x.kc;
  for (int64_t k = 0; k < kc; ++k) {
    const __m512i b0_lo = _mm512_loadu_si512(x.b0 + k * kNR), b0_hi = _mm512_loadu_si512(x.b0 + k * kNR + 16);
    if constexpr (kUsesPart1<M>) {
      b1_lo = _mm512_loadu_si512(x.b1 + k * kNR);
      b1_hi = _mm512_loadu_si512(x.b1 + k * kNR + 16);
    }
    if constexpr (kMasked<M>) {
      b_lo_mask = static_cast<__mmask16>(x.b_mask[k] & 0xFFFFu);
      b_hi_mask = static_cast<__mmask16>(x.b_mask[k] >> 16);
    }
#pragma GCC unroll 6
    for (int r = 0; r < kMR; ++r) {
      const int64_t at = r * kc + k;
      const __m512i a0 = _mm512_set1_epi32(static_cast<int>(x.a0[at]));
      if constexpr (kMbmArithmetic<M>) a1 = _mm512_set1_epi32(static_cast<int>(x.a1[at]));
      if constexpr (kTableLookup<M>) {
        const uint8_t* row = x.table7 + x.a1[at];
        row_lo = _mm512_loadu_si512(row);
        row_hi = _mm512_loadu_si512(row + 64);
      }
#if defined(AMDNN_FAST_TABLES)
      if constexpr (kTableLookup<M>) {
        const __m512 pa = _mm512_castsi512_ps(a0);
        const __mmask64 lanes_lo = x.b_permute_mask[2 * k], lanes_hi = x.b_permute_mask[2 * k + 1];
        acc[r][0] = _mm512_fmadd_ps(pa, table_term16(b0_lo, b1_lo, lanes_lo, row_lo, row_hi), acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(pa, table_term16(b0_hi, b1_hi, lanes_hi, row_lo, row_hi), acc[r][1]);
        continue;
      }
#endif
      const __m512 p_lo = fast_product16<M>(a0, b0_lo, a1, b1_lo, row_lo, row_hi);
      const __m512 p_hi = fast_product16<M>(a0, b0_hi, a1, b1_hi, row_lo, row_hi);
      if constexpr (kMasked<M>) {
        const __mmask16 a_mask = _load_mask16(const_cast<__mmask16*>(x.a_mask + at));
        acc[r][0] = _mm512_mask_add_ps(acc[r][0], a_mask & b_lo_mask, acc[r][0], p_lo);
        acc[r][1] = _mm512_mask_add_ps(acc[r][1], a_mask & b_hi_mask, acc[r][1], p_hi);
      } else {
        acc[r][0] = _mm512_add_ps(acc[r][0], p_lo);
        acc[r][1] = _mm512_add_ps(acc[r][1], p_hi);
      }
    }
  }
  for (int r = 0; r < kMR; ++r) {
    _mm512_storeu_ps(x.acc + r * x.ld_acc, acc[r][0]);
    _mm512_storeu_ps(x.acc + r * x.ld_acc + 16, acc[r][1]);
  }
}
#endif  // AMDNN_FAST_AVX512

template <Mode M>
constexpr bool has_fast_kernel() {
#if defined(AMDNN_FAST_TABLES)
  return true;
#elif defined(AMDNN_FAST_AVX512)
  return M != Mode::kTable;
#else
  return false;
#endif
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

  float* at(int64_t i, int64_t j) const { return c + i * ldc + j; }
};

template <Mode M, bool kFast>
void run_block(const GemmProblem& g, int64_t m0, int64_t n0, Packed& p) {
  const int64_t mc = std::min(g.mc, g.m - m0), nc = std::min(g.nc, g.n - n0);
  const int64_t a_panels = (mc + kMR - 1) / kMR, b_panels = (nc + kNR - 1) / kNR;
  alignas(64) float tile[kMR * kNR];
  for (int64_t k0 = 0; k0 < g.k; k0 += kKC) {
    const int64_t kc = std::min(kKC, g.k - k0);
    pack_b<M, kFast>(*g.b, g.b_raw, k0, kc, n0, nc, p);
    pack_a<M, kFast>(*g.a, g.a_raw, m0, mc, k0, kc, p);
    for (int64_t pa = 0; pa < a_panels; ++pa) {
      for (int64_t pb = 0; pb < b_panels; ++pb) {
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
                          kFast && kUsesPart1<M> ? p.a1.data() + a_at : nullptr,
                          kFast && kMasked<M> ? p.a_mask.data() + a_at : nullptr,
                          p.b0.data() + b_at,
                          kFast && kUsesPart1<M> ? p.b1.data() + b_at : nullptr,
                          kFast && kMasked<M> ? p.b_mask.data() + pb * kc : nullptr,
                          kFast && kTableLookup<M> ? p.b_permute_mask.data() + pb * kc * 2 : nullptr,
                          direct ? g.c + i0 * g.ldc + j0 : tile,
                          direct ? g.ldc : kNR,
                          k0 > 0,
                          g.multiplier->table7.data()};
#if defined(AMDNN_FAST_AVX512)
        if constexpr (kFast) {
          micro_fast<M>(x);
        } else {
          micro_generic<M>(x);
        }
#else
        micro_generic<M>(x);
#endif
        if (!direct)
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < cols; ++j) *g.at(i0 + r, j0 + j) = tile[r * kNR + j];
      }
    }
  }
}

template <Mode M, bool kFast>
void run_gemm(const GemmProblem& g, const ParallelFor& parallel_for) {
  const int64_t n_blocks = (g.n + g.nc - 1) / g.nc, tasks = ((g.m + g.mc - 1) / g.mc) * n_blocks;
  const int64_t cost = g.mc * g.nc * g.k * 2;  // ~2 cycles per product on the fast path
  parallel_for(tasks, cost, [&](int64_t begin, int64_t end) {
    ScopedIeeeArithmetic ieee;
    thread_local Packed packed;
    for (int64_t t = begin; t < end; ++t) run_block<M, kFast>(g, (t / n_blocks) * g.mc, (t % n_blocks) * g.nc, packed);
  });
}

// fast calls, generic calls, fast products, generic products (see PathCounts). Relaxed: counters, no ordering.
std::atomic<int64_t> path_counters[4];

void count_path(bool fast, int64_t products) {
  path_counters[fast ? 0 : 1].fetch_add(1, std::memory_order_relaxed);
  path_counters[fast ? 2 : 3].fetch_add(products, std::memory_order_relaxed);
}

template <Mode M>
void run_mode(const GemmProblem& g, bool fast, const ParallelFor& parallel_for) {
  count_path(has_fast_kernel<M>() && fast, g.m * g.n * g.k);
  if (has_fast_kernel<M>() && fast) {
    run_gemm<M, has_fast_kernel<M>()>(g, parallel_for);
  } else {
    run_gemm<M, false>(g, parallel_for);
  }
}

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

}  // namespace

void approximate_gemm(const Multiplier& multiplier, const GemmOperand& a, const GemmOperand& b, int64_t m, int64_t n,
                      int64_t k, float* c, int64_t ldc, bool fast_path, const ParallelFor& parallel_for,
                      int num_threads) {
  if (m <= 0 || n <= 0) return;
  GemmProblem g{&multiplier, a.source, b.source, reinterpret_cast<const uint32_t*>(a.values),
                reinterpret_cast<const uint32_t*>(b.values), m, n, k, c, ldc,
                std::min(kMC, round_up(m, kMR)), std::min(kNC, round_up(n, kNR))};
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
  switch (multiplier.mode) {
    case Mode::kAcc32: return run_mode<Mode::kAcc32>(g, fast_path, parallel_for);
    case Mode::kAcc16: return run_mode<Mode::kAcc16>(g, fast_path, parallel_for);
    case Mode::kFp16: return run_mode<Mode::kFp16>(g, fast_path, parallel_for);
    case Mode::kAm32: return run_mode<Mode::kAm32>(g, fast_path, parallel_for);
    case Mode::kAm16: return run_mode<Mode::kAm16>(g, fast_path, parallel_for);
    case Mode::kMit32: return run_mode<Mode::kMit32>(g, fast_path, parallel_for);
    case Mode::kMit16: return run_mode<Mode::kMit16>(g, fast_path, parallel_for);
    case Mode::kTable: return run_mode<Mode::kTable>(g, fast_path, parallel_for);
  }
}

PathCounts path_counts() {
  return PathCounts{path_counters[0].load(std::memory_order_relaxed), path_counters[1].load(std::memory_order_relaxed),
                    path_counters[2].load(std::memory_order_relaxed), path_counters[3].load(std::memory_order_relaxed)};
}

void run_serially(int64_t num_tasks, int64_t, const std::function<void(int64_t, int64_t)>& work) {
  work(0, num_tasks);
}

}  // namespace amdnn
