// What the CPU GEMM's skeleton (gemm_cpu.cc: packing, blocking, threading) shares with its instruction-set layers
// (gemm_cpu_avx512.h, gemm_cpu_avx2.h): the exact formulation of each mode's fast product, the decoded operand
// parts, and the arguments of a micro-kernel. A layer supplies only the tile size, the formulation it uses per mode
// and the inner product (micro_fast); everything else is one code for every level.
#ifndef AMDNN_OPS_CC_GEMM_CPU_LAYER_H_
#define AMDNN_OPS_CC_GEMM_CPU_LAYER_H_

#include <cstdint>

#include "multiplier.h"

namespace amdnn {
namespace cpu_layer {

// How a fast kernel computes one product exactly (operands decoded once while packing; see decode() in gemm_cpu.cc).
enum class Form {
  kNone,          // no fast kernel: the generic kernel calls product<M>() per pair
  kMultiply,      // acc32, acc16, fp16: the hardware product of decoded operands, rounded or truncated
  kAddBits,       // mit32, mit16: the integer sum of the bit patterns less the bias
  kMbmFormula,    // am32: the MBM correction clamp on 32-bit fields
  kTablePermute,  // am16, lut with AVX-512 VBMI: the left operand's 128-byte table row, permuted by Fb (vpermt2b)
  kTableDwords,   // am16, lut with AVX-512 without VBMI: the row's 32 dwords permuted by Fb >> 2 (vpermt2d), then
                  // the byte Fb & 3 of each picked by vpshufb
  kTableColumns,  // am16, lut with AVX2: the right operand's table columns expanded per B panel, so that the left
                  // operand's Fa selects NR contiguous entries (one load, a vpshufb per 8 lanes); in blocks of
                  // fewer than kColumnsMinRows rows the left operand's row permuted in dwords as kTableDwords
};

// A decoded operand: up to three 32-bit parts and whether it takes part (rule 2 zeros do not).
struct Decoded {
  uint32_t part0;
  uint32_t part1;
  uint32_t part2;
  bool nonzero;
};

struct MicroArgs {
  int64_t kc;
  const uint32_t* a0;  // [MR][kc]
  const uint32_t* a1;
  const uint32_t* a2;
  const uint16_t* a_mask;  // mask-register layers: 0xFFFF where the operand takes part
  const uint32_t* b0;      // [kc][NR]
  const uint32_t* b1;
  const uint32_t* b2;
  const uint32_t* b_mask;          // mask-register layers: [kc], bit j for lane j
  const uint64_t* b_permute_mask;  // kTablePermute: [kc][2]
  const uint8_t* b_columns;        // kTableColumns: [kc][128][NR], entry T[Fa][Fb of lane j] at [k][Fa][j]
  float* acc;  // [MR] rows of NR, ld_acc apart: C itself for full tiles, else a tile buffer
  int64_t ld_acc;
  bool load_acc;  // continue the running sums in acc (a later K block) instead of starting at 0
  const uint8_t* table7;
};

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
constexpr uint32_t kMbmC0 = 0xA0000u, kMbmC1 = 0x50000u;

// kTableDwords: the right operand's part1 is one control word for all the instructions (kTableColumns: part2).
// Byte 0 = 0x80 | Fb >> 2: vpermt2d reads its low 5 bits (which of the row's 32 dwords holds the entry), AVX2's
// vpermd bits 0-2 (the dword within a 32-byte quarter) and its blends bits 3 and 4 (the quarter, shifted up to bit
// 31); vpshufb sees bit 7 and writes 0.
// Byte 2 = the entry's byte within the 16-byte lane after the permute: 4 (j mod 4) + (Fb & 3) for lane j, where
// vpshufb puts it (bit 16 up, as in the other table forms). Bytes 1 and 3 = 0x80: zeros. A rule 2 zero's control
// is all 0x80: the entry is 0 (and its part0 too).
constexpr uint32_t kDwordsZeroControl = 0x80808080u;
// kTableColumns: the expansion of a B panel (256 unpacks and 128 16-byte stores per k) pays off over the rows of
// A that use it; below this many rows a block permutes the rows instead. Measured on Zen 4 (lut, N = 2304,
// K = 512, one thread, Gproducts/s, expanded / permuted): 16 rows 3.3 / 4.8, 30 rows 5.4 / 5.9, 36 rows 6.0-6.3 /
// 5.9, 48 rows 7.3 / 6.0, 64 rows 8.1 / 5.9. (The per-image input gradient of a 4 x 4 layer, 16 rows, had run am16
// at 7.0x of oneDNN expanded, against 5.7x before the expansion.)
constexpr int64_t kColumnsMinRows = 32;
inline uint32_t dwords_control(uint32_t field, int64_t lane) {
  return 0x80008080u | (field >> 2) | ((4u * static_cast<uint32_t>(lane % 4) + (field & 3u)) << 16);
}

}  // namespace cpu_layer
}  // namespace amdnn

#endif  // AMDNN_OPS_CC_GEMM_CPU_LAYER_H_
