// The x86-64-v3 layer of the CPU GEMM (AVX2 + FMA + F16C: 8 lanes, 16 vector registers, no mask registers): the
// register tile and the inner product; the skeleton in gemm_cpu.cc does the rest.
//
// Without mask registers, rule 2 zeros are handled in the data: the right operand carries a lane mask (part2, all
// ones where it takes part) that clears the product bits, and the left operand a scale (part2, 1.0f or 0.0f) by
// which an FMA adds the product (with its part0 set so that the product stays finite). acc + 1.0 * p rounds once,
// like acc + p, and acc + 0.0 * p is acc, since a running sum that starts at +0 is never -0.
#ifndef AMDNN_OPS_CC_GEMM_CPU_AVX2_H_
#define AMDNN_OPS_CC_GEMM_CPU_AVX2_H_

#include <immintrin.h>

#include "gemm_cpu_layer.h"

namespace amdnn {
namespace cpu_layer {

constexpr const char* kLevel = "x86-64-v3 (AVX2, FMA, F16C)";
// 6 rows x two 8-lane vectors: 12 accumulators, 2 vectors of B and a broadcast in the 16 registers. A B micro-panel
// (KC x NR, three planes) is 24 KB, inside L1.
constexpr int64_t kMR = 6;
constexpr int64_t kNR = 16;
constexpr bool kMaskRegisters = false;

// A mode not named here has no fast kernel: the generic one runs it.
template <Mode M>
constexpr Form kForm = M == Mode::kAcc32 || M == Mode::kAcc16 || M == Mode::kFp16 ? Form::kMultiply
                       : M == Mode::kMit32 || M == Mode::kMit16                  ? Form::kAddBits
                       : M == Mode::kAm32                                        ? Form::kMbmFormula
                       : M == Mode::kAm16 || M == Mode::kTable                   ? Form::kTableColumns
                                                                                 : Form::kNone;

inline __m256i set1(uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }
inline __m256i as_int(__m256 v) { return _mm256_castps_si256(v); }
inline __m256 as_float(__m256i v) { return _mm256_castsi256_ps(v); }

// acc plus the product of the broadcast left operand (a0..a2) and 8 lanes of the right one (b0..b2). kExpanded:
// kTableColumns with the B panel's columns expanded (else its rows permuted).
template <Mode M, bool kExpanded>
inline __m256 multiply_add8(__m256 acc, __m256i a0, __m256i a1, __m256 a2, __m256i b0, __m256i b1, __m256i b2,
                            const uint8_t* row) {
  constexpr Form F = kForm<M>;
  if constexpr (M == Mode::kAcc32) {
    return _mm256_add_ps(acc, _mm256_mul_ps(as_float(a0), as_float(b0)));
  } else if constexpr (M == Mode::kFp16) {
    const __m256 p = _mm256_mul_ps(as_float(a0), as_float(b0));
    return _mm256_add_ps(acc, _mm256_cvtph_ps(_mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)));
  } else if constexpr (M == Mode::kAcc16) {
    const __m256i p = as_int(_mm256_mul_ps(as_float(a0), as_float(b0)));
    return _mm256_add_ps(acc, as_float(_mm256_and_si256(p, set1(0xFFFF0000u))));
  } else if constexpr (F == Form::kAddBits) {
    const __m256i p = _mm256_and_si256(_mm256_add_epi32(a0, b0), b2);
    return _mm256_fmadd_ps(as_float(p), a2, acc);
  } else if constexpr (F == Form::kMbmFormula) {
    // The correction as a function of y = Fa + Fb - shift: C0 below, falling by one unit per two of y, C1, and 0
    // from top on (see kMbm).
    const __m256i y = _mm256_add_epi32(a1, b1);
    const __m256i c0 = set1(kMbmC0);
    __m256i v = _mm256_min_epi32(_mm256_sub_epi32(c0, _mm256_srai_epi32(y, 1)), c0);
    v = _mm256_max_epi32(v, set1(kMbmC1));
    v = _mm256_and_si256(v, _mm256_cmpgt_epi32(set1(kMbm<M>.top), y));
    const __m256i p = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(a0, b0), v), b2);
    return _mm256_fmadd_ps(as_float(p), a2, acc);
  } else if constexpr (kExpanded) {
    // Tables: pa * (pb * T), pa = +-2^(Ea-127) (+-0 for a rule 2 zero), pb * T = pb's bits plus the entry at bit 16
    // (see decode in gemm_cpu.cc). row: the 16 entries of the left operand's Fa for this k's 16 lanes (the expanded
    // columns), loaded into both 128-bit halves; b1 (a constant) moves lane j's byte (j, or 8 + j for the upper 8
    // lanes) to byte 2 and zeros the others. 3 instructions per 8 products: 13.7 Gproducts/s on Zen 4 (256^3),
    // against 2.7 by gathering the bytes (vpgatherdd) and 6.4 by permuting the row (below); am16 ran at 9.8 by a
    // 7-instruction byte formula of its MBM correction and takes its table this way too (13.6).
    const __m256i entries = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row)));
    const __m256i pb_t = _mm256_add_epi32(b0, _mm256_shuffle_epi8(entries, b1));
    return _mm256_fmadd_ps(as_float(a0), as_float(pb_t), acc);
  } else {
    // The same product from the left operand's 128-byte table row (blocks of few rows, see kColumnsMinRows): the
    // dword holding the entry is one of 8 in each 32-byte quarter (vpermd by Fb >> 2), the quarter is chosen by Fb's
    // bits 5 and 6 (two blend levels), and vpshufb keeps the entry's byte in byte 2, all by the control word b2
    // (dwords_control). 10 instructions per 8 products.
    const __m256i q0 = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)), b2);
    const __m256i q1 = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32)), b2);
    const __m256i q2 = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 64)), b2);
    const __m256i q3 = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 96)), b2);
    const __m256 bit5 = as_float(_mm256_slli_epi32(b2, 28)), bit6 = as_float(_mm256_slli_epi32(b2, 27));
    const __m256 low = _mm256_blendv_ps(as_float(q0), as_float(q1), bit5);
    const __m256 high = _mm256_blendv_ps(as_float(q2), as_float(q3), bit5);
    const __m256i four = as_int(_mm256_blendv_ps(low, high, bit6));
    const __m256i pb_t = _mm256_add_epi32(b0, _mm256_shuffle_epi8(four, b2));
    return _mm256_fmadd_ps(as_float(a0), as_float(pb_t), acc);
  }
}

// values[i] = round_to_half(values[i]) (fp16's decoding): F16C rounds to nearest even, keeps half subnormals (FTZ and
// DAZ are off in the kernels) and quiets NaNs keeping their payload's top bits, as half_from_float does.
inline void round_to_half_in_place(uint32_t* values, size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m256i* at = reinterpret_cast<__m256i*>(values + i);
    const __m256 v = _mm256_castsi256_ps(_mm256_loadu_si256(at));
    _mm256_storeu_si256(at, as_int(_mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))));
  }
  for (; i < count; ++i) values[i] = bits_of(round_to_half(float_of(values[i])));
}

// kTableColumns's shuffle control: lane j takes byte j of the 16 entries into byte 2; bytes 0, 1 and 3 have bit 7
// set, so vpshufb writes 0 there.
alignas(32) constexpr uint32_t kColumnLanes[16] = {
    0x8000FFFFu, 0x8001FFFFu, 0x8002FFFFu, 0x8003FFFFu, 0x8004FFFFu, 0x8005FFFFu, 0x8006FFFFu, 0x8007FFFFu,
    0x8008FFFFu, 0x8009FFFFu, 0x800AFFFFu, 0x800BFFFFu, 0x800CFFFFu, 0x800DFFFFu, 0x800EFFFFu, 0x800FFFFFu};

// kTableColumns: out[k][fa][j] = columns7[column[k][j] * 128 + fa] for one B panel of NR = 16 lanes (column: the
// decoded part1, Fb or the zero row 128): per k, 16 columns of 128 bytes transposed into 128 rows of 16, as 4 x 2
// byte transposes of 16 x 16 (4 unpack rounds, each 128-bit half one transpose). 256 unpacks per k against the
// kernel's 3 instructions per 8 products over MC rows (2304 per k at MC = 384); byte by byte it cost more than the
// products (3.8 Gproducts/s).
inline void expand_columns(const uint32_t* column, int64_t kc, const uint8_t* columns7, uint8_t* out) {
  static_assert(kNR == 16, "one byte transpose of 16 columns per k");
  for (int64_t k = 0; k < kc; ++k) {
    const uint32_t* col = column + k * kNR;
    uint8_t* to = out + k * 128 * kNR;
    for (int chunk = 0; chunk < 4; ++chunk) {  // fa in [32 chunk, 32 chunk + 32): the low half 16, the high half 16
      __m256i r[16], a[16], b[16], c[16];
      for (int j = 0; j < 16; ++j)
        r[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(columns7 + col[j] * 128 + 32 * chunk));
      for (int i = 0; i < 8; ++i) {  // a[8h + i]: columns 2i, 2i + 1, word f - 8h for fa f in [8h, 8h + 8)
        a[i] = _mm256_unpacklo_epi8(r[2 * i], r[2 * i + 1]);
        a[8 + i] = _mm256_unpackhi_epi8(r[2 * i], r[2 * i + 1]);
      }
      for (int h = 0; h < 2; ++h)
        for (int q = 0; q < 4; ++q) {  // b[4g + q]: columns 4q..4q+3, dword f - 4g for fa f in [4g, 4g + 4)
          b[8 * h + q] = _mm256_unpacklo_epi16(a[8 * h + 2 * q], a[8 * h + 2 * q + 1]);
          b[8 * h + 4 + q] = _mm256_unpackhi_epi16(a[8 * h + 2 * q], a[8 * h + 2 * q + 1]);
        }
      for (int g = 0; g < 4; ++g)
        for (int o = 0; o < 2; ++o) {  // c[2p + o]: columns 8o..8o+7, qword f - 2p for fa f in [2p, 2p + 2)
          c[4 * g + o] = _mm256_unpacklo_epi32(b[4 * g + 2 * o], b[4 * g + 2 * o + 1]);
          c[4 * g + 2 + o] = _mm256_unpackhi_epi32(b[4 * g + 2 * o], b[4 * g + 2 * o + 1]);
        }
      for (int p = 0; p < 8; ++p) {
        const __m256i even = _mm256_unpacklo_epi64(c[2 * p], c[2 * p + 1]);
        const __m256i odd = _mm256_unpackhi_epi64(c[2 * p], c[2 * p + 1]);
        uint8_t* row = to + (32 * chunk + 2 * p) * kNR;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(row), _mm256_castsi256_si128(even));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(row + kNR), _mm256_castsi256_si128(odd));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(row + 16 * kNR), _mm256_extracti128_si256(even, 1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(row + 17 * kNR), _mm256_extracti128_si256(odd, 1));
      }
    }
  }
}

template <Mode M, bool kExpanded>
void micro_loop(const MicroArgs& x) {
  constexpr Form F = kForm<M>;
  constexpr bool kPart2 = F == Form::kAddBits || F == Form::kMbmFormula || (F == Form::kTableColumns && !kExpanded);
  __m256 acc[kMR][2];
  for (int r = 0; r < kMR; ++r) {
    acc[r][0] = x.load_acc ? _mm256_loadu_ps(x.acc + r * x.ld_acc) : _mm256_setzero_ps();
    acc[r][1] = x.load_acc ? _mm256_loadu_ps(x.acc + r * x.ld_acc + 8) : _mm256_setzero_ps();
  }
  const __m256i zero = _mm256_setzero_si256();
  const int64_t kc = x.kc;
  for (int64_t k = 0; k < kc; ++k) {
    const uint32_t* b0 = x.b0 + k * kNR;
    const __m256i b0_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0));
    const __m256i b0_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b0 + 8));
    __m256i b1_lo = zero, b1_hi = zero, b2_lo = zero, b2_hi = zero;
    if constexpr (kExpanded) {
      b1_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kColumnLanes));
      b1_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kColumnLanes + 8));
    } else if constexpr (F == Form::kMbmFormula) {
      b1_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.b1 + k * kNR));
      b1_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.b1 + k * kNR + 8));
    }
    if constexpr (kPart2) {
      b2_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.b2 + k * kNR));
      b2_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.b2 + k * kNR + 8));
    }
#pragma GCC unroll 6
    for (int r = 0; r < kMR; ++r) {
      const int64_t at = r * kc + k;
      const __m256i a0 = set1(x.a0[at]);
      const __m256i a1 = F == Form::kMbmFormula ? set1(x.a1[at]) : zero;
      const __m256 a2 = kPart2 && F != Form::kTableColumns
                            ? _mm256_broadcast_ss(reinterpret_cast<const float*>(x.a2 + at))
                            : _mm256_setzero_ps();
      const uint8_t* row = kExpanded                  ? x.b_columns + k * 128 * kNR + x.a1[at]
                           : F == Form::kTableColumns ? x.table7 + x.a1[at] * (128 / kNR)
                                                      : nullptr;
      acc[r][0] = multiply_add8<M, kExpanded>(acc[r][0], a0, a1, a2, b0_lo, b1_lo, b2_lo, row);
      acc[r][1] = multiply_add8<M, kExpanded>(acc[r][1], a0, a1, a2, b0_hi, b1_hi, b2_hi, row);
    }
  }
  for (int r = 0; r < kMR; ++r) {
    _mm256_storeu_ps(x.acc + r * x.ld_acc, acc[r][0]);
    _mm256_storeu_ps(x.acc + r * x.ld_acc + 8, acc[r][1]);
  }
}

template <Mode M>
void micro_fast(const MicroArgs& x) {
  if constexpr (kForm<M> == Form::kTableColumns) {
    if (x.b_columns != nullptr) return micro_loop<M, true>(x);
  }
  micro_loop<M, false>(x);
}

}  // namespace cpu_layer
}  // namespace amdnn

#endif  // AMDNN_OPS_CC_GEMM_CPU_AVX2_H_
