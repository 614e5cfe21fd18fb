// Convs whose padding is worth skipping: whether their pixels lie pixel-major, their k slices, their workspace (host).
//
// A SAME 3 x 3 conv multiplies zeros of its padding in 4 % (32 x 32 outputs) to 31 % (4 x 4) of its products. With
// the pixels pixel-major (gemm_cuda_loaders.cuh) the kernel skips the k tiles that read only padding (PaddingTiles in
// gemm_cuda_kernel.cuh): in the forward and the stride-1 input gradient the rows are pixels (a 128-row tile holds one
// pixel at batch 128) and a tile of a tap that reads only padding for them is skipped; in the filter gradient k is the
// pixels (a k tile of 16 lies in one pixel) and a tile of a pixel at which the block's taps read only padding is.
// Skipped tiles save time only where the SMs they free take other work: a grid of one wave runs as long as its full
// blocks (with the nominal slices the skip bought nothing on the 4 x 4 and 8 x 8 convs; H100). So the
// slices are chosen for it, by placing the blocks on the block slots in launch order (the block scheduler's greedy
// order), each costing its k outside padding plus kPaddingTileK for each padding tile (its loads and barrier), and the
// pixels lie pixel-major only where that estimate is at most kPixelMajorCost of the nominal slices'. Pixel-major rows
// cost where nothing is skipped (the fast modes' stride-2 input gradients up to 2x slower: a block's rows 128 KB
// apart), and the skip in every kernel cost 1-8 % where nothing was skipped, so only the pixel-major GEMMs launch a
// kernel that carries it. Like nominal_split, the choice and the slices are functions of the shapes alone, whichever
// kernel runs: misaligned operands take the single-load kernels with the same slices (and the filter gradient's k in
// the same order), so the same bits.
#ifndef AMDNN_OPS_CC_GEMM_CUDA_PADDING_CUH_
#define AMDNN_OPS_CC_GEMM_CUDA_PADDING_CUH_

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <queue>
#include <vector>

#include "gemm_cuda_kernel.cuh"

namespace amdnn {
namespace gpu {
namespace {

constexpr int kPaddingTileK = 1;  // a skipped tile's cost in k: its loads, its staging and its barrier
// Measured on the benchmark's shapes (H100, lut and am16): estimates of 0.73 (the 4 x 4 conv's filter
// gradient) and 0.78 (its forward and input gradient) paid, that shape 3.12 -> 2.56 ms (lut, fwd+bwd); 0.845
// (8/256/512/2's filter gradient, 4 x 4 outputs at stride 2) bought nothing (1.670 -> 1.671 ms), nor did 0.91-0.94
// (the 8 x 8 forwards, tried with the skip in every kernel).
constexpr double kPixelMajorCost = 0.80;

// The estimate (split_cost's units) of a pixel-major GEMM on 128 x 128 tiles, one 256-thread block an SM, whose row
// tile r reads only padding in the k groups (padding_groups) of row_groups[r].
template <class L>
double padded_split_cost(const L& a, const std::vector<uint32_t>& row_groups, int64_t col_tiles, int64_t m, int64_t n,
                         int64_t k, const Split& s) {
  std::priority_queue<double, std::vector<double>, std::greater<double>> slot_free;
  for (int i = 0; i < kSmCount; ++i) slot_free.push(0.0);
  const int64_t group_k = a.group_k();
  double end = 0.0;
  for (int64_t z = 0; z < s.splits; ++z) {  // blocks in launch order: column tiles, row tiles, slices
    const int64_t k0 = z * s.k_per_split, k1 = std::min(k, k0 + s.k_per_split);
    for (const uint32_t groups : row_groups) {
      double work = kBlockStartK;
      for (int64_t kt = k0; kt < k1; kt += kSliceAlign) {
        const int64_t group = kt / group_k;
        const bool padding = group < 32 && (groups >> group & 1u) && kt - group * group_k + kSliceAlign <= group_k;
        work += padding ? kPaddingTileK : static_cast<double>(std::min<int64_t>(kSliceAlign, k1 - kt));
      }
      for (int64_t x = 0; x < col_tiles; ++x) {
        const double done = slot_free.top() + work;
        slot_free.pop();
        slot_free.push(done);
        end = std::max(end, done);
      }
    }
  }
  if (s.splits > 1) end += kBlockStartK + kSumCostPerElement * static_cast<double>(s.splits + 1) * m * n;
  return end;
}

struct PixelMajorPlan {
  bool pays = false;
  Split split;  // the slices where it pays
};

// Whether a GEMM whose left operand `a` skips padding (its rows or its k pixel-major) pays, and its slices. Only on the
// one kernel a mode that carries the skip: 128 x 128 tiles (n > 64, m a multiple of 128), 16-byte loads.
template <class L>
PixelMajorPlan pixel_major_plan(const L& a, int64_t m, int64_t n, int64_t k) {
  PixelMajorPlan plan;
  if (narrow(n) || m % 128 != 0 || k % 4 != 0) return plan;
  const int64_t row_tiles = m / 128, col_tiles = (n + 127) / 128;
  if (row_tiles * col_tiles >= kUnsplitTiles) return plan;  // nominal_split does not cut it: whole waves already
  std::vector<int64_t> key{m, n, k, a.group_k()};  // the row tiles' padding groups complete the key
  bool padding = false;
  for (int64_t r = 0; r < row_tiles; ++r) {
    key.push_back(a.padding_groups(static_cast<int>(r * 128), 128));
    padding |= key.back() != 0;
  }
  if (!padding) return plan;
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, PixelMajorPlan> known;  // a network has a few dozen conv shapes
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = known.find(key);
  if (found != known.end()) return found->second;
  const std::vector<uint32_t> row_groups(key.begin() + 4, key.end());
  const double nominal = padded_split_cost(a, std::vector<uint32_t>(row_groups.size(), 0u), col_tiles, m, n, k,
                                           split_for<128, 128>(m, n, k));
  plan.split = slices(k, 1);
  double best = padded_split_cost(a, row_groups, col_tiles, m, n, k, plan.split);
  const int64_t most = std::min(k / kMinSliceK, (kMaxBlocks + row_tiles * col_tiles - 1) / (row_tiles * col_tiles));
  for (int64_t wanted = 2; wanted <= most; ++wanted) {
    const Split s = slices(k, wanted);
    const double cost = padded_split_cost(a, row_groups, col_tiles, m, n, k, s);
    if (cost < best) {
      best = cost;
      plan.split = s;
    }
  }
  plan.pays = best <= kPixelMajorCost * nominal;
  known.emplace(key, plan);
  return plan;
}

// The workspace of a GEMM whose left operand may lie pixel-major (`a` pixel-major), for any mode.
template <class PixelMajor>
size_t padded_workspace_for(const PixelMajor& a, int64_t m, int64_t n, int64_t k) {
  const PixelMajorPlan plan = pixel_major_plan(a, m, n, k);
  const size_t padded = plan.pays && plan.split.splits > 1 ? static_cast<size_t>(plan.split.splits) * m * n * 4 : 0;
  return std::max(workspace_for(m, n, k), padded);
}

// C = A (*) B where A's rows are pixels: pixel-major (placed in C by `pixel_major_rows`) with the skip where
// pixel_major_plan says it pays, else image by image as `a` lies (C dense); with the plan's slices either way.
template <class PixelMajor, class LoadA, class LoadB>
LaunchStatus launch_skipping_padding(const GpuMultiplier& mult, const LoadA& a, const LoadB& b, int64_t m, int64_t n,
                                     int64_t k, float* c, void* workspace, cudaStream_t stream,
                                     const PixelMajorRows& pixel_major_rows) {
  const PixelMajor pixel_major{a};
  const PixelMajorPlan plan = pixel_major_plan(pixel_major, m, n, k);
  if (!plan.pays) return launch(mult, a, b, m, n, k, c, workspace, stream);
  if (a.vector_ok() && b.vector_ok())
    return launch(mult, pixel_major, b, m, n, k, c, workspace, stream, pixel_major_rows, &plan.split);
  return launch(mult, a, b, m, n, k, c, workspace, stream, DenseRows{-1}, &plan.split);
}

}  // namespace
}  // namespace gpu
}  // namespace amdnn

#endif  // AMDNN_OPS_CC_GEMM_CUDA_PADDING_CUH_
