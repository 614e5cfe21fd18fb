// Kernel launches of the CUDA core with programmatic dependent launch (PDL, compute capability 9.0 and later).
//
// An op is a chain of kernels on one stream (the GEMM, the pass that adds its k slices), and the ops of a training
// step follow each other; without PDL a kernel starts only after the one before it has ended and its own launch has
// gone through, 1-2.5 us between kernels on an H100 (torch.profiler, docs/performance.md). A programmatic launch lets
// the kernel's blocks be placed while the kernel before it in the stream ends; they wait at their start
// (wait_for_prior_kernel) until that kernel has ended and its writes are visible, before they touch global memory, so
// every read and write, and so every bit, is ordered as with plain launches. The GEMM lets the next kernel be placed
// once its main loop is done (allow_next_kernel before its stores), the slices' pass and the filter layouts once
// their stores are: placed earlier, the next kernel's blocks would sit waiting on SMs that a kernel of another stream
// could use. The GEMMs and the slices' passes launch programmatically; the filter layouts (the first kernel of the
// torch binding's forward and input gradient) launch plain: programmatic, the input gradient's layout started the
// moment the forward ended, its GEMM took the SMs before the filter gradient's beside it on a side stream (am16,
// acc32), and am16's first two shapes lost 0.04-0.08 ms each (H100). A kernel after a kernel that is not
// the core's, a copy or an event wait starts as without PDL.
#ifndef AMDNN_OPS_CC_GEMM_CUDA_LAUNCH_CUH_
#define AMDNN_OPS_CC_GEMM_CUDA_LAUNCH_CUH_

#include <cuda_runtime.h>

#include <atomic>
#include <utility>

#include "gemm_cuda.h"

namespace amdnn {
namespace gpu {

// Build knob for measuring (AMDNN_NVCC_FLAGS=-DAMDNN_GPU_NO_PDL): every launch plain.
#ifdef AMDNN_GPU_NO_PDL
constexpr bool kProgrammaticLaunch = false;
#else
constexpr bool kProgrammaticLaunch = true;
#endif

// The first statement of a kernel launched programmatically: waits for the kernel before it in the stream (a no-op
// when the launch was plain).
__device__ __forceinline__ void wait_for_prior_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel of the stream be placed once every block of this one has called it (or ended).
__device__ __forceinline__ void allow_next_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether a kernel of this library may be launched programmatically on the current device: the device runs PDL
// (compute capability 9.0 or later) and the kernel's machine code came from PTX of 9.0 or later, where
// wait_for_prior_kernel is griddepcontrol.wait. A build for several architectures compiles all of them from the
// lowest one's PTX (one front-end pass, ops/build/cuda.py: sm_80,sm_90 from compute_80), and there
// wait_for_prior_kernel is empty: launched programmatically, such a kernel could read its inputs before the kernel
// ahead of it had written them, so it is launched plain. Read once per device and kernel type.
template <class Kernel>
bool programmatic_launch_here(Kernel* kernel) {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices];  // 0: not read yet, 1: no, 2: yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) {
    cudaGetLastError();
    return false;
  }
  int state = known[device].load(std::memory_order_relaxed);
  if (state == 0) {
    int major = 0;
    cudaFuncAttributes attributes = {};
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess) {
      cudaGetLastError();
      major = 0;
    }
    state = major >= 9 && attributes.ptxVersion >= 90 ? 2 : 1;
    known[device].store(state, std::memory_order_relaxed);
  }
  return state == 2;
}

// kernel<<<grid, block, shared_bytes, stream>>>(args...), programmatic if asked and the device allows it.
template <class... Params, class... Args>
LaunchStatus launch_kernel(bool programmatic, void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                           cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = programmatic && kProgrammaticLaunch && programmatic_launch_here(kernel) ? 1 : 0;
  const cudaError_t status = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (status == cudaSuccess) return {};
  cudaGetLastError();  // clear it, as a failed <<<...>>> launch read by cudaGetLastError would be
  return {false, cudaGetErrorString(status)};
}

}  // namespace gpu
}  // namespace amdnn

#endif  // AMDNN_OPS_CC_GEMM_CUDA_LAUNCH_CUH_
