// The integer modes' forward op on raw pointers, framework-free: a conv2d (Dense is the 1 x 1 conv of a 1 x 1 image)
// of 8-bit codes whose every product is an entry of a 256 x 256 table, summed as exact integers and rescaled to
// fp32 ("Integer modes" in docs/multipliers-spec.md; ops/modes/integer_reference.py is its numpy reference).
//
// For output pixel p and channel c, with the K = filter_h x filter_w x in_c taps of p's patch (a tap outside the
// input reads the code zero_a: an accelerator pads its buffer with the zero point):
//
//   acc[p, c] = sum_k T[a_k, w_kc] - zero_w[c] sum_k a_k - zero_a sum_k w_kc + K zero_a zero_w[c]     (exact)
//   y[p, c]   = fl32(fl32(acc[p, c]) x rescale[c])
//
// a_k and w_kc are the codes' values (int8 when signed_codes, else uint8); the table is indexed by their bytes,
// T[a_byte * 256 + w_byte]. rescale[c] = fl32(s_a x s_w[c]) comes from the caller (flushed to zero below 2^-126, NaN
// where an operand held a NaN or an infinity: the spec's outputs rule costs nothing here). The table sum runs in
// int32 (|T| <= 65535, K <= kIntMaxTaps: 2^15 x 65535 < 2^31), the zero-point terms in int64, so acc is the same for
// any order of summation and every kernel gives the same bits.
#ifndef AMDNN_OPS_CC_INTEGER_CONV_H_
#define AMDNN_OPS_CC_INTEGER_CONV_H_

#include <cstdint>

#include "conv_geometry.h"
#include "gemm.h"

typedef struct CUstream_st* cudaStream_t;  // the runtime's own typedef, so bindings need no CUDA header here

namespace amdnn {

// Taps per output the int32 table sum holds exactly (VGG-16's first Dense has 25088, ResNet's largest conv 4608).
constexpr int64_t kIntMaxTaps = 32768;
constexpr int64_t kIntTableEntries = 256 * 256;

// What one call needs besides the codes. On the CPU every pointer is host memory; on the GPU every one is device
// memory (so a step's zero points and scales never leave the device).
struct IntConvArgs {
  const int32_t* table = nullptr;    // kIntTableEntries products, T[a_byte * 256 + w_byte]
  bool signed_codes = true;          // the codes' bytes are int8 (true) or uint8 (false) values
  const int32_t* zero_a = nullptr;   // 1 value: the activations' zero point (and the padding taps' code)
  const int32_t* zero_w = nullptr;   // out_c values: each output channel's weight zero point
  const float* rescale = nullptr;    // out_c values: fl32(s_a x s_w[c])
};

// y [batch, out_h, out_w, out_c] fp32 from x [batch, in_h, in_w, in_c] and w [filter_h, filter_w, in_c, out_c]
// codes (bytes). Needs g.patch_size() <= kIntMaxTaps (the bindings check it and say so).
void int_conv2d_cpu(const ConvGeometry& g, const uint8_t* x, const uint8_t* w, const IntConvArgs& args, float* y,
                    const ParallelFor& parallel_for);

// The CPU kernel's instruction-set layer ("avx512", "avx2" or "generic"), for reports and benchmarks.
const char* int_conv2d_cpu_level();

namespace gpu {

struct LaunchStatus;

// The same on the GPU, on `stream`, without synchronising it (gemm_cuda.h's conventions). Defined in
// integer_conv_cuda.cu.
LaunchStatus int_conv2d(const ConvGeometry& g, const uint8_t* x, const uint8_t* w, const IntConvArgs& args, float* y,
                        cudaStream_t stream);

}  // namespace gpu
}  // namespace amdnn

#endif  // AMDNN_OPS_CC_INTEGER_CONV_H_
