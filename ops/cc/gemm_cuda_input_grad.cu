// CUDA conv2d input gradient: dx = dy (*) w^T as implicit GEMMs over input pixels (no col2im, no atomics), each dx
// element one running sum over its (kh, kw, co) in order; dy is the left operand of every product.
//
// At stride 1 without dilation the input gradient is the forward conv of dy by the filter turned around
// (as_forward): it runs the forward's kernels (gemm_cuda_conv.cu) and has none of its own. With stride s > 1 (and no
// dilation) an input pixel is read only by the taps kh = (hi + pad_top) mod s (mod s), so the pixels are split into
// s_h x s_w phases by (hi + pad_top) mod s, each a GEMM over its own taps only: a gather over all taps would multiply
// (s_h s_w - 1) / (s_h s_w) zeros, 3/4 of the work at stride 2. The phases write disjoint pixels of dx, each with its
// own part of the workspace, and run side by side (gemm_cuda_streams.h). Dilated convs with a stride gather dy
// (DyGather).
//
// The GEMMs read the filter as HWOI [kh, kw, out_c, in_c]: B's row k = (kh, kw, co) is then in_c contiguous floats,
// read like the forward's HWIO weights (16-byte loads along n, no transposing stores). Read from HWIO along k, its
// stores to shared memory were 2-way conflicted (ncu, H100); the input gradient ran ~5 % below the
// forward of the same GEMM shape before and ~4 % after (am16's seven input gradients 6.02 -> 6.00 ms with the HWIO
// entry's transposes in). The torch binding makes HWOI in the one copy it makes of torch's OIHW anyway; an HWIO
// filter (TensorFlow's) is transposed into the workspace first (a 512 x 512 x 3 x 3 filter moves 19 MB: ~10 us at
// the H100's bandwidth, not timed alone).
#include <algorithm>
#include <vector>

#include "gemm_cuda_kernel.cuh"
#include "gemm_cuda_streams.h"

namespace amdnn {
namespace gpu {
namespace {

// One phase: input pixels hi = row0 + hq * stride_h (hq < rows_h), read by taps kh = kh0 + jh * stride_h
// (jh < taps_h); the same along w.
struct Phase {
  int row0, col0, rows_h, rows_w;
  int kh0, kw0, taps_h, taps_w;
  int64_t pixels(int64_t batch) const { return batch * rows_h * rows_w; }
  int64_t k(int64_t out_c) const { return static_cast<int64_t>(taps_h) * taps_w * out_c; }
};

Phase phase_of(const ConvGeometry& g, int ph, int pw) {
  const int sh = static_cast<int>(g.stride_h), sw = static_cast<int>(g.stride_w);
  Phase p{};
  p.row0 = ((ph - static_cast<int>(g.pad_top)) % sh + sh) % sh;
  p.col0 = ((pw - static_cast<int>(g.pad_left)) % sw + sw) % sw;
  p.rows_h = g.in_h > p.row0 ? static_cast<int>((g.in_h - p.row0 + sh - 1) / sh) : 0;
  p.rows_w = g.in_w > p.col0 ? static_cast<int>((g.in_w - p.col0 + sw - 1) / sw) : 0;
  p.kh0 = ph;
  p.kw0 = pw;
  p.taps_h = g.filter_h > ph ? static_cast<int>((g.filter_h - ph + sh - 1) / sh) : 0;
  p.taps_w = g.filter_w > pw ? static_cast<int>((g.filter_w - pw + sw - 1) / sw) : 0;
  return p;
}

bool by_phases(const ConvGeometry& g) {
  return (g.stride_h > 1 || g.stride_w > 1) && g.dilation_h == 1 && g.dilation_w == 1;
}

// The stride-1 input gradient without dilation as the forward conv of dy by the filter turned around: dx[n, hi, wi,
// ci] sums dy[n, hi + pad_top - kh, wi + pad_left - kw, co] * w[kh, kw, co, ci] over (kh, kw, co) in that order, which
// is conv2d's im2col of dy (in_c = out_c channels) with the paddings and dilations negated, times the HWOI filter read
// as an HWIO one ([taps, out_c] rows of in_c), onto dx's grid. The same products in the same k order as the phases'
// gather over one phase of all the taps would take (kernels of its own: 27 instantiations saved), and
// the same k slices (pixel_major_plan reads the same padding taps off either loader), so the same bits; the forward's
// kernels serve it. Dilated convs keep DyGather (at stride 1 too: its k slices are nominal_split's, which the forward's
// padding plan would change).
bool as_forward_conv(const ConvGeometry& g) {
  if (g.stride_h != 1 || g.stride_w != 1 || g.dilation_h != 1 || g.dilation_w != 1) return false;
  // Im2Col places each row at its receptive field's start in dy, here up to pad_top rows and pad_left columns past
  // dy's own; those offsets must fit the kernels' 32-bit ints too (a tensor of ~2^31 elements takes DyGather).
  const int64_t last_row = (g.batch - 1) * g.out_h + g.in_h - 1 + g.pad_top;
  return (last_row * g.out_w + g.in_w + g.pad_left) * g.out_c <= kMaxElements;
}

ConvGeometry as_forward(const ConvGeometry& g) {
  return ConvGeometry{g.batch,  g.out_h, g.out_w,     g.out_c,      g.filter_h, g.filter_w, g.in_c, 1,
                      1,        -1,      -1,          -g.pad_top,   -g.pad_left, g.in_h,    g.in_w};
}

// The k of one phase, (jh, jw, co), walked with wrap-arounds.
struct PhaseCursor {
  int k, co, jw, jh;
};

__device__ __forceinline__ PhaseCursor phase_cursor(const Geometry& g, const Phase& ph, int k) {
  const int t = k / g.out_c, co = k - t * g.out_c;
  const int jh = t / ph.taps_w;
  return {k, co, t - jh * ph.taps_w, jh};
}

__device__ __forceinline__ void phase_advance(const Geometry& g, const Phase& ph, PhaseCursor& c, int step) {
  c.k += step;
  c.co += step;
  while (c.co >= g.out_c) {
    c.co -= g.out_c;
    if (++c.jw == ph.taps_w) {
      c.jw = 0;
      ++c.jh;
    }
  }
}

// Where a phase's pixel (hq, wq) reads dy at its tap (jh, jw) = (0, 0): ho0 = (hi + pad_top - kh0) / stride_h with
// hi = row0 + hq * stride_h, an exact division by the choice of phase; the same along w.
__host__ __device__ inline int phase_ho0(const Geometry& g, const Phase& ph, int hq) {
  return (ph.row0 + hq * g.stride_h + g.pad_top - ph.kh0) / g.stride_h;
}
__host__ __device__ inline int phase_wo0(const Geometry& g, const Phase& ph, int wq) {
  return (ph.col0 + wq * g.stride_w + g.pad_left - ph.kw0) / g.stride_w;
}

// A of one phase: rows (n, hq, wq), k = (jh, jw, co): dy[n, ho0 - jh, wo0 - jw, co], +0 outside dy.
struct PhaseGather {
  static constexpr bool kAlongK = true;
  const float* dy;
  Geometry g;
  Phase ph;
  int rows, k_size;
  struct Outer { int base, ho0, wo0; };
  using Cursor = PhaseCursor;
  __device__ Outer outer_at(int n, int hq, int wq) const {
    return {n * g.out_h * g.out_w * g.out_c, phase_ho0(g, ph, hq), phase_wo0(g, ph, wq)};
  }
  __device__ Outer outer(int r) const {
    if (r >= rows) return {0, kOutside, kOutside};
    const int hw = ph.rows_h * ph.rows_w;
    const int n = r / hw, rest = r - n * hw;
    const int hq = rest / ph.rows_w;
    return outer_at(n, hq, rest - hq * ph.rows_w);
  }
  __device__ Cursor cursor(int k) const { return phase_cursor(g, ph, k); }
  __device__ void advance(Cursor& c, int step) const { phase_advance(g, ph, c, step); }
  __device__ uint32_t load(const Outer& o, const Cursor& c) const {
    const int ho = o.ho0 - c.jh, wo = o.wo0 - c.jw;
    const bool in = c.k < k_size && inside(ho, g.out_h) && inside(wo, g.out_w);
    return in ? __float_as_uint(__ldg(dy + o.base + (ho * g.out_w + wo) * g.out_c + c.co)) : 0u;
  }
  __device__ uint4 load4(const Outer& o, const Cursor& c) const {  // co .. co + 3 of one tap
    const int ho = o.ho0 - c.jh, wo = o.wo0 - c.jw;
    const bool in = c.k < k_size && inside(ho, g.out_h) && inside(wo, g.out_w);
    return in ? load4_at(dy + o.base + (ho * g.out_w + wo) * g.out_c + c.co) : make_uint4(0u, 0u, 0u, 0u);
  }
  bool vector_ok() const { return aligned16(dy) && g.out_c % 4 == 0; }
};

// B of one phase: (n = ci, k = (jh, jw, co)) = w[kh0 + jh * stride_h, kw0 + jw * stride_w, co, ci] of an HWOI filter.
struct PhaseFilter {
  static constexpr bool kAlongK = false;
  const float* w;
  Geometry g;
  Phase ph;
  int k_size;
  struct Outer { int ci; bool valid; };
  using Cursor = PhaseCursor;
  __device__ Outer outer(int ci) const { return {ci, ci < g.in_c}; }
  __device__ Cursor cursor(int k) const { return phase_cursor(g, ph, k); }
  __device__ void advance(Cursor& c, int step) const { phase_advance(g, ph, c, step); }
  __device__ int offset(const Outer& o, const Cursor& c) const {
    const int kh = ph.kh0 + c.jh * g.stride_h, kw = ph.kw0 + c.jw * g.stride_w;
    return ((kh * g.filter_w + kw) * g.out_c + c.co) * g.in_c + o.ci;
  }
  __device__ uint32_t load(const Outer& o, const Cursor& c) const {
    return (o.valid && c.k < k_size) ? __float_as_uint(__ldg(w + offset(o, c))) : 0u;
  }
  __device__ uint4 load4(const Outer& o, const Cursor& c) const {  // ci .. ci + 3 of one (tap, co)
    return (o.valid && c.k < k_size) ? load4_at(w + offset(o, c)) : make_uint4(0u, 0u, 0u, 0u);
  }
  bool vector_ok() const { return aligned16(w) && g.in_c % 4 == 0; }
};

// Row r of a phase's C is dx pixel (n, row0 + hq * stride_h, col0 + wq * stride_w).
struct PhaseRows {
  Geometry g;
  Phase ph;
  __device__ long long offset(int r) const {
    const int hw = ph.rows_h * ph.rows_w;
    const int n = r / hw, rest = r - n * hw;
    const int hq = rest / ph.rows_w, wq = rest - hq * ph.rows_w;
    const int hi = ph.row0 + hq * g.stride_h, wi = ph.col0 + wq * g.stride_w;
    return (static_cast<long long>(n * g.in_h + hi) * g.in_w + wi) * g.in_c;
  }
};

// The phases with work, most taps first (at pad 1 on a 3 x 3 filter: 4, 2, 2, 1 taps), each with its own part of
// the workspace (256-byte aligned) so that they can run side by side; *workspace_bytes: all parts; *untouched
// (if given): whether some phase has pixels but no taps (a 1 x 1 filter at stride 2), whose gradient is zero.
// Each phase takes the k slices it would take alone, though the four run side by side: of some twenty slicings
// (none, for the phases' joint tiles, one slice length for all, the 4-tap phase cut further) none was faster, lut
// 16/128/256/2 0.565 ms against 0.571-0.628, 8/256/512/2 0.567 against 0.612-0.910 (H100).
struct PhaseLaunch {
  Phase phase;
  size_t workspace_offset;
};

std::vector<PhaseLaunch> phase_launches(const ConvGeometry& g, size_t* workspace_bytes, bool* untouched = nullptr) {
  std::vector<PhaseLaunch> launches;
  bool without_taps = false;
  for (int ph = 0; ph < g.stride_h; ++ph)
    for (int pw = 0; pw < g.stride_w; ++pw) {
      const Phase p = phase_of(g, ph, pw);
      if (p.pixels(g.batch) > 0 && p.k(g.out_c) > 0) launches.push_back({p, 0});
      without_taps |= p.pixels(g.batch) > 0 && p.k(g.out_c) == 0;
    }
  if (untouched != nullptr) *untouched = without_taps;
  std::stable_sort(launches.begin(), launches.end(), [&](const PhaseLaunch& a, const PhaseLaunch& b) {
    return a.phase.k(g.out_c) > b.phase.k(g.out_c);
  });
  size_t bytes = 0;
  for (PhaseLaunch& l : launches) {
    l.workspace_offset = bytes;
    bytes += aligned256(workspace_for(l.phase.pixels(g.batch), g.in_c, l.phase.k(g.out_c)));
  }
  *workspace_bytes = bytes;
  return launches;
}

size_t gemm_workspace_bytes(const ConvGeometry& g) {
  const int64_t rows = g.batch * g.in_h * g.in_w, k = g.filter_h * g.filter_w * g.out_c;
  if (as_forward_conv(g)) return conv2d_workspace_bytes(as_forward(g));
  if (!by_phases(g)) return workspace_for(rows, g.in_c, k);
  size_t bytes = 0;
  phase_launches(g, &bytes);
  return bytes;
}

// Where the HWOI copy of an HWIO filter starts in the workspace: after the GEMM's, 256-byte aligned.
size_t filter_copy_offset(const ConvGeometry& g) { return aligned256(gemm_workspace_bytes(g)); }

}  // namespace

size_t conv2d_backprop_input_workspace_bytes(const ConvGeometry& g) {
  return filter_copy_offset(g) + static_cast<size_t>(g.patch_size() * g.out_c) * sizeof(float);
}

size_t conv2d_backprop_input_hwoi_workspace_bytes(const ConvGeometry& g) { return gemm_workspace_bytes(g); }

LaunchStatus conv2d_backprop_input(const GpuMultiplier& mult, const ConvGeometry& g, const float* w, const float* dy,
                                   float* dx, void* workspace, cudaStream_t stream) {
  if (!conv_fits(g)) return {false, kTooLarge};
  if (g.patch_size() * g.out_c == 0) return conv2d_backprop_input_hwoi(mult, g, w, dy, dx, workspace, stream);
  if (workspace == nullptr) return {false, "the input gradient of an HWIO filter was given no workspace"};
  float* const hwoi = reinterpret_cast<float*>(static_cast<char*>(workspace) + filter_copy_offset(g));
  // HWIO [taps][in_c][out_c] -> HWOI [taps][out_c][in_c]: a transpose a tap
  const LaunchStatus copied = transpose_matrices(w, g.filter_h * g.filter_w, g.in_c, g.out_c, hwoi, stream);
  if (!copied.ok) return copied;
  return conv2d_backprop_input_hwoi(mult, g, hwoi, dy, dx, workspace, stream);
}

LaunchStatus conv2d_backprop_input_hwoi(const GpuMultiplier& mult, const ConvGeometry& g, const float* w,
                                        const float* dy, float* dx, void* workspace, cudaStream_t stream) {
  if (!conv_fits(g)) return {false, kTooLarge};
  if (as_forward_conv(g)) return conv2d(mult, as_forward(g), dy, w, dx, workspace, stream);
  const Geometry g32 = geometry32(g);
  if (!by_phases(g)) {  // dilated: B [k = (kh, kw, co), in_c] is the HWOI filter as it lies
    const int64_t rows = g.batch * g.in_h * g.in_w, k = g.filter_h * g.filter_w * g.out_c;
    const DenseAlongOuter b{w, static_cast<int>(g.in_c), static_cast<int>(k), static_cast<int>(g.in_c)};
    const DyGather a{dy, g32, static_cast<int>(rows), static_cast<int>(k)};
    return launch(mult, a, b, rows, g.in_c, k, dx, workspace, stream);
  }
  size_t workspace_bytes = 0;
  bool untouched = false;
  const std::vector<PhaseLaunch> launches = phase_launches(g, &workspace_bytes, &untouched);
  // Phases that no tap reads (a 1x1 filter at stride 2, say) have a zero gradient: clear dx first.
  if (untouched) {
    const size_t bytes = static_cast<size_t>(g.batch * g.in_h * g.in_w * g.in_c) * sizeof(float);
    const cudaError_t status = cudaMemsetAsync(dx, 0, bytes, stream);
    if (status != cudaSuccess) return {false, cudaGetErrorString(status)};
  }
  // The phases run side by side on side streams (gemm_cuda_streams.h): one at a time, a phase of the benchmark's
  // stride-2 shapes fills one wave of the GPU or less (128 blocks of 132 SMs), then drains it and sums its slices.
  const int count = static_cast<int>(launches.size());
  ForkJoin streams(stream, count);
  LaunchStatus status;
  for (int i = 0; i < count && status.ok; ++i) {
    const Phase& p = launches[i].phase;
    void* const phase_workspace =
        workspace == nullptr ? nullptr : static_cast<char*>(workspace) + launches[i].workspace_offset;
    const int64_t rows = p.pixels(g.batch), k = p.k(g.out_c);
    const PhaseGather a{dy, g32, p, static_cast<int>(rows), static_cast<int>(k)};
    const PhaseFilter b{w, g32, p, static_cast<int>(k)};
    status = launch(mult, a, b, rows, g.in_c, k, dx, phase_workspace, streams.stream(i), PhaseRows{g32, p});
  }
  const LaunchStatus joined = streams.join();
  return status.ok ? joined : status;
}

}  // namespace gpu
}  // namespace amdnn

AMDNN_GPU_PATH_COUNTS(input_grad)
