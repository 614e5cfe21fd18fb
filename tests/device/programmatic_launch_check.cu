// GPU check of the core's launch rule (ops/cc/gemm_cuda_launch.cuh): a kernel is launched programmatically (PDL)
// only where its code waits for the kernel ahead of it, i.e. on compute capability 9.0 or later and compiled from
// PTX of 9.0 or later. A library built for several architectures compiles them all from the lowest one's PTX
// (sm_80,sm_90 from compute_80), where the wait is compiled out; launching those kernels programmatically would let
// them read inputs not yet written. run_on_gpu.sh compiles this file both ways and runs it; it exits 1 on a wrong
// answer. Not part of CI (no GPU there).
//
//   nvcc -std=c++17 -gencode arch=compute_80,code=sm_90 -I../../ops/cc programmatic_launch_check.cu -o check && ./check
#include <cstdio>

#include "gemm_cuda_launch.cuh"

// Writes the architecture its PTX was compiled for (__CUDA_ARCH__), then the value the kernel ahead of it wrote plus
// one: run programmatically after `fill`, the second value shows whether the wait held.
__global__ void report_arch(int* out) {
  amdnn::gpu::wait_for_prior_kernel();
#ifdef __CUDA_ARCH__
  out[0] = __CUDA_ARCH__;
#endif
  out[1] = out[2] + 1;
}

__global__ void fill(int* out) {
  amdnn::gpu::wait_for_prior_kernel();
  // a slow writer: the reader must still see its last store
  for (int i = 0; i < 1 << 16; ++i) atomicAdd(&out[3], 1);
  out[2] = out[3];
  amdnn::gpu::allow_next_kernel();
}

int main() {
  int* out = nullptr;
  if (cudaMalloc(&out, 4 * sizeof(int)) != cudaSuccess || cudaMemset(out, 0, 4 * sizeof(int)) != cudaSuccess) {
    std::fprintf(stderr, "no GPU memory\n");
    return 2;
  }
  int device = 0, major = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  amdnn::gpu::LaunchStatus s = amdnn::gpu::launch_kernel(true, fill, dim3(1), dim3(1), 0, nullptr, out);
  if (s.ok) s = amdnn::gpu::launch_kernel(true, report_arch, dim3(1), dim3(1), 0, nullptr, out);
  int host[4] = {};
  if (!s.ok || cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost) != cudaSuccess) {
    std::fprintf(stderr, "launch failed: %s\n", s.ok ? "copy" : s.what);
    return 2;
  }
  const bool programmatic = amdnn::gpu::programmatic_launch_here(report_arch);
  const bool expected = major >= 9 && host[0] >= 900;
  std::printf("compute capability %d.x, code from compute_%d PTX: launched %s (expected %s); read %d after %d\n",
              major, host[0] / 10, programmatic ? "programmatically" : "plain", expected ? "programmatically" : "plain",
              host[1], host[2]);
  return programmatic == expected && host[1] == (1 << 16) + 1 ? 0 : 1;
}
