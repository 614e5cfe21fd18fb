// The forward conv kernel of a few modes alone, built with nvcc in seconds (no torch, no binding): its time and a hash
// of its output bits on three 3x3 convs at batch 128 (32x32 64->128, 16x16 128->128, 8x8 256->256, stride 1, 128 x 128
// tiles), to compare a kernel variant with the committed one (same hash, time) and to run under Nsight Compute. Not
// the benchmark of record (bench/gpu_benchmark.py, against cuDNN, is).
//
//     nvcc -arch=sm_90 -O3 -fmad=false --expt-relaxed-constexpr -std=c++17 -I ops/cc -o /tmp/ab bench/gpu_kernel_ab.cu
//     /tmp/ab                                     # am16 and lut; -DAB_ACC32=1 -DAB_MIT16=1 add those
//     ncu --kernel-name-base mangled --kernel-name regex:ModeE4E --launch-skip 10 --launch-count 1 /tmp/ab
//
// A variant: build the same file against a copy of ops/cc holding it (-I that copy) and run both binaries; the
// hashes must match line by line before the times mean anything. The flags are the binding's (ops/build/torch_library.py).
// Times: median of 9 spans of 10 back-to-back calls (CUDA events); inputs: x after a ReLU (half zeros), w dense.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "gemm_cuda_kernel.cuh"
#include "gpu_bench.cuh"
#include "multiplier.h"
#ifndef AB_AM16
#define AB_AM16 1
#endif
#ifndef AB_LUT
#define AB_LUT 1
#endif
#ifndef AB_ACC32
#define AB_ACC32 0
#endif
#ifndef AB_MIT16
#define AB_MIT16 0
#endif

using namespace amdnn;
using namespace amdnn::gpu;

template <Mode M>
void bench(const char* name, int size, int cin, int cout, const uint8_t* table7) {
  ConvGeometry g{128, size, size, cin, 3, 3, cout, 1, 1, 1, 1, 1, 1, size, size};
  const size_t nx = 128ull * size * size * cin, nw = 9ull * cin * cout, ny = 128ull * size * size * cout;
  std::vector<float> hx(nx), hw(nw);
  uint32_t s = 12345;
  auto rnd = [&] { s = s * 1664525u + 1013904223u; return (s >> 8) / 16777216.0f * 2 - 1; };
  for (auto& v : hx) { v = rnd(); if (v < 0) v = 0; }  // after a ReLU: half zeros
  for (auto& v : hw) v = rnd() * 0.05f;
  float *x = amdnn_bench::to_device(hx), *w = amdnn_bench::to_device(hw), *y; void* ws;
  cudaMalloc(&y, ny * 4);
  const size_t wsb = workspace_for(g.out_pixels(), cout, g.patch_size());
  cudaMalloc(&ws, wsb + 16);
  const int rows = static_cast<int>(g.out_pixels()), taps = static_cast<int>(g.patch_size());
  const Im2Col a{x, geometry32(g), rows, taps};
  const DenseAlongOuter b{w, cout, taps, cout};
  GemmParams<Im2Col, DenseAlongOuter> p{};
  p.a = a; p.b = b; p.table7 = table7; p.rows = DenseRows{cout};
  const Split sp = nominal_split(M, rows, cout, taps);
  auto call = [&] { return launch_mode<M, 128, 128, 4>(p, rows, cout, taps, sp, y, ws, nullptr); };
  LaunchStatus st = call();
  if (!st.ok) { printf("launch failed: %s\n", st.what); return; }
  cudaDeviceSynchronize();
  const uint64_t h = amdnn_bench::bits_hash(y, ny);
  const float ms = amdnn_bench::median_ms(call, 9, 10);
  const double products = double(rows) * cout * taps;
  printf("%-6s %2d/%3d/%3d  %7.3f ms  %5.2f Tproducts/s  splits %d  hash %016llx  %s\n", name, size, cin, cout, ms,
         products / ms / 1e9, sp.splits, (unsigned long long)h, cudaGetErrorString(cudaGetLastError()));
  cudaFree(x); cudaFree(w); cudaFree(y); cudaFree(ws);
}

int main() {
  uint8_t* const t7 = amdnn_bench::device_acc16_table();  // lut runs acc16's table (ACC_7)
  const int shapes[3][3] = {{32, 64, 128}, {16, 128, 128}, {8, 256, 256}};
  for (auto& sh : shapes) {
    if constexpr (AB_AM16) bench<Mode::kAm16>("am16", sh[0], sh[1], sh[2], t7);
    if constexpr (AB_LUT) bench<Mode::kTable>("lut", sh[0], sh[1], sh[2], t7);
    if constexpr (AB_ACC32) bench<Mode::kAcc32>("acc32", sh[0], sh[1], sh[2], t7);
    if constexpr (AB_MIT16) bench<Mode::kMit16>("mit16", sh[0], sh[1], sh[2], t7);
  }
  return 0;
}
