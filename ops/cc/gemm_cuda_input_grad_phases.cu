// CUDA conv2d input gradient with stride > 1 (no dilation), by stride phases side by side (gemm_cuda_input_grad.cuh).
// Its own translation unit so that nvcc compiles its kernels beside the other input-gradient kernels.
#include <vector>

#include "gemm_cuda_input_grad.cuh"
#include "gemm_cuda_streams.h"

namespace amdnn {
namespace gpu {

LaunchStatus conv2d_backprop_input_phases(const GpuMultiplier& mult, const ConvGeometry& g, const float* w,
                                          const float* dy, float* dx, void* workspace, cudaStream_t stream) {
  const Geometry g32 = geometry32(g);
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

AMDNN_GPU_PATH_COUNTS(input_grad_phases)
