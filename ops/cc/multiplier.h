// The multiplier modes of docs/multipliers-spec.md as scalar functions, bit for bit; host and device code share it.
//
// Every kernel (the CPU GEMM in gemm_cpu.cc, the CUDA core in gemm_cuda.cu) must produce exactly what `product<M>(a, b)` returns for
// every pair of operands; the vectorised CPU fast paths are checked against these functions by the tests.
// Decisions are made on bit patterns, never on float comparisons, so that the caller's flush-to-zero /
// denormals-are-zero state cannot change a result (TensorFlow's CPU threads run with FTZ and DAZ set).
#ifndef AMDNN_OPS_CC_MULTIPLIER_H_
#define AMDNN_OPS_CC_MULTIPLIER_H_

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "multiplier_modes.h"

#if defined(__CUDACC__)
#define AMDNN_HD __host__ __device__ __forceinline__
#else
#define AMDNN_HD inline
#endif

namespace amdnn {

// The modes the kernels implement (multiplier_modes.h), kAcc32 = 0 first; Python's ops/modes/multipliers.py is the list
// users see ("lut:<file>" maps to kTable). kAnyMode is no multiplier: it names the CUDA kernel that serves every mode,
// reading the mode at run time (gemm_cuda_kernel.cuh); a template argument must be an enumerator for nvcc's stubs.
#define AMDNN_MODE_ENUMERATOR(id, name, fn) id,
enum class Mode : int32_t { AMDNN_MODES(AMDNN_MODE_ENUMERATOR) kAnyMode = -1 };
#undef AMDNN_MODE_ENUMERATOR

constexpr uint32_t kSignMask = 0x80000000u;
constexpr uint32_t kExpMask = 0x7F800000u;
constexpr uint32_t kMantMask = 0x007FFFFFu;
constexpr uint32_t kOneBits = 0x3F800000u;  // 1.0f: the exponent bias in place
constexpr int kTableBits = 7;                // every table is used in its canonical m = 7 form (128 x 128 bytes)
constexpr int kTableSize = 1 << (2 * kTableBits);

AMDNN_HD uint32_t bits_of(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
#endif
}

AMDNN_HD float float_of(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
#endif
}

AMDNN_HD bool is_inf_or_nan(uint32_t u) { return (u & kExpMask) == kExpMask; }
AMDNN_HD uint32_t biased_exponent(uint32_t u) { return (u >> 23) & 0xFFu; }

// Rule 1: the IEEE product when an operand is inf or NaN (inf x 0 = NaN, inf x subnormal = inf, NaN propagates).
AMDNN_HD uint32_t special_product(uint32_t a, uint32_t b) {
  const uint32_t abs_a = a & ~kSignMask, abs_b = b & ~kSignMask;
  if (abs_a > kExpMask) return a | 0x00400000u;  // NaN: quieted, first operand first (as x86 does)
  if (abs_b > kExpMask) return b | 0x00400000u;
  if (abs_a == 0 || abs_b == 0) return 0xFFC00000u;  // inf x 0: the default NaN
  return ((a ^ b) & kSignMask) | kExpMask;
}

// Rule 3: sign, biased exponent (carry included) and the mantissa field placed in bits 22..0.
AMDNN_HD uint32_t assemble(uint32_t sign, int32_t exponent, uint32_t mantissa_field) {
  if (exponent <= 0) return sign;
  if (exponent >= 255) return sign | kExpMask;
  return sign | (static_cast<uint32_t>(exponent) << 23) | mantissa_field;
}

struct MantissaProduct {
  uint32_t carry;     // c: the product of the two significands reached 2
  uint32_t mantissa;  // M: m bits
};

// Mitchell's logarithmic multiplier: 1 + xa + xb below the carry, 2(xa + xb) above it.
AMDNN_HD MantissaProduct mitchell_mantissa(uint32_t fa, uint32_t fb, int m) {
  const uint32_t one = 1u << m;
  const uint32_t sum = fa + fb;
  return sum < one ? MantissaProduct{0u, sum} : MantissaProduct{1u, sum - one};
}

// The Minimally Biased Multiplier (Saadat et al., TCAD 2018) with its correction K = 2^-4 + 2^-6.
AMDNN_HD MantissaProduct mbm_mantissa(uint32_t fa, uint32_t fb, int m) {
  const uint32_t one = 1u << m;
  if (m < 23) {  // forcing the lowest kept bit removes the bias of truncating the operands
    fa |= 1u;
    fb |= 1u;
  }
  const uint32_t sum = fa + fb;
  const uint32_t carry = sum >= one ? 1u : 0u;
  const uint32_t correction = (655360u >> carry) >> (23 - m);
  if (carry == 0u) {
    const uint32_t t = sum + correction;
    return t < one ? MantissaProduct{0u, t} : MantissaProduct{1u, (t - one) >> 1};
  }
  const uint32_t t = (sum - one) + correction;
  return t >= one ? MantissaProduct{1u, sum - one} : MantissaProduct{1u, t};
}

// acc16: exact product of bfloat16 significands (units of 2^-14), truncated to 7 bits.
AMDNN_HD MantissaProduct bf16_mantissa(uint32_t fa, uint32_t fb) {
  const uint32_t p = (128u + fa) * (128u + fb);
  return p >= (1u << 15) ? MantissaProduct{1u, (p - (1u << 15)) >> 8} : MantissaProduct{0u, (p - (1u << 14)) >> 7};
}

AMDNN_HD MantissaProduct table_mantissa(const uint8_t* table7, uint32_t fa, uint32_t fb) {
  const uint8_t entry = table7[(fa << kTableBits) | fb];
  return MantissaProduct{static_cast<uint32_t>(entry >> 7), static_cast<uint32_t>(entry & 0x7Fu)};
}

// Rules 1-3 around a mantissa product with m kept bits.
template <class MantissaFn>
AMDNN_HD float approximate_product(float a, float b, int m, MantissaFn mantissa_fn) {
  const uint32_t ua = bits_of(a), ub = bits_of(b);
  if (is_inf_or_nan(ua) || is_inf_or_nan(ub)) return float_of(special_product(ua, ub));
  const uint32_t sign = (ua ^ ub) & kSignMask;
  const int32_t ea = static_cast<int32_t>(biased_exponent(ua)), eb = static_cast<int32_t>(biased_exponent(ub));
  if (ea == 0 || eb == 0) return float_of(sign);  // rule 2: zeros and subnormals count as zero
  const MantissaProduct p = mantissa_fn((ua & kMantMask) >> (23 - m), (ub & kMantMask) >> (23 - m));
  return float_of(assemble(sign, ea + eb - 127 + static_cast<int32_t>(p.carry), p.mantissa << (23 - m)));
}

// acc32: the IEEE fp32 product (the caller runs with FTZ/DAZ off), rules 1 and 2, a subnormal product flushed.
AMDNN_HD float acc32_product(float a, float b) {
  const uint32_t ua = bits_of(a), ub = bits_of(b);
  if (is_inf_or_nan(ua) || is_inf_or_nan(ub)) return float_of(special_product(ua, ub));
  const uint32_t sign = (ua ^ ub) & kSignMask;
  if (biased_exponent(ua) == 0 || biased_exponent(ub) == 0) return float_of(sign);
  const uint32_t up = bits_of(a * b);
  return (up & kExpMask) == 0 ? float_of(up & kSignMask) : float_of(up);
}

// IEEE binary16, round to nearest even, subnormals kept, overflow to inf.
AMDNN_HD uint16_t half_from_float(float f) {
  const uint32_t x = bits_of(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & ~kSignMask;
  if (ax > kExpMask) return static_cast<uint16_t>(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));  // quiet NaN
  if (ax >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520 rounds to inf
  if (ax >= 0x38800000u) {  // >= 2^-14: a normal half
    uint32_t q = ((biased_exponent(ax) - 112u) << 10) | ((ax & kMantMask) >> 13);
    const uint32_t rest = ax & 0x1FFFu;
    if (rest > 0x1000u || (rest == 0x1000u && (q & 1u))) ++q;  // a carry into the exponent is right
    return static_cast<uint16_t>(sign | q);
  }
  if (ax < 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25 rounds to zero (the tie goes to even 0)
  // A half subnormal: the value in units of 2^-24 is significand * 2^(e - 126), e in [102, 112].
  const uint32_t significand = (ax & kMantMask) | 0x00800000u;
  const uint32_t shift = 126u - biased_exponent(ax);
  uint32_t q = significand >> shift;
  const uint32_t rest = significand & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

AMDNN_HD float float_from_half(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) return float_of(sign | kExpMask | (mantissa << 13));
  if (exponent == 0u) {
    if (mantissa == 0u) return float_of(sign);
    // mantissa * 2^-24, normalised by hand so no float arithmetic (and no FTZ) is involved
    uint32_t e = 113u, m = mantissa;
    while ((m & 0x400u) == 0u) {
      m <<= 1;
      --e;
    }
    return float_of(sign | (e << 23) | ((m & 0x3FFu) << 13));
  }
  return float_of(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

AMDNN_HD float round_to_half(float f) { return float_from_half(half_from_float(f)); }

// fp16: operands and product rounded to binary16; the product of two halves is exact in fp32. An inf or NaN half
// operand takes the IEEE product decided on bit patterns (special_product): hardware NaN results differ (x86 keeps
// the first NaN operand or gives 0xFFC00000, CUDA gives its canonical 0x7FFFFFFF), the definition does not.
AMDNN_HD float fp16_product(float a, float b) {
  const float ha = round_to_half(a), hb = round_to_half(b);
  const uint32_t ua = bits_of(ha), ub = bits_of(hb);
  if (is_inf_or_nan(ua) || is_inf_or_nan(ub)) return round_to_half(float_of(special_product(ua, ub)));
  return round_to_half(ha * hb);
}

// The product functions of the modes that AMDNN_MODES names, all with one signature.
AMDNN_HD float acc32_product(float a, float b, const uint8_t*) { return acc32_product(a, b); }
AMDNN_HD float fp16_product(float a, float b, const uint8_t*) { return fp16_product(a, b); }
AMDNN_HD float acc16_product(float a, float b, const uint8_t*) {
  return approximate_product(a, b, 7, [](uint32_t x, uint32_t y) { return bf16_mantissa(x, y); });
}
AMDNN_HD float am32_product(float a, float b, const uint8_t*) {
  return approximate_product(a, b, 23, [](uint32_t x, uint32_t y) { return mbm_mantissa(x, y, 23); });
}
AMDNN_HD float am16_product(float a, float b, const uint8_t*) {
  return approximate_product(a, b, 7, [](uint32_t x, uint32_t y) { return mbm_mantissa(x, y, 7); });
}
AMDNN_HD float mit32_product(float a, float b, const uint8_t*) {
  return approximate_product(a, b, 23, [](uint32_t x, uint32_t y) { return mitchell_mantissa(x, y, 23); });
}
AMDNN_HD float mit16_product(float a, float b, const uint8_t*) {
  return approximate_product(a, b, 7, [](uint32_t x, uint32_t y) { return mitchell_mantissa(x, y, 7); });
}
AMDNN_HD float table_product(float a, float b, const uint8_t* table7) {
  return approximate_product(a, b, 7, [table7](uint32_t x, uint32_t y) { return table_mantissa(table7, x, y); });
}

// One product of mode M; `table7` is the canonical 128 x 128 table for kTable (and may be null otherwise).
template <Mode M>
AMDNN_HD float product(float a, float b, const uint8_t* table7) {
#define AMDNN_MODE_PRODUCT(id, name, fn) \
  if constexpr (M == Mode::id) {         \
    return fn(a, b, table7);             \
  } else
  AMDNN_MODES(AMDNN_MODE_PRODUCT) { static_assert(M != M, "a mode without a product function"); }
#undef AMDNN_MODE_PRODUCT
}

// The mode M as a type: what dispatch_mode hands its function (read it back with decltype(tag)::value).
template <Mode M>
using ModeTag = std::integral_constant<Mode, M>;

// The one step from a run-time mode to a template argument (the AT_DISPATCH idiom): fn(ModeTag<M>{}) for the mode,
// `unknown()` for a value outside the enum. E.g.
//   dispatch_mode(mode, [&](auto tag) { run<decltype(tag)::value>(...); }, [] {});
template <class Fn, class Unknown>
inline decltype(auto) dispatch_mode(Mode mode, Fn&& fn, Unknown&& unknown) {
  switch (mode) {
#define AMDNN_MODE_CASE(id, name, f) \
  case Mode::id:                     \
    return fn(ModeTag<Mode::id>{});
    AMDNN_MODES(AMDNN_MODE_CASE)
#undef AMDNN_MODE_CASE
    case Mode::kAnyMode:
      break;
  }
  return unknown();
}

}  // namespace amdnn

#endif  // AMDNN_OPS_CC_MULTIPLIER_H_
