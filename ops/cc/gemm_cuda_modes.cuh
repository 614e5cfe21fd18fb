// The fast formulas of every mode for the CUDA GEMM: how an operand is decoded once when it is staged, and the
// few instructions that then add one product to a running sum exactly as acc + product<M>(a, b) would.
#ifndef AMDNN_OPS_CC_GEMM_CUDA_MODES_CUH_
#define AMDNN_OPS_CC_GEMM_CUDA_MODES_CUH_

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "multiplier.h"

namespace amdnn {
namespace gpu {
namespace {

constexpr uint32_t kFastMinExponent = 64, kFastMaxExponent = 190;
constexpr uint32_t kHalfInfFrom = 0x477FF000u;  // |x| >= 65520 rounds to a half infinity

// ------------------------------------------------------------------------------------------------ mode traits

__device__ __forceinline__ uint32_t exponent_of(uint32_t u) { return (u >> 23) & 0xFFu; }

__device__ __forceinline__ bool in_fast_range(uint32_t u) {
  const uint32_t e = exponent_of(u);
  return e == 0u || (e >= kFastMinExponent && e <= kFastMaxExponent);
}

// sign * 2^(E - 127) as fp32 bits, or a zero for E = 0 (rule 2).
__device__ __forceinline__ uint32_t power_of_two(uint32_t u) {
  return exponent_of(u) == 0u ? 0u : (u & 0xFF800000u);
}

__device__ __forceinline__ uint32_t nonzero_mask(uint32_t u) { return exponent_of(u) == 0u ? 0u : 0xFFFFFFFFu; }

// acc + p for the generic path with x86's NaN rules (SSE addss): a NaN sum is the first NaN operand, inf + -inf the
// default NaN 0xFFC00000. The GPU's FADD returns its canonical 0x7FFFFFFF for both, so an output that is one product
// (or one NaN) would differ from the definition's bits without this.
__device__ __forceinline__ float add_keeping_nan(float acc, float p) {
  const uint32_t ua = __float_as_uint(acc), up = __float_as_uint(p);
  if ((ua & ~kSignMask) > kExpMask) return acc;
  if ((up & ~kSignMask) > kExpMask) return p;
  if ((ua & ~kSignMask) == kExpMask && (up & ~kSignMask) == kExpMask && ua != up) return __uint_as_float(0xFFC00000u);
  return __fadd_rn(acc, p);
}

// Per mode: kPlanes decoded words per operand, decode(bits, left) -> planes, exact(bits) for the fast range, and
// madd(acc, a planes, b planes, table) adding the product of one pair to acc exactly as acc + product<M>(a, b).
template <Mode M>
struct Fast;

template <>
struct Fast<Mode::kAcc32> {  // FMUL + FADD: the product rounded to fp32 before it is added (no FMA contraction)
  static constexpr int kPlanes = 1;
  __device__ static bool exact(uint32_t u) { return in_fast_range(u); }
  __device__ static void decode(uint32_t u, bool, uint32_t* w) { w[0] = exponent_of(u) == 0u ? (u & kSignMask) : u; }
  __device__ static float madd(float acc, const uint32_t* a, const uint32_t* b, const char*) {
    return __fadd_rn(acc, __fmul_rn(__uint_as_float(a[0]), __uint_as_float(b[0])));
  }
};

template <>
struct Fast<Mode::kAcc16> {  // bf16 operands multiply exactly in fp32 (8 x 8 bits); truncating is a mask
  static constexpr int kPlanes = 1;
  __device__ static bool exact(uint32_t u) { return in_fast_range(u); }
  __device__ static void decode(uint32_t u, bool, uint32_t* w) {
    w[0] = exponent_of(u) == 0u ? (u & kSignMask) : (u & 0xFFFF0000u);
  }
  __device__ static float madd(float acc, const uint32_t* a, const uint32_t* b, const char*) {
    const float p = __fmul_rn(__uint_as_float(a[0]), __uint_as_float(b[0]));
    return __fadd_rn(acc, __uint_as_float(__float_as_uint(p) & 0xFFFF0000u));
  }
};

template <>
struct Fast<Mode::kFp16> {  // the half multiply is IEEE: exact product rounded once to binary16, subnormals kept
  static constexpr int kPlanes = 1;
  __device__ static bool exact(uint32_t u) { return (u & ~kSignMask) < kHalfInfFrom; }
  __device__ static void decode(uint32_t u, bool, uint32_t* w) {
    w[0] = __half_as_ushort(__float2half_rn(__uint_as_float(u)));
  }
  __device__ static float madd(float acc, const uint32_t* a, const uint32_t* b, const char*) {
    const __half p = __hmul(__ushort_as_half(static_cast<unsigned short>(a[0])),
                            __ushort_as_half(static_cast<unsigned short>(b[0])));
    return __fadd_rn(acc, __half2float(p));
  }
};

// Mitchell is integer addition of the bit patterns: exponents add, mantissas add, and their carry lands in the
// exponent; with the bias taken off once, sign xor included (the magnitudes cannot reach bit 31 in the fast range).
// Zeros: a mask per operand.
template <bool kTruncate>
struct FastMitchell {
  static constexpr int kPlanes = 2;
  __device__ static bool exact(uint32_t u) { return in_fast_range(u); }
  __device__ static void decode(uint32_t u, bool, uint32_t* w) {
    w[0] = kTruncate ? (u & 0xFFFF0000u) : u;
    w[1] = nonzero_mask(u);
  }
  __device__ static float madd(float acc, const uint32_t* a, const uint32_t* b, const char*) {
    const uint32_t x = (a[0] + b[0] - kOneBits) & a[1] & b[1];
    return __fadd_rn(acc, __uint_as_float(x));
  }
};
template <>
struct Fast<Mode::kMit32> : FastMitchell<false> {};
template <>
struct Fast<Mode::kMit16> : FastMitchell<true> {};

template <>
struct Fast<Mode::kAm32> {  // MBM on 23 bits: Mitchell's sum plus the correction, with its two corners
  static constexpr int kPlanes = 2;
  __device__ static bool exact(uint32_t u) { return in_fast_range(u); }
  __device__ static void decode(uint32_t u, bool, uint32_t* w) {
    w[0] = u;
    w[1] = nonzero_mask(u);
  }
  __device__ static float madd(float acc, const uint32_t* a, const uint32_t* b, const char*) {
    const uint32_t x = a[0] + b[0] - kOneBits;  // Mitchell: E<<23 | S below the carry, (E+1)<<23 | S-ONE above
    const uint32_t mx = x & kMantMask;
    const bool carry = mx < (a[0] & kMantMask);
    const uint32_t r = x + (carry ? 327680u : 655360u);  // + the correction K, halved after a carry
    const bool crossed = (r & kMantMask) < mx;             // the corrected mantissa reached 2
    // crossed without a carry: the product reached 2, M = (T - ONE) >> 1; crossed after a carry: K is dropped.
    const uint32_t halved = (r & 0xFF800000u) | ((r & kMantMask) >> 1);
    const uint32_t result = crossed ? (carry ? x : halved) : r;
    return __fadd_rn(acc, __uint_as_float(result & a[1] & b[1]));
  }
};

// Table modes: product = pa * (pb * G) with pa, pb = sign * 2^(E - 127) and G = 2^c (1 + M/128) from a table in
// shared memory: both multiplies are exact in the fast range, so the FMA adds exactly the defined product.
// am16: the MBM result depends only on S = (Fa|1) + (Fb|1): a 256-entry table, replicated 32 times so that lane l
// reads copy l and a warp's lookups never conflict (entry S of copy l at float S * 32 + l; offsets are in bytes).
template <>
struct Fast<Mode::kAm16> {
  static constexpr int kPlanes = 2;
  __device__ static bool exact(uint32_t u) { return in_fast_range(u); }
  __device__ static void decode(uint32_t u, bool, uint32_t* w) {
    w[0] = power_of_two(u);
    w[1] = (((u >> 16) & 0x7Fu) | 1u) * 128u;
  }
  __device__ static float madd(float acc, const uint32_t* a, const uint32_t* b, const char* table_lane) {
    const float g = *reinterpret_cast<const float*>(table_lane + (a[1] + b[1]));
    return __fmaf_rn(__uint_as_float(a[0]), __fmul_rn(__uint_as_float(b[0]), g), acc);
  }
};

// lut tables (any 128 x 128 table, not symmetric in general): G[Fa][Fb] as 16384 floats, the left operand the row.
template <>
struct Fast<Mode::kTable> {
  static constexpr int kPlanes = 2;
  __device__ static bool exact(uint32_t u) { return in_fast_range(u); }
  __device__ static void decode(uint32_t u, bool left, uint32_t* w) {
    w[0] = power_of_two(u);
    w[1] = ((u >> 16) & 0x7Fu) * (left ? 512u : 4u);
  }
  __device__ static float madd(float acc, const uint32_t* a, const uint32_t* b, const char* table) {
    const float g = *reinterpret_cast<const float*>(table + (a[1] + b[1]));
    return __fmaf_rn(__uint_as_float(a[0]), __fmul_rn(__uint_as_float(b[0]), g), acc);
  }
};

template <Mode M>
constexpr int table_bytes() {
  return M == Mode::kAm16 ? 256 * 32 * 4 : (M == Mode::kTable ? kTableSize * 4 : 0);
}

}  // namespace
}  // namespace gpu
}  // namespace amdnn

#endif  // AMDNN_OPS_CC_GEMM_CUDA_MODES_CUH_
