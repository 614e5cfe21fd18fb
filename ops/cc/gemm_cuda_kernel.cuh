// The CUDA GEMM kernel template and its launch, shared by the op files (gemm_cuda_conv.cu, gemm_cuda_input_grad.cu,
// gemm_cuda_filter_grad.cu: each instantiates its own loaders' kernels, so they compile in parallel): C[m, n] = sum
// over k of A[m, k] (*) B[k, n].
//
// Tiling (SGEMM style): a block computes a BM x BN tile of C, each thread an 8 x 8 register tile (lut: 16 x 4 or 4 x
// 16, 6 x 16 on 192 x 64; am16 on 128 x 128 tiles: 8 x 4; thread_cols), a warp's threads 4 x 8 of them (lut: 1 x 32 or
// 32 x 1); K advances by tile_k (8 or 16) per step. Operands are decoded once per tile element when the tile is staged
// in shared memory (gemm_cuda_modes.cuh), so the inner loop spends 2-8 instructions per product instead of the ~20 of
// the scalar definitions. Two shared buffers let a thread decode tile t + 1 and issue the loads of t + 2 while the
// block computes tile t, with one barrier per tile; operands read four floats at a time where their layout allows
// (measured in docs/performance.md, "What each change bought").
//
// Fast and generic paths: the fast formulas are exact only when no operand is inf/NaN and no product can over- or
// underflow. Every staged operand is checked (biased exponent 0 or in [64, 190], so any exponent sum is in
// [128, 380], as the CPU kernels require); the barrier that closes a tile ORs the checks of the next, and a tile with
// any operand outside runs the scalar definitions of multiplier.h on the raw values instead. Both paths add each
// product into the same running fp32 sum in k order, so they agree bit for bit, and a stray tiny gradient costs
// only its own tile. Mitchell's and am16's tiles are also checked for zeros among their right operands: without any,
// the fast path drops the right operand's zero mask (F::NonzeroRight: Mitchell 2 instructions a product instead of 3,
// am16 4, or 3 in a k step without a corner pair, instead of 5).
#ifndef AMDNN_OPS_CC_GEMM_CUDA_KERNEL_CUH_
#define AMDNN_OPS_CC_GEMM_CUDA_KERNEL_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <type_traits>

#include "conv_geometry.h"
#include "gemm_cuda.h"
#include "gemm_cuda_launch.cuh"
#include "gemm_cuda_loaders.cuh"
#include "gemm_cuda_modes.cuh"

namespace amdnn {
namespace gpu {
namespace {

// Tuning knobs, fixed at build time (ops/build/common.py adds AMDNN_NVCC_FLAGS to nvcc's flags; measured in
// docs/performance.md):
// AMDNN_GPU_BK forces one k tile on every mode, AMDNN_GPU_MIN_BLOCKS asks the compiler for that many blocks per SM.
#ifndef AMDNN_GPU_MIN_BLOCKS
#define AMDNN_GPU_MIN_BLOCKS 1
#endif

// k per staged tile. 16 halves the barriers and doubles the independent work between them: am16, lut, Mitchell
// (H100: am16 3.52x -> 3.39x of cuDNN, mit16 2.85x -> 2.62x) and acc32 (1.55x -> 1.51x; the same on the
// kernels before them), on tiles of 128 x 128 outputs (lut's narrow 256 x 64 too); am32 (three planes) spills at 16, as do
// the 128 x 64 tiles (128 threads, 16 staged elements each).
template <Mode M>
constexpr int tile_k(int bm, int bn) {
#ifdef AMDNN_GPU_BK
  return AMDNN_GPU_BK;
#else
  return bm * bn == 128 * 128 &&
                 (M == Mode::kAcc32 || M == Mode::kAm16 || M == Mode::kTable || M == Mode::kMit32 || M == Mode::kMit16)
             ? 16
             : 8;
#endif
}
constexpr int kSliceAlign = 16;  // split-K slices are whole tiles of every mode
constexpr int kPad = 4;          // shared rows padded by 4 floats: conflict-free stores, 16-byte aligned reads
constexpr int kThreadProducts = 64;  // the largest thread tile: 8 x 8, lut's 16 x 4 and 4 x 16 (am16's 8 x 4: 32)

// The thread tile: rows x columns of C per thread. lut's lookups are conflict-free only when the 32 lanes of a warp
// share their rows (their left operands: gemm_cuda_modes.cuh), so a warp spans the block's BN columns (16 x 4 or
// 32 x 2); the other modes take 8 x 8, the fewest fragment reads per product. am16 on 128 x 128 tiles takes 8 x 4:
// 512 threads of at most 128 registers (125, no spills), 4 warps per scheduler instead of 2, and its products
// (4 instructions, no lookup) issue at 74 % of the slots instead of 70 %: the 21 conv ops of the benchmark 17.55 ->
// 17.11 ms (H100, same bits). The narrow tiles keep 8 x 8: on 8 x 4 with k tiles of 16 (256 threads,
// two blocks per SM) they ran at the same speed (17.12 against 17.13 ms). The table modes at 8 x 4
// (am16's table, Mitchell) ran at the same speed as 8 x 8: the shared-memory pipe or the integer pipe
// bound them, not the warps.
// lut's narrow tiles (BN = 64) turn the warp the other way: 4 x 16 thread tiles, a warp's lanes one above the other
// sharing their columns (right operands), the table transposed (FastTable<true>), so that the fragment reads per
// lookup are those of the 128 x 128 tiles (24 wavefronts per 64 lookups, against 36 on 32 x 2 tiles); with m >= 16,384
// on 256 x 64 tiles with k tiles of 16 (launch). On its own this bought ~0.5 % of lut's 21 conv ops; with the table
// staged 16 bytes a lane and the outputs stored 16 bytes a lane (FastTable::stage_table, store_run) the ops went from
// 18.25 to 17.58 ms, the 32/64/64 forward 1.19 -> 1.05 ms (H100, same bits). Every lut kernel of 64
// columns takes this layout, the single-load 128 x 64 fallback of any n included (the same products, other warps).
template <Mode M, int BN>
constexpr bool table_by_right() {
  return M == Mode::kTable && BN == 64;
}
template <Mode M, int BN>
constexpr int thread_cols() {
  if constexpr (table_by_right<M, BN>()) return 16;
  return M == Mode::kTable ? BN / 32 : (M == Mode::kAm16 && BN == 128 ? 4 : 8);
}
// lut's tiles of 192 x 64 (lut_192_rows: m = 576, 3 row tiles where 128 rows take 4.5) take 6 x 16 thread tiles: a
// warp's 32 lanes one above the other span the 192 rows.
template <Mode M, int BM, int BN>
constexpr int thread_rows() {
  if constexpr (table_by_right<M, BN>() && BM == 192) return 6;
  return M == Mode::kTable ? kThreadProducts / thread_cols<M, BN>() : 8;
}

// How a warp's 32 lanes lie on the block's grid of thread tiles: lut's in one row (they share their rows), the other
// modes' in 4 rows of 8 columns, so that a warp's 16-byte fragment reads touch 4 distinct rows (64 bytes) and 8
// distinct columns (128 bytes): one shared-memory wavefront each, where 2 rows of 16 columns took 1 and 2. am16's
// 128 x 128 warps lie in one row too, 8 rows by 128 columns of pairs: a warp's k step skips the corner test when none
// of its pairs can be a corner (gemm_cuda_modes.cuh), which a step of 8 rows by 128 columns allows ~78 % of the time
// against ~60 % for 32 by 32 (estimated from 1 operand in 32 on each side with a field | 1 of 125 or 127); its right
// fragment reads take 4 wavefronts instead of 1, its left ones are broadcasts: the 21 conv ops 16.75 -> 16.49 ms (H100,
// same bits).
#ifndef AMDNN_GPU_WARP_COLS
#define AMDNN_GPU_WARP_COLS 8
#endif
template <Mode M, int BN>
constexpr int warp_cols() {
  if constexpr (table_by_right<M, BN>()) return 1;
  if constexpr (M == Mode::kTable || (M == Mode::kAm16 && BN == 128)) return 32;
  return std::min(BN / thread_cols<M, BN>(), AMDNN_GPU_WARP_COLS);
}

// Thread `tid`'s tile: column tx and row ty of the block's grid of thread tiles.
template <Mode M, int BN>
__device__ __forceinline__ void thread_tile(int tid, int& tx, int& ty) {
  constexpr int kCols = BN / thread_cols<M, BN>(), kWarpCols = warp_cols<M, BN>(), kWarpRows = 32 / kWarpCols;
  constexpr int kWarpsPerRow = kCols / kWarpCols;
  static_assert(kCols % kWarpCols == 0 && 32 % kWarpCols == 0, "warp layout");
  const int lane = tid % 32, warp = tid / 32;
  tx = (warp % kWarpsPerRow) * kWarpCols + lane % kWarpCols;
  ty = (warp / kWarpsPerRow) * kWarpRows + lane / kWarpCols;
}

// What the staging of a k tile found, ORed over the block at the barrier that closes the tile before it.
constexpr uint32_t kOutsideFlag = 1u;    // an operand outside the fast range: the generic path
constexpr uint32_t kZeroRightFlag = 2u;  // a zero right operand: not the NonzeroRight loop

// Path counters of this translation unit (without relocatable device code each .cu has its own module and its own
// copy; gemm_cuda.cu adds them up): [fast, generic] (block, k tile) steps.
__device__ unsigned long long g_path_counts[2];

// ------------------------------------------------------------------------------------------------ the kernel

// Where row r of C starts in the output: r * ldc for a dense C; the input gradient's phases map rows elsewhere.
struct DenseRows {
  int ldc;
  __device__ long long offset(int r) const { return static_cast<long long>(r) * ldc; }
};

template <class LoadA, class LoadB, class Rows = DenseRows>
struct GemmParams {
  LoadA a;
  LoadB b;
  int m, n, k;
  int k_per_split;      // blockIdx.z covers k in [z * k_per_split, min(k, (z + 1) * k_per_split))
  float* c;
  Rows rows;               // where C's rows go (unsplit launches)
  long long split_stride;  // elements between the partial results of consecutive splits (0: one split)
  const uint8_t* table7;   // device, kTable only
  Mode mode;               // the mode, read by the kernel of every mode (kAnyMode) only
};

// One operand's part of a k tile: which elements this thread stages and where they go. A thread stages kGroups groups
// of V elements (V = 4: one 16-byte load per group, where the operand's layout allows it; see vector_ok). Read along
// k, a group is V consecutive k of one outer index; the tile's rows hold kBK / V groups, a thread's k offset is the
// same in all its groups and its outer indices differ by kStride: kGroups outer infos and one cursor. Read along
// outer, a group is V consecutive outer indices at one k; a thread's outer offset is the same in all its groups and
// its k differ by kStride: one outer info and one cursor, stepped from group to group. Where element (g, v) lands in
// the shared tile ([k][outer], kLd words a row) is the thread's base offset plus a constant, so staging costs no
// address arithmetic.
// Read along outer, a tile row whose groups do not divide among the threads (lut's 192-row tiles: 48 groups, 128
// threads) is staged as kParts parts of equal width: a thread's groups of each part at the same outer offset.
constexpr int stage_parts(int bo, int v, int threads) {
  for (int p = 1; p <= 8; ++p)
    if (bo % p == 0 && (bo / p) % v == 0 && threads % ((bo / p) / v) == 0) return p;
  return 0;
}

template <int BO, int kThreads, int kBK, int V, class Loader>
struct Stage {
  static constexpr int kCount = BO * kBK / kThreads;  // elements a thread stages
  static constexpr int kGroups = kCount / V;
  static constexpr int kParts = Loader::kAlongK ? 1 : stage_parts(BO, V, kThreads);
  static constexpr int kPartWidth = BO / kParts;
  static constexpr int kGroupsPerPart = kGroups / kParts;
  static constexpr int kPerRow = Loader::kAlongK ? kBK / V : kPartWidth / V;  // groups along the contiguous index
  static constexpr int kOuters = Loader::kAlongK ? kGroups : kParts;
  static constexpr int kStride = kThreads / kPerRow;  // between a thread's groups: outer (read along k) or k
  static_assert(kParts > 0 && kGroups % kParts == 0, "parts");
  static_assert(kGroups * V * kThreads == BO * kBK, "tile not divisible among threads");
  static_assert(kThreads % kPerRow == 0, "thread mapping");
  // Read along k, a warp's lanes store column by column into rows kLd = 4 (mod 32) words apart: with four groups a
  // row (k tiles of 16), lanes whose k offsets differ by 8 (rows 8 x 4 words = 32 banks apart) meet in the same banks,
  // a 2-way conflict on every store (ncu, am16 forward on the H100: a third of the shared-store wavefronts). Those
  // lanes take outer indices 8 apart instead (an XOR inside each 16, so the thread's outer indices stay a permutation
  // of the tile's).
  static constexpr bool kSwizzle = Loader::kAlongK && V == 4 && kPerRow == 4;
  static_assert(!kSwizzle || kStride % 16 == 0, "swizzle stays inside the thread's stride");
  __device__ static int contiguous(int tid) { return (tid % kPerRow) * V; }  // k offset, or outer offset
  __device__ static int strided(int tid) {                                   // outer offset, or k offset
    return kSwizzle ? (tid / kPerRow) ^ (((tid % kPerRow) >> 1) << 3) : tid / kPerRow;
  }

  __device__ static void outers(const Loader& l, int origin, int tid, typename Loader::Outer* out) {
#pragma unroll
    for (int g = 0; g < kOuters; ++g)
      out[g] = l.outer(origin + (Loader::kAlongK ? strided(tid) + g * kStride : contiguous(tid) + g * kPartWidth));
  }

  __device__ static typename Loader::Cursor cursor(const Loader& l, int k0, int tid) {
    return l.cursor(k0 + (Loader::kAlongK ? contiguous(tid) : strided(tid)));
  }

  // Where this thread's first element lands in a shared tile with rows of kLd words.
  template <int kLd>
  __device__ static int base(int tid) {
    return Loader::kAlongK ? contiguous(tid) * kLd + strided(tid) : strided(tid) * kLd + contiguous(tid);
  }
  template <int kLd>
  __device__ static constexpr int offset(int g, int v) {
    return Loader::kAlongK ? v * kLd + g * kStride
                           : (g % kGroupsPerPart) * kStride * kLd + (g / kGroupsPerPart) * kPartWidth + v;
  }

  __device__ static void load_group(const Loader& l, const typename Loader::Outer& o, const typename Loader::Cursor& c,
                                    bool valid, uint32_t* out) {
    if constexpr (V == 4) {
      const uint4 q = valid ? l.load4(o, c) : make_uint4(0u, 0u, 0u, 0u);
      out[0] = q.x; out[1] = q.y; out[2] = q.z; out[3] = q.w;
    } else {
      out[0] = valid ? l.load(o, c) : 0u;
    }
  }

  // Loads this thread's elements of the tile at `c` (+0 at k >= k_end) and moves `c` to the next tile.
  __device__ static void fetch(const Loader& l, const typename Loader::Outer* outer, typename Loader::Cursor& c,
                               int k_end, uint32_t* out) {
    if constexpr (Loader::kAlongK) {
      const bool valid = c.k < k_end;  // V consecutive k: k_end is a multiple of V (vector_ok)
#pragma unroll
      for (int g = 0; g < kGroups; ++g) load_group(l, outer[g], c, valid, out + g * V);
    } else {
#pragma unroll
      for (int q = 0; q < kParts; ++q) {
        typename Loader::Cursor at = c;
#pragma unroll
        for (int j = 0; j < kGroupsPerPart; ++j) {
          load_group(l, outer[q], at, at.k < k_end, out + (q * kGroupsPerPart + j) * V);
          if (j + 1 < kGroupsPerPart) l.advance(at, kStride);
        }
      }
    }
    l.advance(c, kBK);
  }

  // Decodes this thread's elements into a shared buffer (raw bits and the mode's planes) at `at` (from base());
  // returns kOutsideFlag if any is outside the fast range, and kZeroRightFlag if this is the right operand of a mode
  // with a NonzeroRight loop and any is a zero (or subnormal: the zero of rule 2).
  template <class F, int kLd, bool kLeft>
  __device__ static uint32_t store(const uint32_t* in, uint32_t* raw, uint32_t* planes) {
    constexpr int kP = F::kPlanes;
    constexpr bool kZeros = !kLeft && kHasNonzeroRight<F>;
    bool outside = false, zero = false;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      uint32_t w[V][F::kPlanes];
#pragma unroll
      for (int v = 0; v < V; ++v) {
        F::decode(in[g * V + v], kLeft, w[v]);
        outside |= !F::exact(in[g * V + v]);
        if constexpr (kZeros) zero |= exponent_of(in[g * V + v]) == 0u;
      }
      if constexpr (V == 4 && !Loader::kAlongK) {  // four consecutive words of a row: one 16-byte store each
        const int at = offset<kLd>(g, 0);
        *reinterpret_cast<uint4*>(raw + at) = make_uint4(in[g * 4], in[g * 4 + 1], in[g * 4 + 2], in[g * 4 + 3]);
        if constexpr (!F::kRawIsPlane) {
#pragma unroll
          for (int q = 0; q < kP; ++q)
            *reinterpret_cast<uint4*>(planes + q * kBK * kLd + at) = make_uint4(w[0][q], w[1][q], w[2][q], w[3][q]);
        }
      } else {
#pragma unroll
        for (int v = 0; v < V; ++v) {
          const int at = offset<kLd>(g, v);
          raw[at] = in[g * V + v];
          if constexpr (!F::kRawIsPlane) {
#pragma unroll
            for (int q = 0; q < kP; ++q) planes[q * kBK * kLd + at] = w[v][q];
          }
        }
      }
    }
    return (outside ? kOutsideFlag : 0u) | (zero ? kZeroRightFlag : 0u);
  }
};

// A thread's kT rows (or columns) of its tile, in groups of V = four consecutive ones (two where kT is 6: lut's
// 192-row tiles, three 8-byte reads; one where kT is odd): group g at g * kSize / groups + V * t, so that the fragment
// reads of a warp's threads are contiguous in shared memory (8 at 8 * t would put lanes 32 bytes apart: 2-way
// conflicts).
template <int kT>
constexpr int fragment_vector() {
  return kT % 4 == 0 ? 4 : (kT % 2 == 0 ? 2 : 1);
}

template <int kSize, int kT>
constexpr int fragment_group_stride() {
  return kSize / (kT / fragment_vector<kT>());
}

// Element i of thread t's fragment, for groups `group_stride` apart (a run-time stride for generic_products).
template <int kT>
__device__ __forceinline__ int fragment_offset(int t, int i, int group_stride) {
  constexpr int kVec = fragment_vector<kT>();
  return (i / kVec) * group_stride + kVec * t + i % kVec;
}

template <int kSize, int kT>
__device__ __forceinline__ int fragment_index(int t, int i) {
  return fragment_offset<kT>(t, i, fragment_group_stride<kSize, kT>());
}

template <int kSize, int kT>
__device__ __forceinline__ void read_fragment(const uint32_t* row, int t, uint32_t* out) {
  constexpr int kVec = fragment_vector<kT>(), kGroupStride = fragment_group_stride<kSize, kT>();
#pragma unroll
  for (int g = 0; g < kT / kVec; ++g) {
    const uint32_t* at = row + g * kGroupStride + kVec * t;
    if constexpr (kVec == 4) {
      const uint4 q = *reinterpret_cast<const uint4*>(at);
      out[4 * g] = q.x; out[4 * g + 1] = q.y; out[4 * g + 2] = q.z; out[4 * g + 3] = q.w;
    } else if constexpr (kVec == 2) {
      const uint2 q = *reinterpret_cast<const uint2*>(at);
      out[2 * g] = q.x; out[2 * g + 1] = q.y;
    } else {
      out[g] = at[0];
    }
  }
}

// Stores a thread's kVec consecutive outputs of one row (at most `left` of them inside C): one 16- or 8-byte store
// where the address allows it (a row of C a multiple of kVec floats: every conv of the benchmark), else one by one.
// With one 4-byte store an output, a warp of lut's narrow tiles (lanes one above the other) wrote 32 rows per store:
// ncu counted its epilogue's sectors beside the table staging's as the 55 % excess of the 32/64/64 forward.
template <int kVec>
__device__ __forceinline__ void store_run(float* at, int left, const float* v) {
  if constexpr (kVec == 4) {
    if (left >= 4 && reinterpret_cast<uintptr_t>(at) % 16 == 0) {
      *reinterpret_cast<float4*>(at) = make_float4(v[0], v[1], v[2], v[3]);
      return;
    }
  } else if constexpr (kVec == 2) {
    if (left >= 2 && reinterpret_cast<uintptr_t>(at) % 8 == 0) {
      *reinterpret_cast<float2*>(at) = make_float2(v[0], v[1]);
      return;
    }
  }
#pragma unroll
  for (int e = 0; e < kVec; ++e)
    if (e < left) at[e] = v[e];
}

// The generic path's products of one k step, products[i * kTN + j] = product<M>(a_i, b_j) for the thread's kTM rows of
// A's row `a` and kTN columns of B's row `b` (a_groups, b_groups: fragment_group_stride's). One non-inlined
// function per mode and thread tile: the scalar definitions are long (am32's ~100 instructions), and inlining them
// 64 times into every kernel variant doubled the library's build time (docs/performance.md, "Build time").
template <Mode M, int kTM, int kTN>
__device__ __noinline__ void generic_products(const uint32_t* a, const uint32_t* b, int a_groups, int b_groups, int ty,
                                              int tx, const uint8_t* table7, float* products) {
#pragma unroll 1
  for (int i = 0; i < kTM; ++i) {
    const float ai = __uint_as_float(a[fragment_offset<kTM>(ty, i, a_groups)]);
#pragma unroll 1
    for (int j = 0; j < kTN; ++j)
      products[i * kTN + j] = product<M>(ai, __uint_as_float(b[fragment_offset<kTN>(tx, j, b_groups)]), table7);
  }
}

// The kernel of every mode: gemm_kernel<kAnyMode, ...> reads the mode from its parameters and runs every tile on the
// generic path (Fast<kAnyMode> has no fast range), through the generic products of that mode. The same running sums
// in k order as the kernels of one mode, so the same bits; one instantiation serves the eight modes of a GEMM that
// is rare enough not to need the fast formulas (launch, kFastSingleLoad).
constexpr Mode kAnyMode = Mode::kAnyMode;

template <int kTM, int kTN>
__device__ __noinline__ void generic_products_of(Mode mode, const uint32_t* a, const uint32_t* b, int a_groups,
                                                 int b_groups, int ty, int tx, const uint8_t* table7,
                                                 float* products) {
  switch (mode) {
#define AMDNN_GENERIC_PRODUCTS(id, name, fn)                                                             \
  case Mode::id:                                                                                         \
    generic_products<Mode::id, kTM, kTN>(a, b, a_groups, b_groups, ty, tx, table7, products);            \
    break;
    AMDNN_MODES(AMDNN_GENERIC_PRODUCTS)
#undef AMDNN_GENERIC_PRODUCTS
    case kAnyMode:
      break;
  }
}

// A loop with a cheaper product where no pair of a k step is in a corner of the mode's formula (am16's NonzeroRight:
// gemm_cuda_modes.cuh) splits each k step on a warp vote: the vote's cost (the ORs of the fragments' flags,
// ~9 instructions a thread) against one instruction a product saved, 32 a step on the 8 x 4 thread tiles, where ~78 %
// of a warp's steps have no corner (warp_cols). On 8 x 8 thread tiles (the narrow 128 x 64 kernels: 64 products a step,
// ~45 % of the steps without a corner, and twice the code) the split made the first stage's ops 14-18 % slower (H100):
// they keep the one loop.
template <class Inner, class = void>
constexpr bool kHasCornerSplit = false;
template <class Inner>
constexpr bool kHasCornerSplit<Inner, std::void_t<decltype(&Inner::madd_no_corner)>> = true;

// The fast path's products of one k tile: Inner (AllPlanes<F> or NonzeroRightLoop<F>) reads its planes of the thread's
// fragments at each k and adds each product into its running sum.
template <class Inner, int BM, int BN, int kBK, int kTM, int kTN, int kLdA, int kLdB>
__device__ __forceinline__ void fast_tile(const uint32_t* da, const uint32_t* db, int ty, int tx, const char* table,
                                          float (&acc)[kTM][kTN]) {
  constexpr bool kCornerSplit = kHasCornerSplit<Inner> && kTM * kTN == 32;
#pragma unroll
  for (int kk = 0; kk < kBK; ++kk) {
    uint32_t a[Inner::kLeftReads][kTM], b[Inner::kRightReads][kTN];
#pragma unroll
    for (int q = 0; q < Inner::kLeftReads; ++q) read_fragment<BM, kTM>(da + (q * kBK + kk) * kLdA, ty, a[q]);
#pragma unroll
    for (int q = 0; q < Inner::kRightReads; ++q) read_fragment<BN, kTN>(db + (q * kBK + kk) * kLdB, tx, b[q]);
    auto products = [&](auto madd) {
#pragma unroll
      for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) {
          uint32_t ai[Inner::kLeftReads], bj[Inner::kRightReads];
#pragma unroll
          for (int q = 0; q < Inner::kLeftReads; ++q) ai[q] = a[q][i];
#pragma unroll
          for (int q = 0; q < Inner::kRightReads; ++q) bj[q] = b[q][j];
          acc[i][j] = madd(acc[i][j], ai, bj, table);
        }
    };
    if constexpr (kCornerSplit) {
      // every thread of the block runs the fast path of the same tiles, so the whole warp is here
      if (__any_sync(0xFFFFFFFFu, Inner::corner_possible(a, b)))
        products(Inner::madd);
      else
        products(Inner::madd_no_corner);
    } else {
      products(Inner::madd);
    }
  }
}

// Tiles of padding: k runs in groups of group_k() (a tap's channels in the forward and the input gradient, whose rows
// lie pixel-major; a pixel's images in the filter gradient, whose k does: gemm_cuda_loaders.cuh), and a left operand
// that skips padding says from the geometry alone which groups (bit g: group g < 32) read only padding for every row of
// the block. A k tile within such a group is +0 in every row, so on the fast path (every operand finite: no 0 x inf)
// each of its products is a zero, and adding it leaves the running sum as it is (a sum starts at +0 and is never -0,
// so a zero of either sign leaves it): the block skips the tile's products, the same bits. Tiles with an inf or NaN
// take the generic path and keep 0 x inf = NaN. Other loaders never skip, and their kernels hold none of this. Two
// registers through the k loop (a tap cursor and the pixels' span took nine and made am16's 128 x 128 kernel spill at
// its 128; H100): the groups' bits, shifted as k passes each group, and the k within the group.
template <class L, class = void>
constexpr bool kSkipsPadding = false;
template <class L>
constexpr bool kSkipsPadding<L, std::void_t<decltype(&L::padding_groups)>> = true;

template <class L, bool = kSkipsPadding<L>>
struct PaddingTiles {
  __device__ PaddingTiles(const L&, int, int, int) {}
  __device__ bool next(const L&, int) { return false; }
};
template <class L>
struct PaddingTiles<L, true> {
  uint32_t groups;  // bit 0: the group of the next tile
  int within;       // the next tile's first k within its group
  __device__ PaddingTiles(const L& l, int row0, int rows, int k_begin) {
    const int group = k_begin / l.group_k();
    groups = group < 32 ? l.padding_groups(row0, rows) >> group : 0u;
    within = k_begin - group * l.group_k();
  }
  // Whether the next k tile lies in one group that is padding in every row of the block; moves on to the tile after.
  __device__ bool next(const L& l, int k_tile) {
    const bool padding = (groups & 1u) && within + k_tile <= l.group_k();
    within += k_tile;
    while (within >= l.group_k()) {
      within -= l.group_k();
      groups >>= 1;
    }
    return padding;
  }
};

// Loaders whose k lies pixel-major (the filter gradient's, gemm_cuda_loaders.cuh): their k order is the sums' order, so
// where the skipping kernel cannot run (operands not 16-byte aligned) the single-load kernel reads them the same way.
template <class L, class = void>
constexpr bool kPixelMajorK = false;
template <class L>
constexpr bool kPixelMajorK<L, std::void_t<decltype(L::kPixelMajorK)>> = L::kPixelMajorK;

// The block's OR of the threads' flags of the next tile, at the barrier that closes this one: the barrier's own OR
// for the range check; a mode with a NonzeroRight loop asks for the zero flag with a second barrier only when the
// first found a flag (the same answer in every thread, so all take it), one barrier per tile in the common case.
template <bool kTwoFlags>
__device__ __forceinline__ uint32_t block_flags(uint32_t flags) {
  if (!__syncthreads_or(flags)) return 0u;
  if constexpr (!kTwoFlags) return kOutsideFlag;
  return (__syncthreads_or(flags & kOutsideFlag) ? kOutsideFlag : 0u) | kZeroRightFlag;
}

// Words of one shared buffer: raw A and B tiles, then the decoded planes (none where the raw bits are the plane).
template <Mode M>
constexpr int buffer_words(int bm, int bn) {
  constexpr bool kRaw = Fast<M>::kRawIsPlane;
  return tile_k<M>(bm, bn) * ((1 + (kRaw ? 0 : Fast<M>::kPlanes)) * (bm + kPad) +
                          (1 + (kRaw ? 0 : Fast<M>::kPlanes)) * (bn + kPad));
}

// Software pipeline, one barrier per k tile: shared memory holds two buffers. While the block computes tile t from
// buffer t % 2, each thread decodes tile t + 1 (loaded into registers during tile t - 1) into the other buffer and
// issues the global loads of tile t + 2; the barrier that closes tile t also ORs the threads' range checks of
// tile t + 1, which decides its path.
template <Mode M, int BM, int BN>
constexpr int block_threads() {
  return (BM / thread_rows<M, BM, BN>()) * (BN / thread_cols<M, BN>());
}

template <Mode M, int BM, int BN, int V, class LoadA, class LoadB, class Rows>
__global__ void __launch_bounds__(block_threads<M, BM, BN>(), AMDNN_GPU_MIN_BLOCKS)
    gemm_kernel(const GemmParams<LoadA, LoadB, Rows> p) {
  wait_for_prior_kernel();  // gemm_cuda_launch.cuh: nothing of global memory is touched before it
  using F = typename FastOf<M, table_by_right<M, BN>()>::type;
  constexpr int kTN = thread_cols<M, BN>(), kTM = thread_rows<M, BM, BN>();
  constexpr int kThreads = block_threads<M, BM, BN>();
  constexpr int kBK = tile_k<M>(BM, BN);
  constexpr int kLdA = BM + kPad, kLdB = BN + kPad;
  constexpr int kBufferWords = buffer_words<M>(BM, BN);
  using StageA = Stage<BM, kThreads, kBK, V, LoadA>;
  using StageB = Stage<BN, kThreads, kBK, V, LoadB>;

  extern __shared__ __align__(16) unsigned char smem[];
  // two buffers of [raw A][raw B][A planes][B planes], then the table
  uint32_t* const buffers = reinterpret_cast<uint32_t*>(smem);
  char* table = reinterpret_cast<char*>(buffers + 2 * kBufferWords);
  auto raw_a = [&](int s) { return buffers + s * kBufferWords; };
  auto raw_b = [&](int s) { return raw_a(s) + kBK * kLdA; };
  auto dec_a = [&](int s) { return F::kRawIsPlane ? raw_a(s) : raw_b(s) + kBK * kLdB; };
  auto dec_b = [&](int s) { return F::kRawIsPlane ? raw_b(s) : dec_a(s) + F::kPlanes * kBK * kLdA; };

  const int tid = threadIdx.x;
  int tx, ty;
  thread_tile<M, BN>(tid, tx, ty);
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  const int k_begin = blockIdx.z * p.k_per_split;
  const int k_end = min(p.k, k_begin + p.k_per_split);
  const int tiles = k_begin < k_end ? (k_end - k_begin + kBK - 1) / kBK : 0;


  typename LoadA::Outer a_outer[StageA::kOuters];
  typename LoadB::Outer b_outer[StageB::kOuters];
  StageA::outers(p.a, row0, tid, a_outer);
  StageB::outers(p.b, col0, tid, b_outer);
  typename LoadA::Cursor a_cursor = StageA::cursor(p.a, k_begin, tid);
  typename LoadB::Cursor b_cursor = StageB::cursor(p.b, k_begin, tid);
  uint32_t next_a[StageA::kCount], next_b[StageB::kCount];
  auto fetch = [&] {
    StageA::fetch(p.a, a_outer, a_cursor, k_end, next_a);
    StageB::fetch(p.b, b_outer, b_cursor, k_end, next_b);
  };
  const int at_a = StageA::template base<kLdA>(tid), at_b = StageB::template base<kLdB>(tid);
  auto stage = [&](int s) {
    return StageA::template store<F, kLdA, true>(next_a, raw_a(s) + at_a, dec_a(s) + at_a) |
           StageB::template store<F, kLdB, false>(next_b, raw_b(s) + at_b, dec_b(s) + at_b);
  };

  float acc[kTM][kTN];
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int j = 0; j < kTN; ++j) acc[i][j] = 0.0f;

  constexpr bool kNonzeroRight = kHasNonzeroRight<F>;
  unsigned fast_steps = 0, generic_steps = 0;
  uint32_t flags = 0;
  // lut stages its table while the loads of tile 0 are in flight: its 21 conv ops 17.53 -> 17.46 ms (H100,
  // same bits; blocks of short k, as the split filter gradients', gain most)
  if (tiles > 0) fetch();
  if constexpr (M == Mode::kTable) F::stage_table(p.table7, table, tid, kThreads);
  if (tiles > 0) {
    flags = stage(0);
    if (tiles > 1) fetch();
  }
  uint32_t tile_flags = block_flags<kNonzeroRight>(flags);  // also publishes the table
  PaddingTiles<LoadA> padding_tiles(p.a, row0, BM, k_begin);
  for (int t = 0; t < tiles; ++t) {
    const int s = t & 1;
    flags = 0;
    if (t + 1 < tiles) {
      flags = stage(s ^ 1);
      if (t + 2 < tiles) fetch();  // global loads in flight while this tile computes
    }
    const bool padding = padding_tiles.next(p.a, kBK);
    if (!(tile_flags & kOutsideFlag)) {
      ++fast_steps;
      if (padding) {
        // every product a zero: nothing to add
      } else if (kNonzeroRight && !(tile_flags & kZeroRightFlag)) {
        fast_tile<typename NonzeroRightLoop<F>::type, BM, BN, kBK, kTM, kTN, kLdA, kLdB>(dec_a(s), dec_b(s), ty, tx,
                                                                                          table, acc);
      } else {
        fast_tile<AllPlanes<F>, BM, BN, kBK, kTM, kTN, kLdA, kLdB>(dec_a(s), dec_b(s), ty, tx, table, acc);
      }
    } else {
      ++generic_steps;
      const uint32_t* const ra = raw_a(s);
      const uint32_t* const rb = raw_b(s);
      for (int kk = 0; kk < kBK; ++kk) {
        float products[kTM * kTN];
        if constexpr (M == kAnyMode)
          generic_products_of<kTM, kTN>(p.mode, ra + kk * kLdA, rb + kk * kLdB, fragment_group_stride<BM, kTM>(),
                                        fragment_group_stride<BN, kTN>(), ty, tx, p.table7, products);
        else
          generic_products<M, kTM, kTN>(ra + kk * kLdA, rb + kk * kLdB, fragment_group_stride<BM, kTM>(),
                                        fragment_group_stride<BN, kTN>(), ty, tx, p.table7, products);
#pragma unroll
        for (int i = 0; i < kTM; ++i)
#pragma unroll
          for (int j = 0; j < kTN; ++j) acc[i][j] = add_keeping_nan(acc[i][j], products[i * kTN + j]);
      }
    }
    tile_flags = block_flags<kNonzeroRight>(flags);
  }

  allow_next_kernel();  // gemm_cuda_launch.cuh: the next kernel is placed once every block is at its stores
  float* c = p.c + blockIdx.z * p.split_stride;
#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    const int r = row0 + fragment_index<BM, kTM>(ty, i);
    if (r >= p.m) continue;
    // split partial results are dense [m, n] slices of the workspace
    const long long row_start = p.split_stride ? static_cast<long long>(r) * p.n : p.rows.offset(r);
    // Wide stores where a warp's lanes do not lie in one row of thread tiles. In one row (am16's and lut's 128 x 128
    // warps) a 4-byte store of the warp writes 128 bytes of one row already, and am16's 16-byte stores cost its
    // 128 x 128 ops ~1 % (128 registers against 125; H100).
    constexpr int kRun = warp_cols<M, BN>() == 32 ? 1 : fragment_vector<kTN>();
#pragma unroll
    for (int g = 0; g < kTN; g += kRun) {
      const int col = col0 + fragment_index<BN, kTN>(tx, g);
      store_run<kRun>(c + row_start + col, p.n - col, &acc[i][g]);
    }
  }
  if (tid == 0) {  // one atomic per block: the counters cost nothing measurable
    if (fast_steps) atomicAdd(&g_path_counts[0], static_cast<unsigned long long>(fast_steps));
    if (generic_steps) atomicAdd(&g_path_counts[1], static_cast<unsigned long long>(generic_steps));
  }
}

// Adds the splits' partial results in split order: c[r, col] = ((p0 + p1) + p2) + ...
template <class Rows>
__global__ void sum_splits(const float* partial, int splits, long long stride, int m, int n, float* c, Rows rows) {
  wait_for_prior_kernel();
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<long long>(m) * n) return;
  float s = partial[i];
  for (int z = 1; z < splits; ++z) s = add_keeping_nan(s, partial[z * stride + i]);
  c[rows.offset(static_cast<int>(i / n)) + i % n] = s;
  allow_next_kernel();
}

// ------------------------------------------------------------------------------------------------ launching

// How K is cut: a function of the shapes only, so the bits never depend on the GPU. A grid of ~2 waves or more
// (256 tiles) is not cut. A smaller one is cut into the number of slices that minimises an estimate of its time on an
// H100 (132 SMs; a 256-thread block per SM, or two of 128): whole waves times a block's k plus its start and end,
// plus the pass that adds the slices. Slices of at least 128 k: a GEMM with k < 256 is one running sum in k order.
// Against the rule before it (slices for ~512 blocks, at least 256 k each): fewer, longer blocks where a
// wave is as full (the 8x8 256 -> 256 forward conv at batch 128: 1 slice, 128 blocks, against 4 and 512), and
// waves filled where 512 blocks left the last one a tenth full (its filter gradient: 11 slices, 396 blocks, against
// 15 and 540); measured in docs/performance.md.
constexpr int kUnsplitTiles = 256;  // ~2 waves of an H100's 132 SMs
constexpr int kMaxBlocks = 1024;   // ~8 waves: more slices only add to the pass that sums them
constexpr int kSmCount = 132;      // the estimate's GPU (an H100); other GPUs run the same slices
constexpr int kMinSliceK = 128;
constexpr int kBlockStartK = 8;    // a block's start and end, ~3 us: 8 k of a 16,384-output block's time (am16)
constexpr double kSumCostPerElement = 4.4e-6;  // the sum pass per output element and slice (4 bytes at ~2.5 TB/s)

struct Split {
  int splits = 1;
  int k_per_split = 0;
};

// k cut into `wanted` slices of whole k tiles of every mode: the slices that result (rounding may leave fewer).
Split slices(int64_t k, int64_t wanted) {
  int64_t per = (k + wanted - 1) / wanted;
  per = std::max<int64_t>(kSliceAlign, (per + kSliceAlign - 1) / kSliceAlign * kSliceAlign);
  Split s;
  s.k_per_split = static_cast<int>(per);
  s.splits = static_cast<int>(std::max<int64_t>(1, (k + per - 1) / per));
  return s;
}

// The estimate, in units of a 16,384-output block's time per k.
double split_cost(int64_t tiles, int64_t m, int64_t n, const Split& s, int blocks_per_sm) {
  const int64_t slots = int64_t{kSmCount} * blocks_per_sm;
  const int64_t waves = (tiles * s.splits + slots - 1) / slots;
  double cost = static_cast<double>(waves) * (s.k_per_split + kBlockStartK);
  if (s.splits > 1) cost += kBlockStartK + kSumCostPerElement * static_cast<double>(s.splits + 1) * m * n;
  return cost;
}

template <int BM, int BN, int kBlocksPerSm = 128 * 128 / (BM * BN)>  // by default equal shares of an SM's outputs
Split split_for(int64_t m, int64_t n, int64_t k) {
  const int64_t tiles = ((m + BM - 1) / BM) * ((n + BN - 1) / BN);
  Split best = slices(k, 1);
  if (tiles > 0 && tiles < kUnsplitTiles) {  // no tiles: an empty output, nothing to launch
    const int64_t most = std::min(k / kMinSliceK, (kMaxBlocks + tiles - 1) / tiles);
    double best_cost = split_cost(tiles, m, n, best, kBlocksPerSm);
    for (int64_t wanted = 2; wanted <= most; ++wanted) {
      const Split s = slices(k, wanted);
      const double cost = split_cost(tiles, m, n, s, kBlocksPerSm);
      if (cost < best_cost) {
        best_cost = cost;
        best = s;
      }
    }
  }
  return best;
}

// Narrow outputs (n <= 64: the first ResNet stage, most matmuls of small layers) use 128 x 64 tiles; lut's and am16's,
// where m fills 256-row tiles (kTallRows), 256 x 64 tiles with k tiles of 16, as many products a block and a k tile
// as the 128 x 128 tiles (am16 on 8 x 8 thread tiles, 250 registers: the 32/64/64 forward 1.05 -> 1.01 ms, its
// input gradient 1.10 -> 1.08, am16's 21 conv ops 16.51 -> 16.40; H100, same bits). The k slices stay
// those of the nominal 128 x 64 tile. (mit16 lost 2-9 % on 256 x 64 tiles.)
bool narrow(int64_t n) { return n <= 64; }
constexpr int64_t kTallRows = 16384;

// lut's GEMMs of m a multiple of 192 but not of 128 (m = 576: the first two stages' filter gradients of 3 x 3 x 64
// taps, 64 and 128 output channels) on 192 x 64 tiles: 3 row tiles where 128 rows take 4.5, two 128-thread blocks an
// SM (H100, ops alone: 1.274 -> 1.040 ms with 64 output channels, 0.557 -> 0.538 with 128 on 128 x 128).
// Products a second there: 4.65 T and 4.49 T on 192 x 64 tiles, against 3.79 T (4.21 T for full row tiles) on
// 128 x 64 and 4.34 T (4.82 T full) on 128 x 128. So narrow outputs take them at every such m; wider ones only where
// 128-row tiles leave more than 7 % of their rows empty (4.49 / 4.82): m = 576 (10 %), not 960 (6 %).
constexpr int64_t kLut192WideRows = 768;
bool lut_192_rows(Mode mode, int64_t m, int64_t n) {
  return mode == Mode::kTable && m < kTallRows && m % 192 == 0 && m % 128 != 0 && (narrow(n) || m < kLut192WideRows);
}

// The k slices of a GEMM, from its shapes alone by the nominal tile (128 x 64 for narrow outputs, else 128 x 128; lut's
// 192 x 64 where lut_192_rows), whichever kernel runs it: the bits never depend on the operands' alignment.
Split nominal_split(Mode mode, int64_t m, int64_t n, int64_t k) {
  if (lut_192_rows(mode, m, n)) return split_for<192, 64, 2>(m, n, k);
  return narrow(n) ? split_for<128, 64>(m, n, k) : split_for<128, 128>(m, n, k);
}

constexpr size_t aligned256(size_t bytes) { return (bytes + 255) / 256 * 256; }  // workspace parts' starts

size_t workspace_for(int64_t m, int64_t n, int64_t k) {  // for any mode: lut's slices differ where lut_192_rows
  int splits = nominal_split(Mode::kAcc32, m, n, k).splits;
  if (lut_192_rows(Mode::kTable, m, n)) splits = std::max(splits, nominal_split(Mode::kTable, m, n, k).splits);
  return splits > 1 ? static_cast<size_t>(splits) * m * n * sizeof(float) : 0;
}

template <Mode M, int BM, int BN, int V, class LoadA, class LoadB, class Rows>
LaunchStatus launch_mode(const GemmParams<LoadA, LoadB, Rows>& base, int64_t m, int64_t n, int64_t k, const Split& s,
                         float* c, void* workspace, cudaStream_t stream) {
  constexpr int kThreads = block_threads<M, BM, BN>();
  using F = typename FastOf<M, table_by_right<M, BN>()>::type;
  const size_t smem = static_cast<size_t>(2 * buffer_words<M>(BM, BN)) * 4 + table_bytes<M, F>();  // buffers, table
  static std::once_flag configured;
  static cudaError_t configure_status = cudaSuccess;
  std::call_once(configured, [&] {
    configure_status = cudaFuncSetAttribute(gemm_kernel<M, BM, BN, V, LoadA, LoadB, Rows>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  });
  if (configure_status != cudaSuccess) return {false, cudaGetErrorString(configure_status)};

  GemmParams<LoadA, LoadB, Rows> p = base;
  p.m = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.k = static_cast<int>(k);
  p.k_per_split = s.k_per_split;
  if (s.splits > 1) {
    if (workspace == nullptr) return {false, "a split GEMM was given no workspace"};
    p.c = static_cast<float*>(workspace);
    p.split_stride = m * n;
  } else {
    p.c = c;
    p.split_stride = 0;
  }
  const dim3 grid(static_cast<unsigned>((n + BN - 1) / BN), static_cast<unsigned>((m + BM - 1) / BM),
                  static_cast<unsigned>(s.splits));
  const LaunchStatus launched =
      launch_kernel(true, gemm_kernel<M, BM, BN, V, LoadA, LoadB, Rows>, grid, dim3(kThreads), smem, stream, p);
  if (!launched.ok || s.splits == 1) return launched;
  const int64_t total = m * n;
  return launch_kernel(true, sum_splits<Rows>, dim3(static_cast<unsigned>((total + 255) / 256)), dim3(256), 0, stream,
                       static_cast<const float*>(workspace), s.splits, m * n, static_cast<int>(m), static_cast<int>(n),
                       c, p.rows);
}

template <int BM, int BN, int V, class LoadA, class LoadB, class Rows>
LaunchStatus launch_tiles(Mode mode, const GemmParams<LoadA, LoadB, Rows>& p, int64_t m, int64_t n, int64_t k,
                          const Split& s, float* c, void* workspace, cudaStream_t stream) {
  return dispatch_mode(
      mode,
      [&](auto tag) { return launch_mode<decltype(tag)::value, BM, BN, V>(p, m, n, k, s, c, workspace, stream); },
      [] { return LaunchStatus{false, "unknown multiplier mode"}; });
}

// Operands that cannot be read four floats at a time take the 128 x 64 kernel with single loads. Those that training
// meets every step keep one such kernel a mode, with the fast formulas: the forward and the filter gradient of a
// conv whose input channels are not a multiple of 4 (a CIFAR ResNet's stem, 3 channels; LeNet's convs); the forward's
// also serve the GEMMs that run as forward convs (the stride-1 input gradient, matmul: a classifier's 10 outputs).
// The other misaligned GEMMs (strided input gradients of such channel counts, which a stem does not need;
// pixel-major filter gradients of misaligned tensors) and the dilated convs' input gradients (DyGather, every
// alignment) run the kernel of every mode (kAnyMode, the generic path): one instantiation a loader pair instead of
// eight, for the build's time.
template <class LoadA, class LoadB>
constexpr bool kFastSingleLoad =
    (std::is_same_v<LoadA, Im2Col> || std::is_same_v<LoadA, Im2ColTransposed>) && std::is_same_v<LoadB, DenseAlongOuter>;
template <class LoadA>
constexpr bool kAnyModeOnly = std::is_same_v<LoadA, DyGather>;

// lut's 192 x 64 tiles (lut_192_rows) pay at m = 576, the filter gradients of 3 x 3 x 64 taps (Im2ColTransposed);
// where m is batch x pixels, m % 128 != 0 takes a batch not a multiple of 8, and a matmul's m is rarely 576. lut's
// and am16's 256 x 64 tiles (kTallRows) pay where m >= 16,384 rows meet narrow outputs: the first stage's forward
// and input gradients; a filter gradient's m (its taps) reaches 16,384 only past 1,820 input channels (3 x 3). (A
// matmul's rarely does either; it keeps the 256 x 64 tiles, through which the device suite checks their ragged last
// row tile.) The other GEMMs take the 128 x 64 tiles there: the same bits (the slices are nominal_split's either
// way), one to three instantiations fewer; ptxas spent 2 s of the matmul source's 40 s (sm_90) on lut's 192 x 64.
template <class LoadA>
constexpr bool kLut192Tiles = std::is_same_v<LoadA, Im2ColTransposed>;
template <class LoadA>
constexpr bool kTallTiles = !std::is_same_v<LoadA, Im2ColTransposed>;

template <class LoadA, class LoadB, class Rows>
LaunchStatus launch_single_load(Mode mode, const GemmParams<LoadA, LoadB, Rows>& p, int64_t m, int64_t n, int64_t k,
                                const Split& s, float* c, void* workspace, cudaStream_t stream) {
  if constexpr (kFastSingleLoad<LoadA, LoadB>)
    return launch_tiles<128, 64, 1>(mode, p, m, n, k, s, c, workspace, stream);
  else
    return launch_mode<kAnyMode, 128, 64, 1>(p, m, n, k, s, c, workspace, stream);
}

// C [m, n] = A (*) B with rows of C placed by `rows` (dense [m, n] by default). k == 0 writes zeros (dense C only).
// The k slices are nominal_split's unless given (pixel-major rows: gemm_cuda_padding.cuh).
template <class LoadA, class LoadB, class Rows = DenseRows>
LaunchStatus launch(const GpuMultiplier& mult, LoadA a, LoadB b, int64_t m, int64_t n, int64_t k, float* c,
                    void* workspace, cudaStream_t stream, Rows rows = Rows{-1}, const Split* split = nullptr) {
  if (m == 0 || n == 0) return {};
  if (k == 0) {
    const cudaError_t status = cudaMemsetAsync(c, 0, static_cast<size_t>(m * n) * sizeof(float), stream);
    return status == cudaSuccess ? LaunchStatus{} : LaunchStatus{false, cudaGetErrorString(status)};
  }
  if (m * n > kMaxElements || m * k > kMaxElements || k * n > kMaxElements)
    return {false, "a GEMM operand or result has 2^31 elements or more (the CUDA kernels index with 32 bits)"};
  if (mult.mode == Mode::kTable && mult.table7 == nullptr) return {false, "the table multiplier needs its table"};
  GemmParams<LoadA, LoadB, Rows> p{};
  p.a = a;
  p.b = b;
  p.table7 = mult.table7;
  p.mode = mult.mode;
  if constexpr (std::is_same_v<Rows, DenseRows>) {
    if (rows.ldc < 0) rows.ldc = static_cast<int>(n);
  }
  p.rows = rows;
  // Operands that can be read four floats at a time (every ResNet layer but the first) take the kernels with 16-byte
  // loads; the rest, the 128 x 64 kernel with single loads (launch_single_load).
  const Split s = split != nullptr ? *split : nominal_split(mult.mode, m, n, k);
  if constexpr (kAnyModeOnly<LoadA>) {
    return launch_mode<kAnyMode, 128, 64, 1>(p, m, n, k, s, c, workspace, stream);
  } else if constexpr (kSkipsPadding<LoadA>) {
    // one kernel a mode: pixel_major_plan takes n > 64 and m a multiple of 128, the caller 16-byte loads
    return launch_tiles<128, 128, 4>(mult.mode, p, m, n, k, s, c, workspace, stream);
  } else if constexpr (kPixelMajorK<LoadA>) {
    return launch_single_load(mult.mode, p, m, n, k, s, c, workspace, stream);  // misaligned: the fallback
  } else {
    if (a.vector_ok() && b.vector_ok() && k % 4 == 0) {
      if constexpr (kLut192Tiles<LoadA>) {
        if (lut_192_rows(mult.mode, m, n))
          return launch_mode<Mode::kTable, 192, 64, 4>(p, m, n, k, s, c, workspace, stream);
      }
      if constexpr (kTallTiles<LoadA>) {
        if (narrow(n) && mult.mode == Mode::kTable && m >= kTallRows)
          return launch_mode<Mode::kTable, 256, 64, 4>(p, m, n, k, s, c, workspace, stream);
        if (narrow(n) && mult.mode == Mode::kAm16 && m >= kTallRows)
          return launch_mode<Mode::kAm16, 256, 64, 4>(p, m, n, k, s, c, workspace, stream);
      }
      if (narrow(n)) return launch_tiles<128, 64, 4>(mult.mode, p, m, n, k, s, c, workspace, stream);
      return launch_tiles<128, 128, 4>(mult.mode, p, m, n, k, s, c, workspace, stream);
    }
    return launch_single_load(mult.mode, p, m, n, k, s, c, workspace, stream);
  }
}

Geometry geometry32(const ConvGeometry& g) {
  return Geometry{static_cast<int>(g.batch),      static_cast<int>(g.in_h),       static_cast<int>(g.in_w),
                  static_cast<int>(g.in_c),       static_cast<int>(g.filter_h),   static_cast<int>(g.filter_w),
                  static_cast<int>(g.out_c),      static_cast<int>(g.stride_h),   static_cast<int>(g.stride_w),
                  static_cast<int>(g.dilation_h), static_cast<int>(g.dilation_w), static_cast<int>(g.pad_top),
                  static_cast<int>(g.pad_left),   static_cast<int>(g.out_h),      static_cast<int>(g.out_w)};
}

bool conv_fits(const ConvGeometry& g) {
  return g.batch * g.in_h * g.in_w * g.in_c <= kMaxElements && g.batch * g.out_h * g.out_w * g.out_c <= kMaxElements &&
         g.patch_size() * g.out_c <= kMaxElements;
}

constexpr const char* kTooLarge = "a conv tensor has 2^31 elements or more (the CUDA kernels index with 32 bits)";

}  // namespace
}  // namespace gpu
}  // namespace amdnn

// Defines path_counts_<name>(), this translation unit's counters.
#define AMDNN_GPU_PATH_COUNTS(name)                                                                  \
  namespace amdnn {                                                                                  \
  namespace gpu {                                                                                    \
  PathCounts path_counts_##name() {                                                                 \
    unsigned long long counts[2] = {0, 0};                                                          \
    if (cudaMemcpyFromSymbol(counts, g_path_counts, sizeof(counts)) != cudaSuccess) return {};      \
    return {counts[0], counts[1]};                                                                   \
  }                                                                                                  \
  }                                                                                                  \
  }

#endif  // AMDNN_OPS_CC_GEMM_CUDA_KERNEL_CUH_
