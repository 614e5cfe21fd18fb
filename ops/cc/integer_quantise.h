// The integer modes' quantiser on raw pointers, framework-free: each fp32 value's 8-bit code as a byte and its
// straight-through mask, in one pass over the tensor ("Integer modes", Quantisation, in docs/multipliers-spec.md;
// ops/modes/integer_reference.py's quantise and in_range are its numpy reference):
//
//   u    = rint(fl32(x' / s)) + z            x' = x with a subnormal x counted as zero; rint ties to even
//   code = clamp(u, qmin, qmax)               z for a NaN or infinite x
//   mask = x finite and qmin <= u <= qmax     where the straight-through gradient passes
//
// s and z are per tensor, or per index of the last axis (a kernel's output channels). The byte is the code's two's
// complement for the signed codes (-1 is 255), the code itself for the unsigned ones. Composed of a framework's
// elementwise ops the same rule took about 15 passes over the tensor (28 ms for a ResNet block's 2.1 M activations
// on 2 AVX2 cores, as long as TensorFlow's fp32 conv of them); here it is one read and two byte writes.
//
// The ranges the scales come from are one pass too (finite_range_cpu, gpu::finite_range; integer_reference's
// tensor_range and the finiteness it leaves out):
//
//   lo = min(0, smallest x'),  hi = max(0, largest x')    over the finite x' (subnormals counted as zero)
//   finite = no NaN or infinity among the values
//
// per tensor, or per index of the last axis (a kernel's output channels). Composed of a framework's ops: about 11
// passes (flush, finiteness, selects, min, max, the all-finite reduction), ~11 ms of the same 2.1 M activations.
// min and max are exact, so the blocks' partial results combine to the same bits in any order, and every bound is
// a normal value or +0 (a flushed -0 counts as +0, as the reference's).
#ifndef AMDNN_OPS_CC_INTEGER_QUANTISE_H_
#define AMDNN_OPS_CC_INTEGER_QUANTISE_H_

#include <math.h>

#include <cstdint>

#include "gemm.h"
#include "multiplier.h"  // AMDNN_HD: host and device, inline

typedef struct CUstream_st* cudaStream_t;  // the runtime's own typedef, so bindings need no CUDA header here

namespace amdnn {

// What one call needs besides the values. On the CPU both pointers are host memory; on the GPU device memory (the
// scales a step computes never leave the device).
struct QuantiseArgs {
  const float* scale = nullptr;  // `channels` scales, each a normal fp32 > 0 (the ranges' rule guarantees it)
  const float* zero = nullptr;   // `channels` zero points, integers in [qmin, qmax] held as fp32
  int64_t channels = 1;          // element i takes scale[i % channels]: 1 per tensor, the last axis' size per channel
  float qmin = -128.0f;          // the codes' range: [-128, 127] signed, [0, 255] unsigned
  float qmax = 127.0f;
};

// The codes' range the bindings accept: within one kind's bytes, so that each byte reads as one value.
inline bool quantise_codes_ok(int64_t qmin, int64_t qmax) {
  return qmin <= qmax && ((qmin >= -128 && qmax <= 127) || (qmin >= 0 && qmax <= 255));
}
constexpr const char* kQuantiseCodesRule =
    "are not one kind's bytes; valid: within [-128, 127] (signed) or [0, 255] (unsigned), qmin <= qmax";

// The scales the bindings accept: scale and zero of one count, 1 (per tensor) or the size of the input's last axis
// (rank >= 1) per channel.
inline bool quantise_channels_ok(int64_t scales, int64_t zeros, int64_t rank, int64_t last) {
  return zeros == scales && (scales == 1 || (rank > 0 && scales == last));
}

// One value's byte; *in_range is its mask. Written without branches, so that the CPU loops vectorise (a branch kept
// them scalar: 4.4 ns a value on one AVX2 core). A NaN or infinite x gives a NaN or infinite u, which only the
// selects see. A NaN quotient (which a normal positive scale cannot give) takes qmin.
AMDNN_HD uint8_t quantised_byte(float x, float scale, float zero, float qmin, float qmax, bool* in_range) {
  constexpr float kSmallestNormal = 1.17549435e-38f;  // 2^-126
  constexpr float kLargest = 3.40282347e+38f;
  const float magnitude = fabsf(x);
  const bool finite = magnitude <= kLargest;  // false for a NaN
  const float u = rintf((magnitude < kSmallestNormal ? 0.0f : x) / scale) + zero;
  *in_range = finite & (u >= qmin) & (u <= qmax);
  const float clamped = u >= qmin ? (u <= qmax ? u : qmax) : qmin;
  return static_cast<uint8_t>(static_cast<int32_t>(finite ? clamped : zero));  // modulo 256: two's complement
}

// One value's step of a range: lo, hi and finite updated by x. Branch-free, as quantised_byte.
AMDNN_HD void finite_range_step(float x, float* lo, float* hi, bool* finite) {
  constexpr float kSmallestNormal = 1.17549435e-38f;  // 2^-126
  constexpr float kLargest = 3.40282347e+38f;
  const float magnitude = fabsf(x);
  const bool is_finite = magnitude <= kLargest;  // false for a NaN
  const float counted = (is_finite & (magnitude >= kSmallestNormal)) ? x : 0.0f;
  *lo = counted < *lo ? counted : *lo;
  *hi = counted > *hi ? counted : *hi;
  *finite = *finite & is_finite;
}

// The ranges of the `count` values of x: channels == 1, one (lo, hi, finite) of the whole tensor; else one per index
// of the last axis (count a multiple of channels). lo, hi and finite hold `channels` values each.
void finite_range_cpu(const float* x, int64_t count, int64_t channels, float* lo, float* hi, bool* finite,
                      const ParallelFor& parallel_for);

// codes[i] and in_range[i] for the `count` values of x (any shape; the last axis has args.channels elements when the
// scales are per channel).
void quantise_cpu(const float* x, int64_t count, const QuantiseArgs& args, uint8_t* codes, bool* in_range,
                  const ParallelFor& parallel_for);

namespace gpu {

struct LaunchStatus;

// The same on the GPU, on `stream`, without synchronising it (gemm_cuda.h's conventions). Defined in
// integer_conv_cuda.cu.
LaunchStatus quantise(const float* x, int64_t count, const QuantiseArgs& args, uint8_t* codes, bool* in_range,
                      cudaStream_t stream);
LaunchStatus finite_range(const float* x, int64_t count, int64_t channels, float* lo, float* hi, bool* finite,
                          cudaStream_t stream);

}  // namespace gpu
}  // namespace amdnn

#endif  // AMDNN_OPS_CC_INTEGER_QUANTISE_H_
