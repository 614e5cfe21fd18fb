// What the CUDA microbenchmarks (gpu_inner_loops.cu, gpu_kernel_ab.cu, gpu_conv_ops.cu) share: the median time of
// spans of back-to-back calls, a hash of a device buffer's bits, host data copied to the device, and acc16's table
// (ACC_7) as lut's test table.
#ifndef AMDNN_BENCH_GPU_BENCH_CUH_
#define AMDNN_BENCH_GPU_BENCH_CUH_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../ops/cc/multiplier.h"

namespace amdnn_bench {

// Milliseconds per call: the median over `spans` spans of `calls` back-to-back calls, timed with CUDA events after
// one untimed call.
template <class Call>
float median_ms(Call call, int spans, int calls) {
  call();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<float> ms;
  for (int r = 0; r < spans; ++r) {
    cudaEventRecord(start);
    for (int c = 0; c < calls; ++c) call();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float t;
    cudaEventElapsedTime(&t, start, stop);
    ms.push_back(t / calls);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// FNV-1a over the bits of n floats in device memory: equal hashes, equal outputs.
inline uint64_t bits_hash(const float* device, size_t n) {
  std::vector<uint32_t> bits(n);
  cudaMemcpy(bits.data(), device, n * 4, cudaMemcpyDeviceToHost);
  uint64_t h = 1469598103934665603ull;
  for (uint32_t v : bits) h = (h ^ v) * 1099511628211ull;
  return h;
}

// A device copy of host floats (freed by the caller with cudaFree).
inline float* to_device(const std::vector<float>& host) {
  float* device;
  cudaMalloc(&device, host.size() * 4);
  cudaMemcpy(device, host.data(), host.size() * 4, cudaMemcpyHostToDevice);
  return device;
}

// acc16's 128 x 128 table, c << 7 | M for every pair of 7-bit fields (the bytes of ACC_7.bin), in device memory.
inline uint8_t* device_acc16_table() {
  std::vector<uint8_t> table(amdnn::kTableSize);
  for (uint32_t fa = 0; fa < 128; ++fa)
    for (uint32_t fb = 0; fb < 128; ++fb) {
      const amdnn::MantissaProduct p = amdnn::bf16_mantissa(fa, fb);
      table[(fa << amdnn::kTableBits) | fb] = static_cast<uint8_t>((p.carry << 7) | p.mantissa);
    }
  uint8_t* device;
  cudaMalloc(&device, table.size());
  cudaMemcpy(device, table.data(), table.size(), cudaMemcpyHostToDevice);
  return device;
}

}  // namespace amdnn_bench

#endif  // AMDNN_BENCH_GPU_BENCH_CUH_
