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

void DenseSource::read(int64_t row, int64_t col0, int64_t count, float* out) const {
  if (!transposed_) {
    std::memcpy(out, data_ + row * stored_cols_ + col0, static_cast<size_t>(count) * sizeof(float));
    return;
  }
  const float* column = data_ + col0 * stored_cols_ + row;
  for (int64_t i = 0; i < count; ++i) out[i] = column[i * stored_cols_];
}

float Im2ColSource::at(int64_t pixel, int64_t patch_index) const {
  const int64_t n = pixel / (g_.out_h * g_.out_w), rest = pixel % (g_.out_h * g_.out_w);
  const int64_t ho = rest / g_.out_w, wo = rest % g_.out_w;
  const int64_t kh = patch_index / (g_.filter_w * g_.in_c), rest2 = patch_index % (g_.filter_w * g_.in_c);
  const int64_t kw = rest2 / g_.in_c, ci = rest2 % g_.in_c;
  const int64_t hi = ho * g_.stride_h + kh * g_.dilation_h - g_.pad_top;
  const int64_t wi = wo * g_.stride_w + kw * g_.dilation_w - g_.pad_left;
  if (hi < 0 || hi >= g_.in_h || wi < 0 || wi >= g_.in_w) return 0.0f;
  return x_[((n * g_.in_h + hi) * g_.in_w + wi) * g_.in_c + ci];
}

void Im2ColSource::read(int64_t row, int64_t col0, int64_t count, float* out) const {
  if (transposed_) {  // row = patch index, columns = output pixels
    for (int64_t i = 0; i < count; ++i) out[i] = at(col0 + i, row);
    return;
  }
  // row = output pixel; the patch runs over (kh, kw) segments of in_c contiguous channels.
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
      std::fill(out + done, out + done + run, 0.0f);
    } else {
      const float* src = x_ + ((n * g_.in_h + hi) * g_.in_w + wi) * g_.in_c + ci;
      std::memcpy(out + done, src, static_cast<size_t>(run) * sizeof(float));
    }
    done += run;
  }
}

// ---------------------------------------------------------------------------------------------- range check

OperandRange summarize_operand(const float* values, int64_t count) {
  int32_t special = 0, lo = 255, hi = 0;
  const uint32_t* bits = reinterpret_cast<const uint32_t*>(values);
  for (int64_t i = 0; i < count; ++i) {  // branch-free so it vectorises
    const int32_t e = static_cast<int32_t>((bits[i] >> 23) & 0xFFu);
    special |= (e == 255);
    lo = std::min(lo, (e == 0 || e == 255) ? 255 : e);
    hi = std::max(hi, e == 255 ? 0 : e);
  }
  return OperandRange{special != 0, lo, hi};
}

bool fast_path_is_exact(Mode mode, const OperandRange& a, const OperandRange& b) {
  if (mode == Mode::kFp16) return true;  // IEEE half arithmetic throughout: no range rules to emulate
  if (a.has_inf_or_nan || b.has_inf_or_nan) return false;
  if (a.max_exponent == 0 || b.max_exponent == 0) return true;  // every product is a zero
  // Biased exponents with Ea + Eb - 127 in [1, 253] keep every product, carry included, a normal number.
  return a.min_exponent + b.min_exponent >= 128 && a.max_exponent + b.max_exponent <= 380;
}

namespace {

// ---------------------------------------------------------------------------------------------- blocking

// Register tile MR x NR (6 rows x two 16-lane vectors: 12 accumulators); KC keeps a B micro-panel (KC x NR with
// two 4-byte parts) at 32 KB, inside the 48 KB L1 of current Xeons; MC x KC and KC x NC stay inside L2.
constexpr int64_t kMR = 6;
constexpr int64_t kNR = 32;
constexpr int64_t kKC = 128;
constexpr int64_t kMC = 96;
constexpr int64_t kNC = 256;

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

// One operand decoded for the fast kernel: two 32-bit parts and whether it takes part (rule 2 zeros do not).
struct Decoded {
  uint32_t part0;
  uint32_t part1;
  bool nonzero;
};

// The MBM region boundaries for m = 23 in terms of y = Fa + Fb - kMbmShift (see the am32 kernel).
constexpr uint32_t kMbmShift = 0x75FFFFu;  // ONE - C0 - 1 = 0x800000 - 0xA0000 - 1

template <Mode M, bool kLeft>
inline Decoded decode(uint32_t u) {
  const bool nonzero = ((u >> 23) & 0xFFu) != 0u;
  if constexpr (M == Mode::kAcc32) return {nonzero ? u : (u & kSignMask), 0u, nonzero};
  if constexpr (M == Mode::kFp16) return {bits_of(round_to_half(float_of(u))), 0u, true};
  if constexpr (M == Mode::kAcc16) return {nonzero ? (u & 0xFFFF0000u) : 0u, 0u, nonzero};
  if constexpr (M == Mode::kMit32 || M == Mode::kMit16) {
    // Mitchell is the integer sum of the operands' bit patterns less the bias: the mantissa carry lands in the
    // exponent by itself and the sign bits add to their xor.
    const uint32_t kept = (M == Mode::kMit16) ? (u & 0xFFFF0000u) : u;
    return {kLeft ? kept - kOneBits : kept, 0u, nonzero};
  }
  if constexpr (M == Mode::kAm32) {
    return kLeft ? Decoded{u - kOneBits, (u & kMantMask) - kMbmShift, nonzero} : Decoded{u, u & kMantMask, nonzero};
  }
  // Tables (am16 and lut): the left operand picks the table row, the right one the byte within it; the sign and
  // exponent parts sum to sign | (Ea + Eb - 127) << 23 and the table byte c << 7 | M adds in at bit 16.
  const uint32_t field = (u >> 16) & 0x7Fu;
  if constexpr (kLeft) return {u & 0xFF800000u, field << kTableBits, nonzero};
  return {(u & 0xFF800000u) - (127u << 23), field << 16, nonzero};
}

// Packed panels of one task: A as [panel][k][MR], B as [panel][k][NR]; part1 only where the mode has one.
struct Panels {
  std::vector<float> staging_a, staging_b;
  std::vector<uint32_t> a0, a1, b0, b1, b_nonzero;
  std::vector<uint16_t> a_nonzero;
};

template <Mode M, bool kFast>
void pack_b(const MatrixSource& b, int64_t k0, int64_t kc, int64_t n0, int64_t nc, Panels& p) {
  const int64_t panels = (nc + kNR - 1) / kNR;
  p.staging_b.assign(static_cast<size_t>(panels * kNR), 0.0f);  // columns past nc read as +0.0
  p.b0.resize(static_cast<size_t>(panels * kc * kNR));
  if (kFast) {
    p.b1.resize(p.b0.size());
    p.b_nonzero.resize(static_cast<size_t>(panels * kc));
  }
  for (int64_t kk = 0; kk < kc; ++kk) {
    b.read(k0 + kk, n0, nc, p.staging_b.data());
    for (int64_t panel = 0; panel < panels; ++panel) {
      const int64_t base = (panel * kc + kk) * kNR;
      uint32_t mask = 0;
      for (int64_t j = 0; j < kNR; ++j) {
        const uint32_t u = bits_of(p.staging_b[panel * kNR + j]);
        if (!kFast) {
          p.b0[base + j] = u;
          continue;
        }
        const Decoded d = decode<M, false>(u);
        p.b0[base + j] = d.part0;
        p.b1[base + j] = d.part1;
        mask |= static_cast<uint32_t>(d.nonzero) << j;
      }
      if (kFast) p.b_nonzero[panel * kc + kk] = mask;
    }
  }
}

template <Mode M, bool kFast>
void pack_a(const MatrixSource& a, int64_t m0, int64_t mc, int64_t k0, int64_t kc, Panels& p) {
  const int64_t panels = (mc + kMR - 1) / kMR;
  p.staging_a.resize(static_cast<size_t>(kc));
  p.a0.assign(static_cast<size_t>(panels * kc * kMR), 0u);
  if (kFast) {
    p.a1.assign(p.a0.size(), 0u);
    p.a_nonzero.assign(p.a0.size(), 0u);
  }
  for (int64_t i = 0; i < mc; ++i) {
    a.read(m0 + i, k0, kc, p.staging_a.data());
    const int64_t panel = i / kMR, r = i % kMR;
    for (int64_t kk = 0; kk < kc; ++kk) {
      const int64_t at = (panel * kc + kk) * kMR + r;
      const uint32_t u = bits_of(p.staging_a[kk]);
      if (!kFast) {
        p.a0[at] = u;
        continue;
      }
      const Decoded d = decode<M, true>(u);
      p.a0[at] = d.part0;
      p.a1[at] = d.part1;
      p.a_nonzero[at] = d.nonzero ? 0xFFFFu : 0u;
    }
  }
  // Rows past mc stay 0 (+0.0): their products are zeros and their accumulators are never stored.
}

// ---------------------------------------------------------------------------------------------- micro-kernels

struct MicroArgs {
  int64_t kc;
  const uint32_t* a0;
  const uint32_t* a1;
  const uint16_t* a_nonzero;
  const uint32_t* b0;
  const uint32_t* b1;
  const uint32_t* b_nonzero;
  float* acc;  // [MR][NR]
  const uint8_t* table7;
};

template <Mode M>
void micro_generic(const MicroArgs& x) {
  for (int64_t k = 0; k < x.kc; ++k) {
    const uint32_t* b_row = x.b0 + k * kNR;
    for (int64_t r = 0; r < kMR; ++r) {
      const float a = float_of(x.a0[k * kMR + r]);
      float* acc = x.acc + r * kNR;
      for (int64_t j = 0; j < kNR; ++j) acc[j] += product<M>(a, float_of(b_row[j]), x.table7);
    }
  }
}

#if defined(AMDNN_FAST_AVX512)
template <Mode M>
constexpr bool kMasked = M == Mode::kMit32 || M == Mode::kMit16 || M == Mode::kAm32 || M == Mode::kAm16 ||
                         M == Mode::kTable;
template <Mode M>
constexpr bool kTwoParts = M == Mode::kAm32 || M == Mode::kAm16 || M == Mode::kTable;

// 16 products of a (broadcast) with 16 lanes of b, as the bits (or value) to add to the accumulator.
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
  } else if constexpr (M == Mode::kAm32) {
    // y = Fa + Fb - 0x75FFFF. The MBM correction as a function of s = Fa + Fb is C0 = 0xA0000 below
    // ONE - C0, falls by one per two steps of s across [ONE - C0, ONE) (the halved carry case), is C1 = 0x50000
    // up to 2 ONE - C1 and 0 above: clamp(C0 - (y >> 1), C1, C0), zeroed where y >= 0xFB0000 - 0x75FFFF.
    const __m512i c0 = _mm512_set1_epi32(0xA0000), c1 = _mm512_set1_epi32(0x50000);
    const __m512i y = _mm512_add_epi32(a1, b1);
    __m512i v = _mm512_min_epi32(_mm512_sub_epi32(c0, _mm512_srai_epi32(y, 1)), c0);
    const __mmask16 below_top = _mm512_cmplt_epi32_mask(y, _mm512_set1_epi32(0x850001));
    v = _mm512_maskz_max_epi32(below_top, v, c1);
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_add_epi32(a0, b0), v));
  } else {
#if defined(AMDNN_FAST_TABLES)
    // Byte 2 of every lane of b1 holds Fb; the looked-up byte c << 7 | M lands in byte 2 (the 0x44.. mask).
    const __m512i entry = _mm512_maskz_permutex2var_epi8(0x4444444444444444ULL, row_lo, b1, row_hi);
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_add_epi32(a0, b0), entry));
#else
    return _mm512_setzero_ps();
#endif
  }
}

template <Mode M>
void micro_fast(const MicroArgs& x) {
  __m512 acc[kMR][2];
  for (int r = 0; r < kMR; ++r) {
    acc[r][0] = _mm512_loadu_ps(x.acc + r * kNR);
    acc[r][1] = _mm512_loadu_ps(x.acc + r * kNR + 16);
  }
  __m512i b1_lo = _mm512_setzero_si512(), b1_hi = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
  __m512i row_lo = _mm512_setzero_si512(), row_hi = _mm512_setzero_si512();
  __mmask16 b_lo_mask = 0xFFFF, b_hi_mask = 0xFFFF;
  for (int64_t k = 0; k < x.kc; ++k) {
    const __m512i b0_lo = _mm512_loadu_si512(x.b0 + k * kNR), b0_hi = _mm512_loadu_si512(x.b0 + k * kNR + 16);
    if constexpr (kTwoParts<M>) {
      b1_lo = _mm512_loadu_si512(x.b1 + k * kNR);
      b1_hi = _mm512_loadu_si512(x.b1 + k * kNR + 16);
    }
    if constexpr (kMasked<M>) {
      b_lo_mask = static_cast<__mmask16>(x.b_nonzero[k] & 0xFFFFu);
      b_hi_mask = static_cast<__mmask16>(x.b_nonzero[k] >> 16);
    }
#pragma GCC unroll 6
    for (int r = 0; r < kMR; ++r) {
      const int64_t at = k * kMR + r;
      const __m512i a0 = _mm512_set1_epi32(static_cast<int>(x.a0[at]));
      if constexpr (M == Mode::kAm32) a1 = _mm512_set1_epi32(static_cast<int>(x.a1[at]));
      if constexpr (M == Mode::kAm16 || M == Mode::kTable) {
        const uint8_t* row = x.table7 + x.a1[at];
        row_lo = _mm512_loadu_si512(row);
        row_hi = _mm512_loadu_si512(row + 64);
      }
      const __m512 p_lo = fast_product16<M>(a0, b0_lo, a1, b1_lo, row_lo, row_hi);
      const __m512 p_hi = fast_product16<M>(a0, b0_hi, a1, b1_hi, row_lo, row_hi);
      if constexpr (kMasked<M>) {
        const __mmask16 a_mask = x.a_nonzero[at];
        acc[r][0] = _mm512_mask_add_ps(acc[r][0], a_mask & b_lo_mask, acc[r][0], p_lo);
        acc[r][1] = _mm512_mask_add_ps(acc[r][1], a_mask & b_hi_mask, acc[r][1], p_hi);
      } else {
        acc[r][0] = _mm512_add_ps(acc[r][0], p_lo);
        acc[r][1] = _mm512_add_ps(acc[r][1], p_hi);
      }
    }
  }
  for (int r = 0; r < kMR; ++r) {
    _mm512_storeu_ps(x.acc + r * kNR, acc[r][0]);
    _mm512_storeu_ps(x.acc + r * kNR + 16, acc[r][1]);
  }
}
#endif  // AMDNN_FAST_AVX512

template <Mode M>
constexpr bool has_fast_kernel() {
#if defined(AMDNN_FAST_TABLES)
  return true;
#elif defined(AMDNN_FAST_AVX512)
  return !(M == Mode::kAm16 || M == Mode::kTable);
#else
  return false;
#endif
}

// ---------------------------------------------------------------------------------------------- driver

struct GemmProblem {
  const Multiplier* multiplier;
  const MatrixSource* a;
  const MatrixSource* b;
  int64_t m, n, k;
  float* c;
  int64_t ldc;
  int64_t mc, nc;
};

template <Mode M, bool kFast>
void run_block(const GemmProblem& g, int64_t m0, int64_t n0, Panels& p) {
  const int64_t mc = std::min(g.mc, g.m - m0), nc = std::min(g.nc, g.n - n0);
  const int64_t a_panels = (mc + kMR - 1) / kMR, b_panels = (nc + kNR - 1) / kNR;
  alignas(64) float tile[kMR * kNR];
  for (int64_t k0 = 0; k0 < g.k; k0 += kKC) {
    const int64_t kc = std::min(kKC, g.k - k0);
    pack_b<M, kFast>(*g.b, k0, kc, n0, nc, p);
    pack_a<M, kFast>(*g.a, m0, mc, k0, kc, p);
    for (int64_t pa = 0; pa < a_panels; ++pa) {
      for (int64_t pb = 0; pb < b_panels; ++pb) {
        const int64_t rows = std::min(kMR, mc - pa * kMR), cols = std::min(kNR, nc - pb * kNR);
        float* c_tile = g.c + (m0 + pa * kMR) * g.ldc + n0 + pb * kNR;
        // The running sums continue across k blocks through C, so the order is that of one pass over k.
        std::fill(tile, tile + kMR * kNR, 0.0f);
        if (k0 > 0) {
          for (int64_t r = 0; r < rows; ++r) std::memcpy(tile + r * kNR, c_tile + r * g.ldc, cols * sizeof(float));
        }
        const int64_t a_at = pa * kc * kMR, b_at = pb * kc * kNR;
        MicroArgs x{kc,
                    p.a0.data() + a_at,
                    kFast ? p.a1.data() + a_at : nullptr,
                    kFast ? p.a_nonzero.data() + a_at : nullptr,
                    p.b0.data() + b_at,
                    kFast ? p.b1.data() + b_at : nullptr,
                    kFast ? p.b_nonzero.data() + pb * kc : nullptr,
                    tile,
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
        for (int64_t r = 0; r < rows; ++r) std::memcpy(c_tile + r * g.ldc, tile + r * kNR, cols * sizeof(float));
      }
    }
  }
}

template <Mode M>
void run_tasks(const GemmProblem& g, bool fast, int64_t begin, int64_t end) {
  ScopedIeeeArithmetic ieee;
  Panels panels;
  const int64_t n_blocks = (g.n + g.nc - 1) / g.nc;
  for (int64_t t = begin; t < end; ++t) {
    const int64_t m0 = (t / n_blocks) * g.mc, n0 = (t % n_blocks) * g.nc;
    if (has_fast_kernel<M>() && fast) {
      run_block<M, has_fast_kernel<M>()>(g, m0, n0, panels);
    } else {
      run_block<M, false>(g, m0, n0, panels);
    }
  }
}

void dispatch(const GemmProblem& g, bool fast, int64_t begin, int64_t end) {
  switch (g.multiplier->mode) {
    case Mode::kAcc32: return run_tasks<Mode::kAcc32>(g, fast, begin, end);
    case Mode::kAcc16: return run_tasks<Mode::kAcc16>(g, fast, begin, end);
    case Mode::kFp16: return run_tasks<Mode::kFp16>(g, fast, begin, end);
    case Mode::kAm32: return run_tasks<Mode::kAm32>(g, fast, begin, end);
    case Mode::kAm16: return run_tasks<Mode::kAm16>(g, fast, begin, end);
    case Mode::kMit32: return run_tasks<Mode::kMit32>(g, fast, begin, end);
    case Mode::kMit16: return run_tasks<Mode::kMit16>(g, fast, begin, end);
    case Mode::kTable: return run_tasks<Mode::kTable>(g, fast, begin, end);
  }
}

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

}  // namespace

void approximate_gemm(const Multiplier& multiplier, const MatrixSource& a, const MatrixSource& b, int64_t m,
                      int64_t n, int64_t k, float* c, int64_t ldc, bool fast_path, const ParallelFor& parallel_for) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  GemmProblem g{&multiplier, &a, &b, m, n, k, c, ldc, std::min(kMC, round_up(m, kMR)), std::min(kNC, round_up(n, kNR))};
  // Enough tasks to keep every thread busy on small layers (e.g. 4x4x512 at batch 32 is only 512 rows).
  constexpr int64_t kMinTasks = 16;
  auto tasks = [&] { return ((g.m + g.mc - 1) / g.mc) * ((g.n + g.nc - 1) / g.nc); };
  while (tasks() < kMinTasks && g.mc > kMR) g.mc = round_up(g.mc / 2, kMR);
  while (tasks() < kMinTasks && g.nc > kNR) g.nc = round_up(g.nc / 2, kNR);
  const int64_t cost = g.mc * g.nc * g.k * 2;  // ~2 cycles per product on the fast path
  parallel_for(tasks(), cost, [&](int64_t begin, int64_t end) { dispatch(g, fast_path, begin, end); });
}

void run_serially(int64_t num_tasks, int64_t, const std::function<void(int64_t, int64_t)>& work) {
  work(0, num_tasks);
}

std::string kernel_description() {
#if defined(AMDNN_FAST_TABLES)
  return "avx512 (all modes; vbmi table lookups)";
#elif defined(AMDNN_FAST_AVX512)
  return "avx512 (table modes generic: no vbmi)";
#else
  return "generic (no avx512)";
#endif
}

}  // namespace amdnn
