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

template <Mode M>
constexpr Form kForm = M == Mode::kAcc32 || M == Mode::kAcc16 || M == Mode::kFp16 ? Form::kMultiply
                       : M == Mode::kMit32 || M == Mode::kMit16                  ? Form::kAddBits
                       : M == Mode::kAm32                                        ? Form::kMbmFormula
                       : M == Mode::kAm16                                        ? Form::kMbmBytes
                                                                                 : Form::kTableDwords;

inline __m256i set1(uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }
inline __m256i as_int(__m256 v) { return _mm256_castps_si256(v); }
inline __m256 as_float(__m256i v) { return _mm256_castsi256_ps(v); }

// acc plus the product of the broadcast left operand (a0..a2) and 8 lanes of the right one (b0..b2).
template <Mode M>
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
  } else if constexpr (F == Form::kMbmBytes) {
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kBytesCorrection)));
    __m256i index = _mm256_add_epi8(a1, b1);
    index = _mm256_max_epu8(_mm256_min_epi8(index, _mm256_set1_epi8(kBytesHigh)), _mm256_set1_epi8(kBytesLow));
    const __m256i correction = _mm256_shuffle_epi8(table, index);
    const __m256i p = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(a0, b0), correction), b2);
    return _mm256_fmadd_ps(as_float(p), a2, acc);
  } else {
    // Tables: pa * (pb * T), pa = +-2^(Ea-127) (+-0 for a rule 2 zero), pb * T = pb's bits plus the entry at bit 16,
    // looked up in the left operand's 128-byte row: the dword holding it is one of 8 in each 32-byte quarter
    // (vpermd by Fb >> 2), the quarter is chosen by Fb's bits 5 and 6 (two blend levels; the control word's bits 3
    // and 4 moved to bit 31), and vpshufb keeps the entry's byte in byte 2 (see dwords_control). 10 instructions
    // per 8 products: 6.4 Gproducts/s on Zen 4 against 2.7 by vpgatherdd (8 loads per 8 products).
    const __m256i q0 = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row)), b1);
    const __m256i q1 = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32)), b1);
    const __m256i q2 = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 64)), b1);
    const __m256i q3 = _mm256_permutevar8x32_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 96)), b1);
    const __m256 bit5 = as_float(_mm256_slli_epi32(b1, 28)), bit6 = as_float(_mm256_slli_epi32(b1, 27));
    const __m256 low = _mm256_blendv_ps(as_float(q0), as_float(q1), bit5);
    const __m256 high = _mm256_blendv_ps(as_float(q2), as_float(q3), bit5);
    const __m256i four = as_int(_mm256_blendv_ps(low, high, bit6));
    const __m256i pb_t = _mm256_add_epi32(b0, _mm256_shuffle_epi8(four, b1));
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

template <Mode M>
void micro_fast(const MicroArgs& x) {
  constexpr Form F = kForm<M>;
  constexpr bool kPart1 = F == Form::kMbmFormula || F == Form::kMbmBytes || F == Form::kTableDwords;
  constexpr bool kPart2 = F == Form::kAddBits || F == Form::kMbmFormula || F == Form::kMbmBytes;
  // kTableDwords needs ~6 registers beyond the 12 accumulators, so GCC keeps the accumulators on the stack (memory
  // operands of the FMAs); two passes of 3 rows with 6 accumulators in registers measured 8 % slower (5.9 against
  // 6.4 Gproducts/s): the 10 vector instructions per 8 products bound it, not the spills.
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
    if constexpr (kPart1) {
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
      const __m256i a1 = kPart1 && F != Form::kTableDwords ? set1(x.a1[at]) : zero;
      const __m256 a2 = kPart2 ? _mm256_broadcast_ss(reinterpret_cast<const float*>(x.a2 + at)) : _mm256_setzero_ps();
      const uint8_t* row = F == Form::kTableDwords ? x.table7 + x.a1[at] : nullptr;
      acc[r][0] = multiply_add8<M>(acc[r][0], a0, a1, a2, b0_lo, b1_lo, b2_lo, row);
      acc[r][1] = multiply_add8<M>(acc[r][1], a0, a1, a2, b0_hi, b1_hi, b2_hi, row);
    }
  }
  for (int r = 0; r < kMR; ++r) {
    _mm256_storeu_ps(x.acc + r * x.ld_acc, acc[r][0]);
    _mm256_storeu_ps(x.acc + r * x.ld_acc + 8, acc[r][1]);
  }
}

}  // namespace cpu_layer
}  // namespace amdnn

#endif  // AMDNN_OPS_CC_GEMM_CPU_AVX2_H_
