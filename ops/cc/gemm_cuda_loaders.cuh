// The CUDA GEMM's operands: dense matrices and the implicit im2col views of the convolutions, read by (outer, k).
#ifndef AMDNN_OPS_CC_GEMM_CUDA_LOADERS_CUH_
#define AMDNN_OPS_CC_GEMM_CUDA_LOADERS_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace amdnn {
namespace gpu {
namespace {

// ------------------------------------------------------------------------------------------------ loaders
//
// A loader presents one GEMM operand by (outer, k): outer is m for A and n for B. kAlongK says which index is
// contiguous in memory (threads of a warp then walk along it). Outer and Inner hold what depends on one index only,
// so the per-element work is a few adds and compares.

struct DenseAlongK {  // element(o, k) = p[o * ld + k]
  static constexpr bool kAlongK = true;
  const float* p;
  int outer_size, k_size, ld;
  struct Outer { int offset; bool valid; };
  struct Inner { int offset; bool valid; };
  __device__ Outer outer(int o) const { return {o * ld, o < outer_size}; }
  __device__ Inner inner(int k) const { return {k, k < k_size}; }
  __device__ uint32_t load(const Outer& o, const Inner& i) const {
    return (o.valid && i.valid) ? __float_as_uint(__ldg(p + o.offset + i.offset)) : 0u;
  }
};

struct DenseAlongOuter {  // element(o, k) = p[k * ld + o]
  static constexpr bool kAlongK = false;
  const float* p;
  int outer_size, k_size, ld;
  struct Outer { int offset; bool valid; };
  struct Inner { int offset; bool valid; };
  __device__ Outer outer(int o) const { return {o, o < outer_size}; }
  __device__ Inner inner(int k) const { return {k * ld, k < k_size}; }
  __device__ uint32_t load(const Outer& o, const Inner& i) const {
    return (o.valid && i.valid) ? __float_as_uint(__ldg(p + o.offset + i.offset)) : 0u;
  }
};

// The conv geometry in 32-bit ints (the launch checks that every tensor has fewer than 2^31 elements).
struct Geometry {
  int batch, in_h, in_w, in_c, filter_h, filter_w, out_c, stride_h, stride_w, dilation_h, dilation_w;
  int pad_top, pad_left, out_h, out_w;
};

// A pixel of the output grid (n, ho, wo) as where its receptive field starts in x; a tap (kh, kw, ci) as its offset.
struct Pixel { int base, h0, w0; bool valid; };
struct Tap { int dh, dw, ci; bool valid; };

__device__ __forceinline__ Pixel output_pixel(const Geometry& g, int r, int rows) {
  const int hw = g.out_h * g.out_w;
  const int n = r / hw, rest = r - n * hw;
  const int ho = rest / g.out_w, wo = rest - ho * g.out_w;
  return {n * g.in_h * g.in_w * g.in_c, ho * g.stride_h - g.pad_top, wo * g.stride_w - g.pad_left, r < rows};
}

__device__ __forceinline__ Tap filter_tap(const Geometry& g, int k, int taps) {
  const int t = k / g.in_c, ci = k - t * g.in_c;
  const int kh = t / g.filter_w, kw = t - kh * g.filter_w;
  return {kh * g.dilation_h, kw * g.dilation_w, ci, k < taps};
}

__device__ __forceinline__ uint32_t load_x(const float* x, const Geometry& g, const Pixel& p, const Tap& t) {
  const int hi = p.h0 + t.dh, wi = p.w0 + t.dw;
  const bool inside = p.valid && t.valid && hi >= 0 && hi < g.in_h && wi >= 0 && wi < g.in_w;
  return inside ? __float_as_uint(__ldg(x + p.base + (hi * g.in_w + wi) * g.in_c + t.ci)) : 0u;  // padding: +0
}

struct Im2Col {  // forward A: rows are output pixels, k the taps (kh, kw, ci)
  static constexpr bool kAlongK = true;
  const float* x;
  Geometry g;
  int rows, taps;
  using Outer = Pixel;
  using Inner = Tap;
  __device__ Outer outer(int r) const { return output_pixel(g, r, rows); }
  __device__ Inner inner(int k) const { return filter_tap(g, k, taps); }
  __device__ uint32_t load(const Outer& o, const Inner& i) const { return load_x(x, g, o, i); }
};

struct Im2ColTransposed {  // filter-gradient A: rows are taps, k the output pixels
  static constexpr bool kAlongK = false;
  const float* x;
  Geometry g;
  int pixels, taps;
  using Outer = Tap;
  using Inner = Pixel;
  __device__ Outer outer(int r) const { return filter_tap(g, r, taps); }
  __device__ Inner inner(int k) const { return output_pixel(g, k, pixels); }
  __device__ uint32_t load(const Outer& o, const Inner& i) const { return load_x(x, g, i, o); }
};

// Input-gradient A: rows are input pixels (n, hi, wi), k the (kh, kw, co) of the output pixels that read them:
// dy[n, ho, wo, co] with ho * stride = hi + pad - kh * dilation; taps that land between strides or outside read +0.
struct DyGather {
  static constexpr bool kAlongK = true;
  const float* dy;
  Geometry g;
  int rows, k_size;
  struct Outer { int base, h, w; bool valid; };
  struct Inner { int dh, dw, co; bool valid; };
  __device__ Outer outer(int r) const {
    const int hw = g.in_h * g.in_w;
    const int n = r / hw, rest = r - n * hw;
    const int hi = rest / g.in_w, wi = rest - hi * g.in_w;
    return {n * g.out_h * g.out_w * g.out_c, hi + g.pad_top, wi + g.pad_left, r < rows};
  }
  __device__ Inner inner(int k) const {
    const int t = k / g.out_c, co = k - t * g.out_c;
    const int kh = t / g.filter_w, kw = t - kh * g.filter_w;
    return {kh * g.dilation_h, kw * g.dilation_w, co, k < k_size};
  }
  __device__ uint32_t load(const Outer& o, const Inner& i) const {
    const int h = o.h - i.dh, w = o.w - i.dw;
    if (!o.valid || !i.valid || h < 0 || w < 0) return 0u;
    const int ho = h / g.stride_h, wo = w / g.stride_w;
    if (ho * g.stride_h != h || wo * g.stride_w != w || ho >= g.out_h || wo >= g.out_w) return 0u;
    return __float_as_uint(__ldg(dy + o.base + (ho * g.out_w + wo) * g.out_c + i.co));
  }
};

struct FilterTransposed {  // input-gradient B: element (n = ci, k = (kh, kw, co)) = w[kh, kw, ci, co]
  static constexpr bool kAlongK = true;
  const float* w;
  int in_c, out_c, k_size;
  struct Outer { int offset; bool valid; };
  struct Inner { int offset; bool valid; };
  __device__ Outer outer(int ci) const { return {ci * out_c, ci < in_c}; }
  __device__ Inner inner(int k) const {
    const int t = k / out_c, co = k - t * out_c;
    return {t * in_c * out_c + co, k < k_size};
  }
  __device__ uint32_t load(const Outer& o, const Inner& i) const {
    return (o.valid && i.valid) ? __float_as_uint(__ldg(w + o.offset + i.offset)) : 0u;
  }
};

}  // namespace
}  // namespace gpu
}  // namespace amdnn

#endif  // AMDNN_OPS_CC_GEMM_CUDA_LOADERS_CUH_
