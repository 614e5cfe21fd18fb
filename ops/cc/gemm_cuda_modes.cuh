// The fast formulas of every mode for the CUDA GEMM: how an operand is decoded once when it is staged, and the
// few instructions that then add one product to a running sum exactly as acc + product<M>(a, b) would.
#ifndef AMDNN_OPS_CC_GEMM_CUDA_MODES_CUH_
#define AMDNN_OPS_CC_GEMM_CUDA_MODES_CUH_

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "multiplier.h"

namespace amdnn {
namespace gpu {
namespace {

constexpr uint32_t kFastMinExponent = 64, kFastMaxExponent = 190;
// fp16's fast range: |x| <= 255, so |product| <= 65025, below the largest half (65504): no product is inf and no
// sum meets inf + -inf, whose NaN is the GPU's 0x7FFFFFFF where the definition (x86) gives 0xFFC00000.
constexpr uint32_t kHalfFastMax = 0x437F0000u;

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
// A mode without a specialisation has no fast formula: no operand is in its fast range, so every tile takes the
// generic path (product<M> of multiplier.h), and its madd is never reached.
template <Mode M>
struct Fast {
  static constexpr int kPlanes = 1;
  static constexpr bool kRawIsPlane = true;
  __device__ static bool exact(uint32_t) { return false; }
  __device__ static void decode(uint32_t u, bool, uint32_t* w) { w[0] = u; }
  __device__ static float madd(float acc, const uint32_t*, const uint32_t*, const char*) { return acc; }
};

// acc32 reads the raw bits: FMUL with flush-to-zero (mul.rn.ftz) turns a subnormal operand into the zero that rule 2
// asks for, so nothing is decoded and the tile is staged once (no plane beside the raw bits). No product of the fast
// range is subnormal (exponent sums >= 128), so the flush never touches a result. The sum is an ordinary FADD.
template <>
struct Fast<Mode::kAcc32> {  // FMUL + FADD: the product rounded to fp32 before it is added (no FMA contraction)
  static constexpr int kPlanes = 1;
  static constexpr bool kRawIsPlane = true;
  __device__ static bool exact(uint32_t u) { return in_fast_range(u); }
  __device__ static void decode(uint32_t u, bool, uint32_t* w) { w[0] = u; }
  __device__ static float madd(float acc, const uint32_t* a, const uint32_t* b, const char*) {
    float p;
    asm("mul.rn.ftz.f32 %0, %1, %2;" : "=f"(p) : "f"(__uint_as_float(a[0])), "f"(__uint_as_float(b[0])));
    return __fadd_rn(acc, p);
  }
};

template <>
struct Fast<Mode::kAcc16> {  // bf16 operands multiply exactly in fp32 (8 x 8 bits); truncating is a mask
  static constexpr int kPlanes = 1;
  static constexpr bool kRawIsPlane = false;
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
  static constexpr bool kRawIsPlane = false;
  __device__ static bool exact(uint32_t u) { return (u & ~kSignMask) <= kHalfFastMax; }
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
// Zeros: the integer pipe runs at half the rate of the FP32 pipe on the H100, so instead of masking the sum (a second
// integer op per product) the masks are floats (1 or 0) whose product scales the sum in one FFMA: X * 1 is exact, and
// X * 0 adds nothing as long as X is finite, which a zero operand decoded as 2^-63 (0x20000000) guarantees: then
// X = b - 63 << 23 keeps b's sign and a biased exponent of 1..127 for every b in the fast range, and two zeros give
// X = 2^-126.
template <bool kTruncate>
struct FastMitchell {
  static constexpr int kPlanes = 2;
  static constexpr bool kRawIsPlane = false;
  static constexpr uint32_t kZero = 0x20000000u;
  __device__ static bool exact(uint32_t u) { return in_fast_range(u); }
  __device__ static void decode(uint32_t u, bool, uint32_t* w) {
    const bool zero = exponent_of(u) == 0u;
    w[0] = zero ? kZero : (kTruncate ? (u & 0xFFFF0000u) : u);
    w[1] = zero ? 0u : kOneBits;
  }
  __device__ static float madd(float acc, const uint32_t* a, const uint32_t* b, const char*) {
    const float x = __uint_as_float(a[0] + b[0] - kOneBits);
    return __fmaf_rn(x, __fmul_rn(__uint_as_float(a[1]), __uint_as_float(b[1])), acc);
  }
  // The inner loop of a k tile whose right operands hold no zero (the kernel checks every staged tile): the left mask
  // alone decides, FFMA(X, left mask, acc), so a product is IADD3 + FFMA, 2 instructions instead of 3, and the right
  // operand's mask plane is not read. The same bits: X is the same, and X * 1 and X * 0 are what X * (ma * mb) was.
  // In training the right operand is the weights (forward, input gradient) or the output gradient (filter gradient),
  // dense behind a batch norm; the left one (activations after a ReLU, padding) is the one with zeros.
  struct NonzeroRight {
    static constexpr int kLeftReads = 2, kRightReads = 1;
    __device__ static float madd(float acc, const uint32_t* a, const uint32_t* b, const char*) {
      return __fmaf_rn(__uint_as_float(a[0] + b[0] - kOneBits), __uint_as_float(a[1]), acc);
    }
  };
};
template <>
struct Fast<Mode::kMit32> : FastMitchell<false> {};
template <>
struct Fast<Mode::kMit16> : FastMitchell<true> {};

// MBM on 23 bits as Mitchell's sum X plus the correction D = 2^(Ea + Eb - 254) * K (K = 2^-4 + 2^-6), added in
// floating point rounding toward zero:
// - below the carry, X + D is exact while the mantissa stays below 2; past 2 the sum moves to the next binade, where
//   rounding toward zero truncates (T - ONE) / 2 exactly as the definition does;
// - above the carry, X is in the binade above, where D is the halved correction K / 2, exact;
// - the one corner, above the carry with the corrected sum reaching 4 * 2^(Ea + Eb - 254), drops the correction:
//   result X. The threshold 4 |pa pb| is D * 51.2f rounded toward zero (51.2f exceeds 4 / K by 1.5e-8 relative, less
//   than an ulp), so the corner test is one compare.
// Eight instructions, four of them on the FP32 pipe, against fourteen integer ones for the bit-level definition
// (checked against product<kAm32> on 2 x 10^8 host pairs, 1.7 x 10^6 of them corners, before the device suite).
// Planes: the raw bits, the zero mask, and pa * K (left) or pb (right) as floats (zero for a zero operand).
template <>
struct Fast<Mode::kAm32> {
  static constexpr int kPlanes = 3;
  static constexpr bool kRawIsPlane = false;
  __device__ static bool exact(uint32_t u) { return in_fast_range(u); }
  __device__ static void decode(uint32_t u, bool left, uint32_t* w) {
    w[0] = u;
    w[1] = nonzero_mask(u);
    const float p = __uint_as_float(power_of_two(u));
    w[2] = __float_as_uint(left ? __fmul_rn(p, 0.078125f) : p);
  }
  __device__ static float madd(float acc, const uint32_t* a, const uint32_t* b, const char*) {
    const float x = __uint_as_float((a[0] + b[0] - kOneBits) & a[1] & b[1]);
    const float d = __fmul_rn(__uint_as_float(a[2]), __uint_as_float(b[2]));
    const float r = __fadd_rz(x, d);
    const float limit = __fmul_rz(d, 51.2f);
    return __fadd_rn(acc, fabsf(r) >= fabsf(limit) ? x : r);
  }
};

// am16 is MBM on the 7-bit fields with their forced ones, and MBM is Mitchell's sum plus a correction: with
// X = a' + b' - ONE (Mitchell's integer sum of the truncated bit patterns, field | 1) and
// D = 2^(Ea + Eb - 254) * 10/128, the product is X + D for every pair but the corner S = (Fa|1) + (Fb|1) >= 252, where
// it is X. Below the carry X = 2^E (1 + S/128) and X + D = 2^E (S + 138) / 128; above it X = 2^E S / 64 and
// X + D = 2^E (S + 5) / 64: G(S) of the table this replaced (checked against ops/modes/reference.py on the host, all 16,384
// field pairs at 48 exponent pairs and four signs, and by the device suite product by product). X + D has at most 10
// significant bits, so one FFMA (pa 10/128) * pb + X forms it exactly.
// The corner, both fields in {125, 127} but not both 125 (125 + 125 = 250), is a flag test: each operand carries two
// flag bits in the low mantissa bits of its scale plane (left: 125 -> 1, 127 -> 3; right: 125 -> 2, 127 -> 3), so the
// corner is (flags_a & flags_b) != 0 and the FFMA is skipped under that predicate (one LOP3 to a predicate, a
// predicated FFMA). The flags make the planes pa 10/128 and pb at most 3 ulps larger: the FFMA's exact product moves by
// < 0.85 of half an ulp of X + D (>= 2^E), so it still rounds to X + D exactly. Corners are rare (a field | 1 of 125 or
// 127 is 1 operand in 32), so the 8 x 4 kernels test a whole k step of a warp at once and run its pairs without the
// test when none can be a corner (NonzeroRight::madd_no_corner, 3 instructions).
// Zeros: decoded as 2^-63 (0x20000000), as Mitchell's, so that X stays finite, and scaled out by the 0/1 mask in the
// FFMA that adds the product: acc + X * 1 or acc + X * 0.
// Per product: IADD, LOP3 (to a predicate), predicated FFMA, FFMA; no lookup. The 256-entry table of G(S) it replaced
// (IADD3, LDS, FMUL, FFMA) ran at the same speed on 8 x 8 thread tiles, both at ~70 % of the issue slots with 2 warps
// per scheduler (ncu, H100); without the table's shared-memory pipe and its 207 registers, am16 runs on
// 8 x 4 thread tiles with 4 warps per scheduler (gemm_cuda_kernel.cuh, thread_cols): the 21 conv ops 17.55 -> 17.11 ms
// (H100, same bits).
// Planes: left [a', pa 10/128 | flags, mask], right [b' - ONE, pb | flags, mask].
template <>
struct Fast<Mode::kAm16> {
  static constexpr int kPlanes = 3;
  static constexpr bool kRawIsPlane = false;
  static constexpr uint32_t kZero = 0x20000000u;
  __device__ static bool exact(uint32_t u) { return in_fast_range(u); }
  __device__ static void decode(uint32_t u, bool left, uint32_t* w) {
    const bool zero = (u & 0x7F800000u) == 0u;
    // field | 1 >= 125: the field's top five bits all set; 127: the sixth too. A zero's flags and scales do not
    // matter (its mask scales the product out), and u & 0xFF800000 is already a (signed) zero for it.
    const bool high = ((u >> 18) & 0x1Fu) == 0x1Fu;
    const uint32_t flags = high ? (left ? 1u | ((u >> 16) & 2u) : 2u | ((u >> 17) & 1u)) : 0u;
    const float p = __uint_as_float(u & 0xFF800000u);
    w[0] = (zero ? kZero : ((u & 0xFFFF0000u) | 0x10000u)) - (left ? 0u : kOneBits);
    w[1] = __float_as_uint(left ? __fmul_rn(p, 0.078125f) : p) | flags;
    w[2] = zero ? 0u : kOneBits;
  }
  // X + D, or X in the corner.
  __device__ static float product(const uint32_t* a, const uint32_t* b) {
    float x = __uint_as_float(a[0] + b[0]);
    asm("{\n\t.reg .pred corner;\n\t.reg .b32 f;\n\t"
        "and.b32 f, %1, %2;\n\tand.b32 f, f, 3;\n\tsetp.ne.u32 corner, f, 0;\n\t"
        "@!corner fma.rn.f32 %0, %3, %4, %0;\n\t}"
        : "+f"(x)
        : "r"(a[1]), "r"(b[1]), "f"(__uint_as_float(a[1])), "f"(__uint_as_float(b[1])));
    return x;
  }
  __device__ static float madd(float acc, const uint32_t* a, const uint32_t* b, const char*) {
    return __fmaf_rn(product(a, b), __fmul_rn(__uint_as_float(a[2]), __uint_as_float(b[2])), acc);
  }
  // A k tile whose right operands hold no zero: the left mask alone (Mitchell's NonzeroRight), 4 instructions.
  struct NonzeroRight {
    static constexpr int kLeftReads = 3, kRightReads = 2;
    __device__ static float madd(float acc, const uint32_t* a, const uint32_t* b, const char*) {
      return __fmaf_rn(product(a, b), __uint_as_float(a[2]), acc);
    }
    // Whether any pair of a k step's fragments may be a corner: the left flags' OR against the right flags' OR (a
    // corner pair has a flag bit in both; no pair without a corner shares a bit: 125 with 125 is 1 & 2).
    template <int kTM, int kTN>
    __device__ static bool corner_possible(const uint32_t (&a)[kLeftReads][kTM],
                                           const uint32_t (&b)[kRightReads][kTN]) {
      uint32_t left = 0, right = 0;
#pragma unroll
      for (int i = 0; i < kTM; ++i) left |= a[1][i];
#pragma unroll
      for (int j = 0; j < kTN; ++j) right |= b[1][j];
      return (left & right & 3u) != 0u;
    }
    // A k step whose pairs hold no corner: X + D for every pair, IADD, FFMA, FFMA (the LOP3 to a predicate gone). A
    // field | 1 of 125 or 127 is 1 operand in 32 on each side, so a warp's 8 x 128 pairs of a step
    // (gemm_cuda_kernel.cuh, warp_cols) hold none ~78 % of the time (estimated): the stride-1 128 x 128 ops of the
    // benchmark 4.89-4.99 -> 5.17-5.27 T products/s (H100, same bits).
    __device__ static float madd_no_corner(float acc, const uint32_t* a, const uint32_t* b, const char*) {
      const float x = __uint_as_float(a[0] + b[0]);
      return __fmaf_rn(__fmaf_rn(__uint_as_float(a[1]), __uint_as_float(b[1]), x), __uint_as_float(a[2]), acc);
    }
  };
};

// Table modes: product = pa * (pb * G) with pa, pb = sign * 2^(E - 127) and G = 2^c (1 + M/128) from a table in
// shared memory: both multiplies are exact in the fast range, so the FMA adds exactly the defined product.
// lut tables (any 128 x 128 table, not symmetric in general): the table's bytes c << 7 | M in shared memory, row Fa
// (the left operand's field) at Fa * kRowBytes bytes. A warp's lanes share their left operands (thread_cols in
// gemm_cuda_kernel.cuh), so a lookup reads one row: its 32 words lie in 32 banks, and the warp's 32 lookups never
// conflict (with a float table, 512 bytes a row, a warp's lookups met in random banks, 3-4 way: 8.4x of cuDNN fp32
// on the H100 against 3.3x). lut's narrow tiles share the right operands instead and read the table transposed
// (FastTable<true> below).
// pb * G is an integer sum: pb = sign * 2^(Eb - 127) has no mantissa bits, and byte << 16 puts M in the top of the
// mantissa and the carry c into the exponent: one IMAD, byte * 2^16 + pb. A zero right operand (pb = 0) reads
// column 128, a zero byte past each row's 128 (read only where the right operands hold zeros, whose lookups may then
// meet a word of the row's start: a 2-way conflict at worst), so pb * G is 0 and the FFMA adds pa * 0: the sum is
// unchanged, as the definition's zero product leaves it (a running sum starts at +0 and is never -0, so the zero's
// sign never shows). A zero left operand has pa = 0. Two planes a side: with a third for the zero case (the factor
// 2^16 or 0, read per k) the benchmark's 21 conv ops took 18.86 ms, with two 18.23 (H100, with the
// conflict-free staging, which moved am16 by 0.2 %). Packing pa and the offset into one word (masks
// per operand) read half the fragment words but added ALU work: lut 2.5 % slower, am16 0.3 %; not kept.
constexpr int kTableRows = 1 << kTableBits;                   // 128 rows and columns of the canonical table
constexpr uint32_t kZeroIndex = kTableRows;                   // the zero column (rows by Fa) or row (rows by Fb)

// kRowsByRight = false: rows by the left operand's field, each followed by the zero column and padded to whole words
// (132 bytes), for warps whose lanes share their left operands. true: the table transposed, rows by the right
// operand's field (128 bytes, the 128 left fields), and a zero row 128, for warps whose lanes share their right
// operands (lut's narrow tiles: gemm_cuda_kernel.cuh, table_by_right). There a zero is the left operand (activations
// after a ReLU, padding: half of them), so a zero column would sit in the bank of columns 0-3 and conflict with them;
// a zero right operand selects a whole row, which all the warp's lanes read: no conflict either way.
template <bool kRowsByRight>
struct FastTable {
  static constexpr int kPlanes = 2;
  static constexpr bool kRawIsPlane = false;
  static constexpr int kRowBytes = kRowsByRight ? kTableRows : (kTableRows + 1 + 3) / 4 * 4;
  static constexpr int kRows = kRowsByRight ? kTableRows + 1 : kTableRows;
  __device__ static bool exact(uint32_t u) { return in_fast_range(u); }
  __device__ static void decode(uint32_t u, bool left, uint32_t* w) {
    const uint32_t field = (u >> 16) & 0x7Fu;
    const uint32_t right = exponent_of(u) == 0u ? kZeroIndex : field;
    w[0] = power_of_two(u);
    if (kRowsByRight)
      w[1] = left ? field : right * kRowBytes;
    else
      w[1] = left ? field * kRowBytes : right;
  }
  __device__ static float madd(float acc, const uint32_t* a, const uint32_t* b, const char* table) {
    const uint32_t byte = *reinterpret_cast<const uint8_t*>(table + (a[1] + b[1]));
    return __fmaf_rn(__uint_as_float(a[0]), __uint_as_float(byte * 0x10000u + b[0]), acc);
  }
  // The block's copy in shared memory of the canonical table (table7: row Fa, column Fb), read 16 bytes at a time
  // where table7 is 16-byte aligned (the bindings' tables are; another alignment takes single bytes). Rows by Fa: a
  // lane stores its 16 bytes as four words, lanes 8 to a row (banks 4 * chunk + row: no conflict). Rows by Fb: byte by
  // byte into 16 rows, lanes on consecutive Fa so that a warp's bytes are consecutive. One byte a lane at a time, with
  // rows by Fb read down the canonical table's columns, staging cost a block of the 32/64/64 forward (lut, 256 x 64
  // tiles) 16,512 uncoalesced loads: ncu counted 55 % of its global sectors as excess.
  static constexpr int kTableBytes = kRows * kRowBytes;
  __device__ static void stage_table(const uint8_t* table7, char* table, int tid, int threads) {
    constexpr int kPieces = kTableRows * kTableRows / 16, kPiecesPerRow = kTableRows / 16;
    if (reinterpret_cast<uintptr_t>(table7) % 16 == 0) {
      for (int i = tid; i < kPieces; i += threads) {
        const int fa = kRowsByRight ? i % kTableRows : i / kPiecesPerRow;
        const int chunk = kRowsByRight ? i / kTableRows : i % kPiecesPerRow;
        const uint4 q = __ldg(reinterpret_cast<const uint4*>(table7) + fa * kPiecesPerRow + chunk);
        const uint32_t w[4] = {q.x, q.y, q.z, q.w};
        if constexpr (kRowsByRight) {
#pragma unroll
          for (int b = 0; b < 16; ++b)
            table[(16 * chunk + b) * kRowBytes + fa] = static_cast<char>(w[b / 4] >> (8 * (b % 4)));
        } else {
          uint32_t* const row = reinterpret_cast<uint32_t*>(table + fa * kRowBytes) + 4 * chunk;
#pragma unroll
          for (int v = 0; v < 4; ++v) row[v] = w[v];
        }
      }
    } else {
      for (int i = tid; i < kTableRows * kTableRows; i += threads) {
        const int fa = i / kTableRows, fb = i % kTableRows;
        table[kRowsByRight ? fb * kRowBytes + fa : fa * kRowBytes + fb] = static_cast<char>(table7[i]);
      }
    }
    // the zero column and padding (rows by Fa: bytes 128-131 of each row) or the zero row 128 (rows by Fb)
    constexpr int kZeroWords = kRowsByRight ? kRowBytes / 4 : kTableRows;
    for (int i = tid; i < kZeroWords; i += threads) {
      const int at = kRowsByRight ? kTableRows * kRowBytes + 4 * i : i * kRowBytes + kTableRows;
      *reinterpret_cast<uint32_t*>(table + at) = 0u;
    }
  }
};

template <>
struct Fast<Mode::kTable> : FastTable<false> {};

// The inner loop that reads every plane: madd of the mode.
template <class F>
struct AllPlanes {
  static constexpr int kLeftReads = F::kPlanes, kRightReads = F::kPlanes;
  __device__ static float madd(float acc, const uint32_t* a, const uint32_t* b, const char* table) {
    return F::madd(acc, a, b, table);
  }
};

// The inner loop of a k tile whose right operands hold no zero: F::NonzeroRight where a mode has a cheaper one (the
// kernel then also checks the staged right operands for zeros), else AllPlanes<F>.
template <class F, class = void>
struct NonzeroRightLoop {
  using type = AllPlanes<F>;
};
template <class F>
struct NonzeroRightLoop<F, std::void_t<typename F::NonzeroRight>> {
  using type = typename F::NonzeroRight;
};
template <class F>
constexpr bool kHasNonzeroRight = !std::is_same_v<typename NonzeroRightLoop<F>::type, AllPlanes<F>>;

// The fast formulas a kernel uses: Fast<M>, or for the table modes the table in the orientation its warps need.
template <Mode M, bool kTableByRight>
struct FastOf {
  using type = Fast<M>;
};
template <bool kTableByRight>
struct FastOf<Mode::kTable, kTableByRight> {
  using type = FastTable<kTableByRight>;
};

template <Mode M, class F>
constexpr int table_bytes() {
  if constexpr (M == Mode::kTable) return F::kTableBytes;
  return 0;
}

}  // namespace
}  // namespace gpu
}  // namespace amdnn

#endif  // AMDNN_OPS_CC_GEMM_CUDA_MODES_CUH_
