// Filter layouts for the bindings: torch's OIHW to the kernels' HWIO (forward) and HWOI (input gradient), and the
// filter gradient's HWIO back to OIHW. Each is a transpose of a matrix through 32 x 32 tiles in shared memory, one of
// whose indices is permuted, so that both the reads and the writes of a warp are 128 contiguous bytes:
//
//   OIHW -> HWIO: in [O][I * T] (column b = i * T + t), out row (t * I + i) of [I * T][O].
//   OIHW -> HWOI: in [O * I][T], out [T][O * I]: the same with O * I rows and I = 1; for T <= 32 (filters up to
//                 5 x 5) 256 rows a block, read as one contiguous run (tiles of 32 columns would leave 23 of a
//                 warp's 32 lanes idle on a 3 x 3 filter's 9).
//   HWIO -> OIHW: the inverse of the first.
//   Matrices transposed (transpose_matrices): the first with I = 1 and T = 1, `count` matrices one after the other
//                 (matmul's transposed operands; an HWIO filter's HWOI copy, one matrix a tap).
//
// torch's permute-and-copy moved the 9.4 MB filters of a 512 x 512 x 3 x 3 conv at ~1 TB/s: the 21 copies of the
// benchmark's fwd+bwd over its seven shapes took 0.13 ms of GPU time in every mode, these 0.09 (torch.profiler, lut,
// H100).
#include <cuda_runtime.h>

#include "gemm_cuda.h"
#include "gemm_cuda_launch.cuh"

namespace amdnn {
namespace gpu {
namespace {

constexpr int kTile = 32, kTileRows = 8;  // 32 x 32 tiles, 256 threads: each thread moves 4 elements each way

// Where column b = i * taps + t of the OIHW side lies on the HWIO side: row t * in_c + i.
__device__ __forceinline__ long long hwio_row(int b, int in_c, int taps) {
  const int i = b / taps, t = b - i * taps;
  return static_cast<long long>(t) * in_c + i;
}

// Between the OIHW side, element (a, b) at a * cols + b (cols = in_c * taps), and the HWIO side, at hwio_row(b) * rows
// + a: kToHwio reads the first and writes the second, else the inverse. A warp reads 32 contiguous elements of the side
// it reads (along b on the OIHW side, along a on the HWIO side) and writes 32 contiguous ones of the other. One block
// per tile (row tile, column tile in x), matrix blockIdx.y of those rows * cols elements apart (transpose_matrices).
template <bool kToHwio>
__global__ void relayout(const float* in, int rows, int in_c, int taps, int col_tiles, float* out) {
  __shared__ float tile[kTile][kTile + 1];  // a padded row: the transposed reads do not conflict
  const int cols = in_c * taps;
  const int a0 = (blockIdx.x / col_tiles) * kTile, b0 = (blockIdx.x % col_tiles) * kTile;
  const long long size = static_cast<long long>(rows) * cols;
  in += blockIdx.y * size;
  out += blockIdx.y * size;
  const auto oihw = [=](int a, int b) { return static_cast<long long>(a) * cols + b; };
  const auto hwio = [=](int a, int b) { return hwio_row(b, in_c, taps) * rows + a; };
  for (int r = threadIdx.y; r < kTile; r += kTileRows) {
    const int a = a0 + (kToHwio ? r : threadIdx.x), b = b0 + (kToHwio ? threadIdx.x : r);
    if (a < rows && b < cols) tile[r][threadIdx.x] = in[kToHwio ? oihw(a, b) : hwio(a, b)];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < kTile; r += kTileRows) {
    const int a = a0 + (kToHwio ? threadIdx.x : r), b = b0 + (kToHwio ? r : threadIdx.x);
    if (a < rows && b < cols) out[kToHwio ? hwio(a, b) : oihw(a, b)] = tile[threadIdx.x][r];
  }
  allow_next_kernel();
}

constexpr int kRunRows = 256, kMaxRunTaps = 32;  // to_taps_major: 256 rows of up to 32 taps, 32 KB of shared memory

// out[t * rows + a] = in[a * taps + t] for taps <= kMaxRunTaps: a block reads its rows' taps as one contiguous run
// and writes each tap's 256 rows contiguously. One thread per row.
__global__ void to_taps_major(const float* in, int rows, int taps, float* out) {
  __shared__ float run[kRunRows * kMaxRunTaps];
  const int a0 = blockIdx.x * kRunRows, count = min(kRunRows, rows - a0);
  const float* from = in + static_cast<long long>(a0) * taps;
  for (int e = threadIdx.x; e < count * taps; e += kRunRows) run[e] = from[e];
  __syncthreads();
  if (threadIdx.x >= count) return;
  for (int t = 0; t < taps; ++t)  // odd taps (3 x 3, 5 x 5): a warp's 32 reads in 32 banks
    out[static_cast<long long>(t) * rows + a0 + threadIdx.x] = run[threadIdx.x * taps + t];
  allow_next_kernel();
}

constexpr int64_t kMaxMatrices = 65535;  // gridDim.y
constexpr const char* kTooLarge = "a filter has 2^31 elements or more (the CUDA kernels index with 32 bits)";

template <bool kToHwio>
LaunchStatus launch_layout(const float* in, int64_t count, int64_t rows, int64_t in_c, int64_t taps, float* out,
                           cudaStream_t stream) {
  const int64_t cols = in_c * taps;
  if (count == 0 || rows == 0 || cols == 0) return {};
  const int64_t row_tiles = (rows + kTile - 1) / kTile, col_tiles = (cols + kTile - 1) / kTile;
  if (count * rows * cols > kMaxElements || row_tiles * col_tiles > kMaxElements) return {false, kTooLarge};
  if (count > kMaxMatrices) return {false, "more than 65535 matrices to transpose (one a grid row in y)"};
  const dim3 grid(static_cast<unsigned>(row_tiles * col_tiles), static_cast<unsigned>(count));
  return launch_kernel(false, relayout<kToHwio>, grid, dim3(kTile, kTileRows), 0, stream, in, static_cast<int>(rows),
                       static_cast<int>(in_c), static_cast<int>(taps), static_cast<int>(col_tiles), out);
}

}  // namespace

LaunchStatus filter_oihw_to_hwio(const float* oihw, int64_t out_c, int64_t in_c, int64_t taps, float* hwio,
                                 cudaStream_t stream) {
  return launch_layout<true>(oihw, 1, out_c, in_c, taps, hwio, stream);
}

LaunchStatus filter_oihw_to_hwoi(const float* oihw, int64_t out_c, int64_t in_c, int64_t taps, float* hwoi,
                                 cudaStream_t stream) {
  const int64_t rows = out_c * in_c;
  if (taps > kMaxRunTaps || rows == 0 || taps == 0) return transpose_matrices(oihw, 1, rows, taps, hwoi, stream);
  if (rows * taps > kMaxElements) return {false, kTooLarge};
  return launch_kernel(false, to_taps_major, dim3(static_cast<unsigned>((rows + kRunRows - 1) / kRunRows)),
                       dim3(kRunRows), 0, stream, oihw, static_cast<int>(rows), static_cast<int>(taps), hwoi);
}

LaunchStatus filter_hwio_to_oihw(const float* hwio, int64_t out_c, int64_t in_c, int64_t taps, float* oihw,
                                 cudaStream_t stream) {
  return launch_layout<false>(hwio, 1, out_c, in_c, taps, oihw, stream);
}

LaunchStatus transpose_matrices(const float* in, int64_t count, int64_t rows, int64_t cols, float* out,
                                cudaStream_t stream) {
  return launch_layout<true>(in, count, rows, cols, 1, out, stream);
}

}  // namespace gpu
}  // namespace amdnn
