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
// contiguous in memory (threads of a warp then walk along it). Outer holds what depends on the outer index only
// (computed once per thread), Cursor what depends on k: cursor(k) places one with divisions, once per thread, and
// advance(c, step) moves it along k with adds and wrap-arounds only, since a division by a run-time value costs ~20
// instructions and the kernel moves every cursor once per k tile. Every cursor keeps its k; load() reads +0 where
// the element is outside the operand (padding, ragged tiles).

// An invalid row's coordinates: far enough out that every bounds check on it fails, small enough not to overflow.
constexpr int kOutside = -(1 << 28);

__device__ __forceinline__ bool inside(int v, int size) { return static_cast<unsigned>(v) < static_cast<unsigned>(size); }

// Four consecutive floats as bits (the caller guarantees 16-byte alignment: vector_ok).
__device__ __forceinline__ uint4 load4_at(const float* p) {
  const float4 q = __ldg(reinterpret_cast<const float4*>(p));
  return make_uint4(__float_as_uint(q.x), __float_as_uint(q.y), __float_as_uint(q.z), __float_as_uint(q.w));
}

// Whether a loader may read groups of four along its contiguous index: the base 16-byte aligned and every row a
// multiple of four floats, so that a group never straddles a row, a tap or the end of the operand.
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

struct KCursor { int k; };

struct DenseAlongOuter {  // element(o, k) = p[k * ld + o]
  static constexpr bool kAlongK = false;
  const float* p;
  int outer_size, k_size, ld;
  struct Outer { int offset; bool valid; };
  using Cursor = KCursor;
  __device__ Outer outer(int o) const { return {o, o < outer_size}; }
  __device__ Cursor cursor(int k) const { return {k}; }
  __device__ void advance(Cursor& c, int step) const { c.k += step; }
  __device__ uint32_t load(const Outer& o, const Cursor& c) const {
    return (o.valid && c.k < k_size) ? __float_as_uint(__ldg(p + c.k * ld + o.offset)) : 0u;
  }
  __device__ uint4 load4(const Outer& o, const Cursor& c) const {
    return (o.valid && c.k < k_size) ? load4_at(p + c.k * ld + o.offset) : make_uint4(0u, 0u, 0u, 0u);
  }
  bool vector_ok() const { return aligned16(p) && ld % 4 == 0 && outer_size % 4 == 0; }
};

// The conv geometry in 32-bit ints (the launch checks that every tensor has fewer than 2^31 elements).
struct Geometry {
  int batch, in_h, in_w, in_c, filter_h, filter_w, out_c, stride_h, stride_w, dilation_h, dilation_w;
  int pad_top, pad_left, out_h, out_w;
};

// A pixel of the output grid as where its receptive field starts in x: offset of image n's (h0, w0) (which may lie
// in the padding), and h0, w0 for the bounds checks (kOutside for a row past the end).
struct Pixel { int offset, h0, w0; };

__device__ __forceinline__ Pixel pixel_at(const Geometry& g, int n, int ho, int wo, bool valid) {
  const int h0 = ho * g.stride_h - g.pad_top, w0 = wo * g.stride_w - g.pad_left;
  if (!valid) return {0, kOutside, kOutside};
  return {((n * g.in_h + h0) * g.in_w + w0) * g.in_c, h0, w0};
}

// k = (kh, kw, channel) walked with wrap-arounds: a filter tap of x (channels in_c) or of dy (channels out_c), with
// its displacement (dh, dw) for the bounds checks.
struct TapCursor {
  int k, ci, kw, dh, dw;  // ci: the channel (of x, or of dy)
};

__device__ __forceinline__ TapCursor tap_cursor(const Geometry& g, int k, int channels) {
  const int t = k / channels, ci = k - t * channels;
  const int kh = t / g.filter_w, kw = t - kh * g.filter_w;
  return {k, ci, kw, kh * g.dilation_h, kw * g.dilation_w};
}

__device__ __forceinline__ void tap_advance(const Geometry& g, TapCursor& c, int step, int channels) {
  c.k += step;
  c.ci += step;
  while (c.ci >= channels) {  // at most once per k tile when channels >= the tile's k (every ResNet layer but the first)
    c.ci -= channels;
    c.dw += g.dilation_w;
    if (++c.kw == g.filter_w) {
      c.kw = 0;
      c.dw = 0;
      c.dh += g.dilation_h;
    }
  }
}

__device__ __forceinline__ int tap_offset(const Geometry& g, const TapCursor& c) {
  return (c.dh * g.in_w + c.dw) * g.in_c + c.ci;
}

__device__ __forceinline__ bool tap_inside(const Geometry& g, const Pixel& p, const TapCursor& t, int taps) {
  return t.k < taps && inside(p.h0 + t.dh, g.in_h) && inside(p.w0 + t.dw, g.in_w);
}

__device__ __forceinline__ uint32_t load_x(const float* x, const Geometry& g, const Pixel& p, const TapCursor& t,
                                           int taps) {
  return tap_inside(g, p, t, taps) ? __float_as_uint(__ldg(x + p.offset + tap_offset(g, t))) : 0u;  // padding: +0
}

struct Im2Col {  // forward A: rows are output pixels, k the taps (kh, kw, ci)
  static constexpr bool kAlongK = true;
  const float* x;
  Geometry g;
  int rows, taps;
  using Outer = Pixel;
  using Cursor = TapCursor;
  __device__ Outer outer(int r) const {
    const int hw = g.out_h * g.out_w;
    const int n = r / hw, rest = r - n * hw;
    const int ho = rest / g.out_w, wo = rest - ho * g.out_w;
    return pixel_at(g, n, ho, wo, r < rows);
  }
  __device__ Cursor cursor(int k) const { return tap_cursor(g, k, g.in_c); }
  __device__ void advance(Cursor& c, int step) const { tap_advance(g, c, step, g.in_c); }
  __device__ uint32_t load(const Outer& o, const Cursor& c) const { return load_x(x, g, o, c, taps); }
  __device__ uint4 load4(const Outer& o, const Cursor& c) const {  // ci .. ci + 3 of one tap
    return tap_inside(g, o, c, taps) ? load4_at(x + o.offset + tap_offset(g, c)) : make_uint4(0u, 0u, 0u, 0u);
  }
  bool vector_ok() const { return aligned16(x) && g.in_c % 4 == 0; }
};

// ------------------------------------------------------------------------------------------------ pixel-major rows
//
// Rows that are pixels of a batch (the forward's output pixels, the stride-1 input gradient's input pixels) lie
// image by image (r = n * pixels + p) above, or pixel-major (r = p * batch + n) where gemm_cuda_padding.cuh finds that
// it pays: a block's rows then hold few pixels (one, at batch 128 on 128-row tiles), so that a tap reads only padding
// for all of them, and such a loader says so (padding_groups) for the kernel to skip those tiles' products
// (PaddingTiles in gemm_cuda_kernel.cuh). The sums do not depend on the rows' order.

// Where row r of C goes in an NHWC tensor of `pixels` pixels an image when the rows lie pixel-major.
struct PixelMajorRows {
  int batch, pixels, channels;
  __device__ long long offset(int r) const {
    const int p = r / batch;
    return (static_cast<long long>(r - p * batch) * pixels + p) * channels;
  }
};

// The pixels of rows [row0, row0 + count) (of `rows`, pixel-major) on a grid `width` wide, as their first and last
// grid rows and columns: one grid row's span of columns, or every column where they span grid rows.
struct PixelBox {
  int h_first, h_last, w_first, w_last;
};

__host__ __device__ inline PixelBox pixel_major_box(int row0, int count, int rows, int batch, int width) {
  const int last = (row0 + count < rows ? row0 + count : rows) - 1;
  const int p0 = row0 / batch, p1 = last / batch;
  const int h0 = p0 / width, h1 = p1 / width;
  if (h0 != h1) return {h0, h1, 0, width - 1};
  return {h0, h1, p0 - h0 * width, p1 - h1 * width};
}

struct Im2ColPixelMajor : Im2Col {
  __device__ Outer outer(int r) const {
    const int p = r / g.batch, ho = p / g.out_w;
    return pixel_at(g, r - p * g.batch, ho, p - ho * g.out_w, r < rows);
  }
  // Bit t: tap t (< 32) reads padding for every row of [row0, row0 + count): h0 + dh outside x's rows for every h0 of
  // the rows' pixels, or the same along w.
  __host__ __device__ uint32_t padding_groups(int row0, int count) const {
    const PixelBox b = pixel_major_box(row0, count, rows, g.batch, g.out_w);
    const int h_lo = b.h_first * g.stride_h - g.pad_top, h_hi = b.h_last * g.stride_h - g.pad_top;
    const int w_lo = b.w_first * g.stride_w - g.pad_left, w_hi = b.w_last * g.stride_w - g.pad_left;
    const int filter_taps = g.filter_h * g.filter_w;
    uint32_t bits = 0;
    for (int t = 0; t < (filter_taps < 32 ? filter_taps : 32); ++t) {
      const int dh = t / g.filter_w * g.dilation_h, dw = t % g.filter_w * g.dilation_w;
      if (h_hi + dh < 0 || h_lo + dh >= g.in_h || w_hi + dw < 0 || w_lo + dw >= g.in_w) bits |= 1u << t;
    }
    return bits;
  }
  __host__ __device__ int group_k() const { return g.in_c; }  // k per tap
};

// The filter gradient's A: rows are taps, k the output pixels (n, ho, wo), walked with wrap-arounds.
struct PixelCursor {
  int k, n, ho, wo;
};

struct Im2ColTransposed {
  static constexpr bool kAlongK = false;
  const float* x;
  Geometry g;
  int pixels, taps;
  struct Outer { int offset, dh, dw; };
  using Cursor = PixelCursor;
  __device__ Outer outer(int r) const {
    if (r >= taps) return {0, kOutside, kOutside};
    const TapCursor t = tap_cursor(g, r, g.in_c);
    return {tap_offset(g, t), t.dh, t.dw};
  }
  __device__ Cursor cursor(int k) const {
    const int hw = g.out_h * g.out_w;
    const int n = k / hw, rest = k - n * hw;
    const int ho = rest / g.out_w;
    return {k, n, ho, rest - ho * g.out_w};
  }
  __device__ void advance(Cursor& c, int step) const {
    c.k += step;
    c.wo += step;
    while (c.wo >= g.out_w) {  // out_w >= the step on all but the smallest maps (4 x 4: twice per k tile of 8)
      c.wo -= g.out_w;
      if (++c.ho == g.out_h) {
        c.ho = 0;
        ++c.n;
      }
    }
  }
  __device__ uint32_t load(const Outer& o, const Cursor& c) const {
    const int h0 = c.ho * g.stride_h - g.pad_top, w0 = c.wo * g.stride_w - g.pad_left;
    const bool in = c.k < pixels && inside(h0 + o.dh, g.in_h) && inside(w0 + o.dw, g.in_w);
    return in ? __float_as_uint(__ldg(x + ((c.n * g.in_h + h0) * g.in_w + w0) * g.in_c + o.offset)) : 0u;
  }
  __device__ uint4 load4(const Outer& o, const Cursor& c) const {  // taps ci .. ci + 3 of one (kh, kw)
    const int h0 = c.ho * g.stride_h - g.pad_top, w0 = c.wo * g.stride_w - g.pad_left;
    const bool in = c.k < pixels && inside(h0 + o.dh, g.in_h) && inside(w0 + o.dw, g.in_w);
    return in ? load4_at(x + ((c.n * g.in_h + h0) * g.in_w + w0) * g.in_c + o.offset) : make_uint4(0u, 0u, 0u, 0u);
  }
  bool vector_ok() const { return aligned16(x) && g.in_c % 4 == 0; }
};

// Input-gradient A of a dilated conv (gemm_cuda_input_grad.cu runs the others as forward convs or by stride phases):
// rows are input pixels (n, hi, wi), k the (kh, kw, co) of the output pixels that read them: dy[n, ho, wo, co] with
// ho * stride = hi + pad - kh * dilation; taps that land between strides or outside read +0.
struct DyGather {
  static constexpr bool kAlongK = true;
  const float* dy;
  Geometry g;
  int rows, k_size;
  struct Outer { int base, h, w; };
  using Cursor = TapCursor;  // over dy's channels
  __device__ Outer outer(int r) const {
    if (r >= rows) return {0, kOutside, kOutside};
    const int hw = g.in_h * g.in_w;
    const int n = r / hw, rest = r - n * hw;
    const int hi = rest / g.in_w, wi = rest - hi * g.in_w;
    return {n * g.out_h * g.out_w * g.out_c, hi + g.pad_top, wi + g.pad_left};
  }
  __device__ Cursor cursor(int k) const { return tap_cursor(g, k, g.out_c); }
  __device__ void advance(Cursor& c, int step) const { tap_advance(g, c, step, g.out_c); }
  // Where element (o, c) is in dy, or -1 where it reads +0 (outside dy, or between strides).
  __device__ int offset(const Outer& o, const Cursor& c) const {
    int ho = o.h - c.dh, wo = o.w - c.dw;
    if (c.k >= k_size || ho < 0 || wo < 0) return -1;
    if (g.stride_h != 1 || g.stride_w != 1) {  // dilated and strided: the one case that still divides
      const int qh = ho / g.stride_h, qw = wo / g.stride_w;
      if (qh * g.stride_h != ho || qw * g.stride_w != wo) return -1;
      ho = qh;
      wo = qw;
    }
    if (ho >= g.out_h || wo >= g.out_w) return -1;
    return o.base + (ho * g.out_w + wo) * g.out_c + c.ci;
  }
  __device__ uint32_t load(const Outer& o, const Cursor& c) const {
    const int at = offset(o, c);
    return at >= 0 ? __float_as_uint(__ldg(dy + at)) : 0u;
  }
  __device__ uint4 load4(const Outer& o, const Cursor& c) const {  // channels ci .. ci + 3 of one tap
    const int at = offset(o, c);
    return at >= 0 ? load4_at(dy + at) : make_uint4(0u, 0u, 0u, 0u);
  }
  bool vector_ok() const { return aligned16(dy) && g.out_c % 4 == 0; }
};

// ------------------------------------------------------------------------------------------------ pixel-major k
//
// The filter gradient's k (the output pixels of every image) pixel-major, k = p * batch + n, where
// gemm_cuda_padding.cuh finds that it pays: a k tile then lies in one pixel (batch a multiple of 16), and where the block's taps read only
// padding at that pixel its left operands are all +0 (PaddingTiles). k's order is the sums' order: a conv's filter
// gradient takes it or not by its shapes alone, and its single-load kernels read it the same way (kPixelMajorK).

struct Im2ColTransposedByPixel : Im2ColTransposed {
  static constexpr bool kPixelMajorK = true;
  __device__ Cursor cursor(int k) const {
    const int p = k / g.batch, ho = p / g.out_w;
    return {k, k - p * g.batch, ho, p - ho * g.out_w};
  }
  __device__ void advance(Cursor& c, int step) const {
    c.k += step;
    c.n += step;
    while (c.n >= g.batch) {  // once per k tile at batch >= 16
      c.n -= g.batch;
      if (++c.wo == g.out_w) {
        c.wo = 0;
        ++c.ho;
      }
    }
  }
};

struct Im2ColTransposedSkippingPadding : Im2ColTransposedByPixel {
  // Bit p: output pixel p (< 32) reads padding in every tap of the rows [row0, row0 + count) (rows: taps x in_c).
  __host__ __device__ uint32_t padding_groups(int row0, int count) const {
    const int last = (row0 + count < taps ? row0 + count : taps) - 1;
    const int t0 = row0 / g.in_c, t1 = last / g.in_c, pixels = g.out_h * g.out_w;
    uint32_t bits = 0;
    for (int p = 0; p < (pixels < 32 ? pixels : 32); ++p) {
      const int h0 = p / g.out_w * g.stride_h - g.pad_top, w0 = p % g.out_w * g.stride_w - g.pad_left;
      bool padding = true;
      for (int t = t0; t <= t1 && padding; ++t) {
        const int h = h0 + t / g.filter_w * g.dilation_h, w = w0 + t % g.filter_w * g.dilation_w;
        padding = h < 0 || h >= g.in_h || w < 0 || w >= g.in_w;
      }
      if (padding) bits |= 1u << p;
    }
    return bits;
  }
  __host__ __device__ int group_k() const { return g.batch; }  // k per pixel
};

// The filter gradient's right operand with k pixel-major: element (co, k = p * batch + n) = dy[n, p, co].
struct DyByPixel {
  static constexpr bool kAlongK = false;
  const float* dy;
  int batch, pixels, channels;
  struct Outer { int co; bool valid; };
  struct Cursor { int k, n, p; };
  __device__ Outer outer(int co) const { return {co, co < channels}; }
  __device__ Cursor cursor(int k) const {
    const int p = k / batch;
    return {k, k - p * batch, p};
  }
  __device__ void advance(Cursor& c, int step) const {
    c.k += step;
    c.n += step;
    while (c.n >= batch) {
      c.n -= batch;
      ++c.p;
    }
  }
  __device__ int offset(const Outer& o, const Cursor& c) const { return (c.n * pixels + c.p) * channels + o.co; }
  __device__ uint32_t load(const Outer& o, const Cursor& c) const {
    return (o.valid && c.k < batch * pixels) ? __float_as_uint(__ldg(dy + offset(o, c))) : 0u;
  }
  __device__ uint4 load4(const Outer& o, const Cursor& c) const {  // co .. co + 3
    return (o.valid && c.k < batch * pixels) ? load4_at(dy + offset(o, c)) : make_uint4(0u, 0u, 0u, 0u);
  }
  bool vector_ok() const { return aligned16(dy) && channels % 4 == 0; }
};

}  // namespace
}  // namespace gpu
}  // namespace amdnn

#endif  // AMDNN_OPS_CC_GEMM_CUDA_LOADERS_CUH_
