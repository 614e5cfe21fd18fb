// CUDA conv2d input gradient: its entry points and workspace, stride 1 (one phase of all the taps, pixel-major where
// skipping the padding pays) and dilation (DyGather, the kernel of every mode); stride > 1 goes by phases
// (gemm_cuda_input_grad_phases.cu). The design: gemm_cuda_input_grad.cuh.
#include "gemm_cuda_input_grad.cuh"

namespace amdnn {
namespace gpu {
namespace {

// The stride-1 input gradient's left operand (rows pixel-major where gemm_cuda_padding.cuh finds it pays).
PhaseGather one_phase_gather(const ConvGeometry& g, const float* dy) {
  const int64_t rows = g.batch * g.in_h * g.in_w, k = g.filter_h * g.filter_w * g.out_c;
  return PhaseGather{dy, geometry32(g), phase_of(g, 0, 0), static_cast<int>(rows), static_cast<int>(k)};
}

size_t gemm_workspace_bytes(const ConvGeometry& g) {
  const int64_t rows = g.batch * g.in_h * g.in_w, k = g.filter_h * g.filter_w * g.out_c;
  if (one_phase(g) && conv_fits(g)) return padded_workspace_for(PhaseGatherPixelMajor{one_phase_gather(g, nullptr)},
                                                                rows, g.in_c, k);
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
  const Geometry g32 = geometry32(g);
  if (!by_phases(g)) {  // B [k = (kh, kw, co), in_c] is the HWOI filter as it lies
    const int64_t rows = g.batch * g.in_h * g.in_w, k = g.filter_h * g.filter_w * g.out_c;
    const DenseAlongOuter b{w, static_cast<int>(g.in_c), static_cast<int>(k), static_cast<int>(g.in_c)};
    // Stride 1 without dilation is one phase of all the taps: PhaseGather reads it with two unsigned bounds checks a
    // group where DyGather, which also serves dilation, takes four and a branch on the stride. The same k order, so
    // the same bits; the four stride-1 input gradients of the benchmark's shapes 5.97 -> 5.79 ms (lut) and 5.47 ->
    // 5.36 (am16), now at their forwards' rate (H100, bench/gpu_conv_ops.cu, every hash equal).
    if (one_phase(g)) {
      const PixelMajorRows pixel_major_rows{g32.batch, g32.in_h * g32.in_w, g32.in_c};
      return launch_skipping_padding<PhaseGatherPixelMajor>(mult, one_phase_gather(g, dy), b, rows, g.in_c, k, dx,
                                                            workspace, stream, pixel_major_rows);
    }
    const DyGather a{dy, g32, static_cast<int>(rows), static_cast<int>(k)};
    return launch(mult, a, b, rows, g.in_c, k, dx, workspace, stream);
  }
  return conv2d_backprop_input_phases(mult, g, w, dy, dx, workspace, stream);
}

}  // namespace gpu
}  // namespace amdnn

AMDNN_GPU_PATH_COUNTS(input_grad)
