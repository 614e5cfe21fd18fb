// The inner loops of the table modes alone, against an FFMA loop on the same tiles: what one shared-memory lookup per
// product costs on a GPU, without global loads, staging or barriers (a microbenchmark, not the kernels).
//
//     nvcc -arch=sm_90 -O3 -o /tmp/gpu_inner_loops bench/gpu_inner_loops.cu && /tmp/gpu_inner_loops
//
// Every loop runs lut's layout: 256 threads, 16 x 4 outputs per thread, a warp's lanes sharing their rows, 16 k steps
// of operands re-read from shared memory, and one lookup per product in a 16 KB byte table (a warp's lookups read one
// 128-byte row: no bank conflicts). Loops:
//   ffma       FFMA only (the native fp32 loop: the ceiling of any design)
//   lut        the kernel's lut loop: IADD of row and column offsets, LDS.U8, IMAD (pb x G), FFMA
//   lut-ur     the same with the row offset in a uniform register (REDUX), so the LDS adds it: LDS.U8 [R+UR]
//   lookup     LDS.U8 [R+UR] and FFMA only: one lookup per product and nothing else, the load/store pipe's ceiling
// Products per second are the median of 7 timed launches (CUDA events) after a warm-up launch. Results in
// docs/performance.md ("What bounds the table modes").
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "gpu_bench.cuh"

namespace {

enum Loop { kFfma, kLut, kLutUniform, kLookup };

constexpr int kThreads = 256, kRows = 16, kCols = 4, kSteps = 16;

__device__ __forceinline__ uint32_t lds_u8(uint32_t address) {
  uint32_t v;
  asm volatile("ld.shared.u8 %0, [%1];" : "=r"(v) : "r"(address));
  return v;
}

template <Loop L>
__global__ void inner_loop(const uint32_t* __restrict__ seed, float* out, int iterations) {
  constexpr bool kUniformRow = L == kLutUniform || L == kLookup;
  __shared__ __align__(16) uint8_t table[128 * 128];
  __shared__ __align__(16) uint32_t left[2][kSteps][64];  // planes: pa, row offset (warps read overlapping rows)
  __shared__ __align__(16) uint32_t right[3][kSteps][128];  // planes: pb, column (+ table address), 2^16
  const int tid = threadIdx.x, lane = tid % 32;
  const uint32_t table_address = static_cast<uint32_t>(__cvta_generic_to_shared(table));
  for (int i = tid; i < 128 * 128; i += kThreads) table[i] = static_cast<uint8_t>(seed[i % 1024]);
  for (int i = tid; i < kSteps * 64; i += kThreads) {
    left[0][i / 64][i % 64] = 0x3F800000u + (seed[i] & 0x7FFFFFu);
    left[1][i / 64][i % 64] = (seed[i + 7] & 127u) * 128u;
  }
  for (int i = tid; i < kSteps * 128; i += kThreads) {
    right[0][i / 128][i % 128] = 0x3F800000u;
    right[1][i / 128][i % 128] = (seed[i + 3] & 127u) + (kUniformRow ? table_address : 0u);
    right[2][i / 128][i % 128] = 0x10000u;
  }
  __syncthreads();
  const int warp = kUniformRow ? __shfl_sync(0xFFFFFFFFu, tid / 32, 0) : tid / 32;
  float acc[kRows][kCols] = {};
  for (int it = 0; it < iterations; ++it) {
#pragma unroll 1
    for (int k = 0; k < kSteps; ++k) {
      uint32_t pa[kRows], row[kRows], pb[kCols], col[kCols], factor[kCols];
#pragma unroll
      for (int i = 0; i < kRows; i += 4) {
        const uint4 p = *reinterpret_cast<const uint4*>(&left[0][k][(warp * 4 + i) % 64]);
        const uint4 r = *reinterpret_cast<const uint4*>(&left[1][k][(warp * 4 + i) % 64]);
        pa[i] = p.x; pa[i + 1] = p.y; pa[i + 2] = p.z; pa[i + 3] = p.w;
        row[i] = r.x; row[i + 1] = r.y; row[i + 2] = r.z; row[i + 3] = r.w;
      }
      if (kUniformRow) {
#pragma unroll
        for (int i = 0; i < kRows; ++i) row[i] = __reduce_or_sync(0xFFFFFFFFu, row[i]);
      }
      const uint4 p = *reinterpret_cast<const uint4*>(&right[0][k][4 * lane]);
      const uint4 c = *reinterpret_cast<const uint4*>(&right[1][k][4 * lane]);
      const uint4 f = *reinterpret_cast<const uint4*>(&right[2][k][4 * lane]);
      pb[0] = p.x; pb[1] = p.y; pb[2] = p.z; pb[3] = p.w;
      col[0] = c.x; col[1] = c.y; col[2] = c.z; col[3] = c.w;
      factor[0] = f.x; factor[1] = f.y; factor[2] = f.z; factor[3] = f.w;
#pragma unroll
      for (int i = 0; i < kRows; ++i)
#pragma unroll
        for (int j = 0; j < kCols; ++j) {
          const float a = __uint_as_float(pa[i]);
          if (L == kFfma) {
            acc[i][j] = __fmaf_rn(a, __uint_as_float(pb[j]), acc[i][j]);
          } else if (L == kLut) {
            const uint32_t byte = table[row[i] + col[j]];
            acc[i][j] = __fmaf_rn(a, __uint_as_float(byte * factor[j] + pb[j]), acc[i][j]);
          } else if (L == kLutUniform) {
            const uint32_t byte = lds_u8(row[i] + col[j]);
            acc[i][j] = __fmaf_rn(a, __uint_as_float(byte * factor[j] + pb[j]), acc[i][j]);
          } else {
            acc[i][j] = __fmaf_rn(a, __uint_as_float(lds_u8(row[i] + col[j])), acc[i][j]);
          }
        }
    }
  }
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kRows; ++i)
#pragma unroll
    for (int j = 0; j < kCols; ++j) sum += acc[i][j];
  out[blockIdx.x * kThreads + tid] = sum;  // keeps every product live
}

template <Loop L>
double products_per_second(const uint32_t* seed, float* out, int blocks, int iterations) {
  const float ms = amdnn_bench::median_ms([&] { inner_loop<L><<<blocks, kThreads>>>(seed, out, iterations); }, 7, 1);
  return double(blocks) * kThreads * kRows * kCols * kSteps * iterations / (ms * 1e-3);
}

}  // namespace

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  std::vector<uint32_t> host(4096);
  for (int i = 0; i < 4096; ++i) host[i] = (i * 2654435761u) >> 3;
  uint32_t* seed;
  float* out;
  const int blocks = sms * 8, iterations = 400;
  cudaMalloc(&seed, host.size() * 4);
  cudaMalloc(&out, static_cast<size_t>(blocks) * kThreads * 4);
  cudaMemcpy(seed, host.data(), host.size() * 4, cudaMemcpyHostToDevice);
  const double ffma = products_per_second<kFfma>(seed, out, blocks, iterations);
  const struct { const char* name; double rate; } rows[] = {
      {"ffma", ffma},
      {"lut", products_per_second<kLut>(seed, out, blocks, iterations)},
      {"lut-ur", products_per_second<kLutUniform>(seed, out, blocks, iterations)},
      {"lookup", products_per_second<kLookup>(seed, out, blocks, iterations)},
  };
  std::printf("%s, %d SMs\n| loop | T products/s | time / ffma's |\n|---|---|---|\n", prop.name, sms);
  for (const auto& r : rows) std::printf("| %s | %.2f | %.2fx |\n", r.name, r.rate / 1e12, ffma / r.rate);
  const cudaError_t status = cudaDeviceSynchronize();
  if (status != cudaSuccess) {
    std::printf("CUDA error: %s\n", cudaGetErrorString(status));
    return 1;
  }
  return 0;
}
