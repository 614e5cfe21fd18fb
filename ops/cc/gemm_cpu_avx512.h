// The x86-64-v4 layer of the CPU GEMM (AVX-512 F/BW/DQ/VL, and VBMI where the CPU has it): the register tile and
// the inner product; the skeleton in gemm_cpu.cc does the rest.
//
// Rule 2 zeros are mask registers: the left operand (read by broadcasts straight from memory: an embedded {1to16}
// operand costs no shuffle-port uop) has a 16-bit mask loaded into a mask register, the right one a 32-bit mask per
// k; masked adds skip the lanes that take no part. This keeps port 5 free for the table permutes.
#ifndef AMDNN_OPS_CC_GEMM_CPU_AVX512_H_
#define AMDNN_OPS_CC_GEMM_CPU_AVX512_H_

#include <immintrin.h>

#include "gemm_cpu_layer.h"

namespace amdnn {
namespace cpu_layer {

#if defined(__AVX512VBMI__)
constexpr const char* kLevel = "x86-64-v4 (AVX-512) with VBMI";
constexpr bool kPermuteBytes = true;  // vpermi2b looks up 64 table bytes at once
#else
constexpr const char* kLevel = "x86-64-v4 (AVX-512) without VBMI";
constexpr bool kPermuteBytes = false;
#endif
// Register tile 6 rows x two 16-lane vectors: 12 accumulators. KC keeps a B micro-panel (KC x NR, two 4-byte
// planes) at 32 KB, inside the 48 KB L1 of current Xeons.
constexpr int64_t kMR = 6;
constexpr int64_t kNR = 32;
constexpr bool kMaskRegisters = true;

// A mode not named here has no fast kernel: the generic one runs it.
template <Mode M>
constexpr Form kForm = M == Mode::kAcc32 || M == Mode::kAcc16 || M == Mode::kFp16 ? Form::kMultiply
                       : M == Mode::kMit32 || M == Mode::kMit16                  ? Form::kAddBits
                       : M == Mode::kAm32                                        ? Form::kMbmFormula
                       : M != Mode::kAm16 && M != Mode::kTable                   ? Form::kNone
                       : kPermuteBytes                                           ? Form::kTablePermute
                                                                                 : Form::kTableDwords;

inline __m512i set1(uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }

// 16 products of a (broadcast) with 16 lanes of b, as the value (or bits) to add to the accumulator.
template <Mode M>
inline __m512 fast_product16(__m512i a0, __m512i b0, __m512i a1, __m512i b1) {
  constexpr Form F = kForm<M>;
  if constexpr (M == Mode::kAcc32) {
    return _mm512_mul_ps(_mm512_castsi512_ps(a0), _mm512_castsi512_ps(b0));
  } else if constexpr (M == Mode::kFp16) {
    const __m512 p = _mm512_mul_ps(_mm512_castsi512_ps(a0), _mm512_castsi512_ps(b0));
    return _mm512_cvtph_ps(_mm512_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  } else if constexpr (M == Mode::kAcc16) {
    const __m512 p = _mm512_mul_ps(_mm512_castsi512_ps(a0), _mm512_castsi512_ps(b0));
    return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(p), set1(0xFFFF0000u)));
  } else if constexpr (F == Form::kAddBits) {
    return _mm512_castsi512_ps(_mm512_add_epi32(a0, b0));
  } else if constexpr (F == Form::kMbmFormula) {
    // The MBM correction as a function of y = Fa + Fb - shift is C0 below ONE - C0, falls by one unit per two of y
    // across [ONE - C0, ONE) (the halved carry case), is C1 up to 2 ONE - C1 and 0 above.
    const __m512i c0 = set1(kMbmC0);
    const __m512i y = _mm512_add_epi32(a1, b1);
    __m512i v = _mm512_min_epi32(_mm512_sub_epi32(c0, _mm512_srai_epi32(y, 1)), c0);
    const __mmask16 below_top = _mm512_cmplt_epi32_mask(y, set1(kMbm<M>.top));
    v = _mm512_maskz_max_epi32(below_top, v, set1(kMbmC1));
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_add_epi32(a0, b0), v));
  } else {
    return _mm512_setzero_ps();  // the table forms: see table_term16
  }
}

// pb * T for 16 lanes of a table form (pa * (pb * T) is then one exact FMA: pa is a power of two): pb's bits plus
// the entry c << 7 | M at bit 16, looked up in the left operand's 128-byte table row (row_lo, row_hi).
// kTablePermute: byte 2 of every lane of b1 holds Fb and the byte permute lands the entry in byte 2.
// kTableDwords (no byte permute without VBMI): the dword permute fetches the 4 entries around it, the in-lane byte
// shuffle keeps the one wanted in byte 2 and zeros the rest, both driven by one control word (dwords_control): 4
// instructions per 16 products. The vpgatherdd it replaces (16 loads) ran lut at 1.6-2.7 Gproducts/s on Zen 4,
// this at 17.6 (single thread); am16 went from a 7-instruction byte formula of its MBM correction
// (10.9) to 17.4.
// Lanes of rule 2 zeros (their b0 is 0 too) look nothing up, so they add 0 * pa.
template <Form F>
inline __m512 table_term16(__m512i b0, __m512i b1, __mmask64 permute_lanes, __m512i row_lo, __m512i row_hi) {
  if constexpr (F == Form::kTablePermute) {
#if defined(__AVX512VBMI__)
    const __m512i entry = _mm512_maskz_permutex2var_epi8(permute_lanes, row_lo, b1, row_hi);
    return _mm512_castsi512_ps(_mm512_add_epi32(b0, entry));
#endif
  } else {
    const __m512i four = _mm512_permutex2var_epi32(row_lo, b1, row_hi);
    return _mm512_castsi512_ps(_mm512_add_epi32(b0, _mm512_shuffle_epi8(four, b1)));
  }
  return _mm512_setzero_ps();
}

// values[i] = round_to_half(values[i]) (fp16's decoding), 16 at a time: see gemm_cpu_avx2.h.
inline void round_to_half_in_place(uint32_t* values, size_t count) {
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512 v = _mm512_castsi512_ps(_mm512_loadu_si512(values + i));
    _mm512_storeu_si512(values + i, _mm512_castps_si512(_mm512_cvtph_ps(
                                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))));
  }
  for (; i < count; ++i) values[i] = bits_of(round_to_half(float_of(values[i])));
}

// The table forms here look the left operand's row up in registers; none expands the right operand's columns.
inline void expand_columns(const uint32_t*, int64_t, const uint8_t*, uint8_t*) {}

template <Mode M>
void micro_fast(const MicroArgs& x) {
  constexpr Form F = kForm<M>;
  constexpr bool kTable = F == Form::kTablePermute || F == Form::kTableDwords;
  constexpr bool kPart1 = F == Form::kMbmFormula || kTable;
  constexpr bool kMasked = F == Form::kAddBits || F == Form::kMbmFormula;
  __m512 acc[kMR][2];
  for (int r = 0; r < kMR; ++r) {
    acc[r][0] = x.load_acc ? _mm512_loadu_ps(x.acc + r * x.ld_acc) : _mm512_setzero_ps();
    acc[r][1] = x.load_acc ? _mm512_loadu_ps(x.acc + r * x.ld_acc + 16) : _mm512_setzero_ps();
  }
  __m512i b1_lo = _mm512_setzero_si512(), b1_hi = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
  __m512i row_lo = _mm512_setzero_si512(), row_hi = _mm512_setzero_si512();
  __mmask16 b_lo_mask = 0xFFFF, b_hi_mask = 0xFFFF;
  __mmask64 permute_lo = 0, permute_hi = 0;
  const int64_t kc = x.kc;
  for (int64_t k = 0; k < kc; ++k) {
    const __m512i b0_lo = _mm512_loadu_si512(x.b0 + k * kNR), b0_hi = _mm512_loadu_si512(x.b0 + k * kNR + 16);
    if constexpr (kPart1) {
      b1_lo = _mm512_loadu_si512(x.b1 + k * kNR);
      b1_hi = _mm512_loadu_si512(x.b1 + k * kNR + 16);
    }
    if constexpr (kMasked) {
      b_lo_mask = static_cast<__mmask16>(x.b_mask[k] & 0xFFFFu);
      b_hi_mask = static_cast<__mmask16>(x.b_mask[k] >> 16);
    }
    if constexpr (F == Form::kTablePermute) {
      permute_lo = x.b_permute_mask[2 * k];
      permute_hi = x.b_permute_mask[2 * k + 1];
    }
#pragma GCC unroll 6
    for (int r = 0; r < kMR; ++r) {
      const int64_t at = r * kc + k;
      const __m512i a0 = set1(x.a0[at]);
      if constexpr (kTable) {
        const uint8_t* row = x.table7 + x.a1[at];
        row_lo = _mm512_loadu_si512(row);
        row_hi = _mm512_loadu_si512(row + 64);
      } else if constexpr (kPart1) {
        a1 = set1(x.a1[at]);
      }
      if constexpr (kTable) {
        const __m512 pa = _mm512_castsi512_ps(a0);
        acc[r][0] = _mm512_fmadd_ps(pa, table_term16<F>(b0_lo, b1_lo, permute_lo, row_lo, row_hi), acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(pa, table_term16<F>(b0_hi, b1_hi, permute_hi, row_lo, row_hi), acc[r][1]);
        continue;
      }
      const __m512 p_lo = fast_product16<M>(a0, b0_lo, a1, b1_lo);
      const __m512 p_hi = fast_product16<M>(a0, b0_hi, a1, b1_hi);
      if constexpr (kMasked) {
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

}  // namespace cpu_layer
}  // namespace amdnn

#endif  // AMDNN_OPS_CC_GEMM_CPU_AVX512_H_
