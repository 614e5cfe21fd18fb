// The PyTorch binding of the ops (torch.ops.amdnn.*): schemas, CPU kernels over conv_cpu.h, CUDA kernels over the
// CUDA core (gemm_cuda.h, when built with AMDNN_WITH_CUDA). Fake kernels and autograd are registered in Python
// (ops/torch_binding/ops.py), as pytorch/extension-cpp does; exact_gradients is read there only.
//
// Tensors are in torch's logical layouts: x [N, C, H, W], w [O, I, kh, kw], matrices [rows, cols]. The kernels work
// in NHWC/HWIO, so x is read through permute(0, 2, 3, 1).contiguous() (no copy for a channels_last tensor) and
// results that are images come back as channels_last tensors (again no copy). padding is [top, bottom, left,
// right], as torch's 'same' may need one more row or column after than before.
#include <torch/library.h>
#include <torch/torch.h>

#include <ATen/Parallel.h>

#include <string>
#include <vector>

#include "conv_cpu.h"
#include "integer_conv.h"
#include "integer_quantise.h"
#include "multiplier_setup.h"

#if defined(AMDNN_WITH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "gemm_cuda.h"
#endif

namespace amdnn {
namespace {

using torch::Tensor;

Mode mode_of(const std::string& name) {
  Mode mode;
  TORCH_CHECK(parse_mode(name, &mode), "amdnn: unknown multiplier '", name, "'; valid: ", valid_mode_names());
  return mode;
}

void check_float(const Tensor& t, const char* what, const char* op) {
  TORCH_CHECK(t.scalar_type() == torch::kFloat32, "amdnn.", op, ": ", what,
              " must be float32 (the simulated datapath is fp32), got ", t.scalar_type(), " with shape ", t.sizes());
}

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  TORCH_CHECK(a.device() == b.device(), "amdnn.", op, ": tensors are on different devices: ", a.device(), " and ",
              b.device());
}

// The conv geometry from logical NCHW / OIHW sizes; errors name both shapes.
ConvGeometry geometry(const char* op, at::IntArrayRef x, at::IntArrayRef w, at::IntArrayRef stride,
                      at::IntArrayRef padding, at::IntArrayRef dilation) {
  TORCH_CHECK(x.size() == 4 && w.size() == 4, "amdnn.", op, ": input must be 4-D [N, C, H, W] and weight 4-D "
              "[O, I, kh, kw]; got input ", x, " and weight ", w);
  TORCH_CHECK(x[1] == w[1], "amdnn.", op, ": input channels ", x[1], " differ from weight input channels ", w[1],
              " (input ", x, ", weight ", w, ")");
  TORCH_CHECK(stride.size() == 2 && stride[0] >= 1 && stride[1] >= 1, "amdnn.", op,
              ": stride must be 2 positive integers, got ", stride);
  TORCH_CHECK(dilation.size() == 2 && dilation[0] >= 1 && dilation[1] >= 1, "amdnn.", op,
              ": dilation must be 2 positive integers, got ", dilation);
  TORCH_CHECK(padding.size() == 4 && *std::min_element(padding.begin(), padding.end()) >= 0, "amdnn.", op,
              ": padding must be 4 non-negative integers [top, bottom, left, right], got ", padding);
  ConvGeometry g{x[0], x[2], x[3], x[1], w[2], w[3], w[0], stride[0], stride[1], dilation[0], dilation[1],
                 padding[0], padding[2], 0, 0};
  const int64_t eff_h = (g.filter_h - 1) * g.dilation_h + 1, eff_w = (g.filter_w - 1) * g.dilation_w + 1;
  const int64_t span_h = g.in_h + padding[0] + padding[1], span_w = g.in_w + padding[2] + padding[3];
  TORCH_CHECK(span_h >= eff_h && span_w >= eff_w, "amdnn.", op, ": the padded input (", span_h, " x ", span_w,
              ") is smaller than the dilated kernel (", eff_h, " x ", eff_w, "); input ", x, ", weight ", w);
  g.out_h = (span_h - eff_h) / g.stride_h + 1;
  g.out_w = (span_w - eff_w) / g.stride_w + 1;
  return g;
}

Tensor nhwc(const Tensor& x) { return x.permute({0, 2, 3, 1}).contiguous(); }
Tensor hwio(const Tensor& w) { return w.permute({2, 3, 1, 0}).contiguous(); }
Tensor nchw_view(const Tensor& y_nhwc) { return y_nhwc.permute({0, 3, 1, 2}); }
Tensor oihw(const Tensor& w_hwio) { return w_hwio.permute({3, 2, 0, 1}).contiguous(); }

void check_out_grad(const char* op, const ConvGeometry& g, const Tensor& dy) {
  const std::vector<int64_t> expected{g.batch, g.out_c, g.out_h, g.out_w};
  TORCH_CHECK(dy.sizes() == at::IntArrayRef(expected), "amdnn.", op, ": grad_output has shape ", dy.sizes(),
              " but the conv's output shape is ", at::IntArrayRef(expected));
}

// ------------------------------------------------------------------------------------------------ CPU

Multiplier cpu_multiplier(const std::string& name, const Tensor& table) {
  TORCH_CHECK(table.scalar_type() == torch::kUInt8 && table.dim() == 1, "amdnn: table must be a 1-D uint8 tensor");
  const Tensor bytes = table.to(torch::kCPU).contiguous();
  Multiplier mult;
  const std::string problem = make_multiplier(mode_of(name), bytes.data_ptr<uint8_t>(), bytes.numel(), &mult);
  TORCH_CHECK(problem.empty(), "amdnn: ", problem);
  return mult;
}

void torch_parallel_for(int64_t n, int64_t cost, const std::function<void(int64_t, int64_t)>& work) {
  // at::parallel_for splits [0, n) into chunks of at least grain_size; ~10^5 cycles per chunk keeps the overhead low.
  const int64_t grain = std::max<int64_t>(1, 100000 / std::max<int64_t>(cost, 1));
  at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) { work(begin, end); });
}

Tensor conv2d_cpu_kernel(const Tensor& x, const Tensor& w, const Tensor& table, c10::string_view multiplier,
                         at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool) {
  check_float(x, "input", "conv2d");
  check_float(w, "weight", "conv2d");
  const ConvGeometry g = geometry("conv2d", x.sizes(), w.sizes(), stride, padding, dilation);
  const Multiplier mult = cpu_multiplier(std::string(multiplier), table);
  const Tensor xh = nhwc(x), wh = hwio(w);
  Tensor y = torch::empty({g.batch, g.out_h, g.out_w, g.out_c}, x.options());
  conv2d_cpu(mult, g, xh.data_ptr<float>(), wh.data_ptr<float>(), y.data_ptr<float>(), torch_parallel_for,
             at::get_num_threads());
  return nchw_view(y);
}

Tensor conv2d_backward_input_cpu_kernel(at::IntArrayRef input_size, const Tensor& w, const Tensor& dy,
                                        const Tensor& table, c10::string_view multiplier, at::IntArrayRef stride,
                                        at::IntArrayRef padding, at::IntArrayRef dilation) {
  check_float(w, "weight", "conv2d_backward_input");
  check_float(dy, "grad_output", "conv2d_backward_input");
  const ConvGeometry g = geometry("conv2d_backward_input", input_size, w.sizes(), stride, padding, dilation);
  check_out_grad("conv2d_backward_input", g, dy);
  const Multiplier mult = cpu_multiplier(std::string(multiplier), table);
  const Tensor wh = hwio(w), dyh = nhwc(dy);
  Tensor dx = torch::empty({g.batch, g.in_h, g.in_w, g.in_c}, dy.options());
  conv2d_backprop_input_cpu(mult, g, wh.data_ptr<float>(), dyh.data_ptr<float>(), dx.data_ptr<float>(),
                            torch_parallel_for);
  return nchw_view(dx);
}

Tensor conv2d_backward_filter_cpu_kernel(const Tensor& x, at::IntArrayRef weight_size, const Tensor& dy,
                                         const Tensor& table, c10::string_view multiplier, at::IntArrayRef stride,
                                         at::IntArrayRef padding, at::IntArrayRef dilation) {
  check_float(x, "input", "conv2d_backward_filter");
  check_float(dy, "grad_output", "conv2d_backward_filter");
  const ConvGeometry g = geometry("conv2d_backward_filter", x.sizes(), weight_size, stride, padding, dilation);
  check_out_grad("conv2d_backward_filter", g, dy);
  const Multiplier mult = cpu_multiplier(std::string(multiplier), table);
  const Tensor xh = nhwc(x), dyh = nhwc(dy);
  Tensor dw = torch::empty({g.filter_h, g.filter_w, g.in_c, g.out_c}, x.options());
  conv2d_backprop_filter_cpu(mult, g, xh.data_ptr<float>(), dyh.data_ptr<float>(), dw.data_ptr<float>(),
                             torch_parallel_for, at::get_num_threads());
  return oihw(dw);
}

// A 2-D operand as (data, transposed): a column-major view (e.g. w.t()) is read as its transpose, without a copy.
std::pair<Tensor, bool> matrix(const Tensor& t) {
  if (!t.is_contiguous() && t.stride(0) == 1 && t.stride(1) == t.size(0)) return {t.t(), true};
  return {t.contiguous(), false};
}

void check_matmul(const Tensor& a, const Tensor& b) {
  check_float(a, "a", "matmul");
  check_float(b, "b", "matmul");
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "amdnn.matmul: a and b must be 2-D, got ", a.sizes(), " and ",
              b.sizes());
  TORCH_CHECK(a.size(1) == b.size(0), "amdnn.matmul: inner dimensions differ: ", a.sizes(), " x ", b.sizes());
}

Tensor matmul_cpu_kernel(const Tensor& a, const Tensor& b, const Tensor& table, c10::string_view multiplier, bool) {
  check_matmul(a, b);
  const Multiplier mult = cpu_multiplier(std::string(multiplier), table);
  const auto [ad, ta] = matrix(a);
  const auto [bd, tb] = matrix(b);
  Tensor c = torch::empty({a.size(0), b.size(1)}, a.options());
  matmul_cpu(mult, ad.data_ptr<float>(), bd.data_ptr<float>(), c.data_ptr<float>(), a.size(0), b.size(1), a.size(1),
             ta, tb, torch_parallel_for, at::get_num_threads());
  return c;
}

// Elementwise product<M>(a, b) of the scalar definitions (multiplier.h), on the CPU: what the GPU tests compare with.
Tensor products_cpu_kernel(const Tensor& a, const Tensor& b, const Tensor& table, c10::string_view multiplier) {
  check_float(a, "a", "products");
  check_float(b, "b", "products");
  TORCH_CHECK(a.sizes() == b.sizes(), "amdnn.products: a and b must have one shape, got ", a.sizes(), " and ",
              b.sizes());
  const Multiplier mult = cpu_multiplier(std::string(multiplier), table);
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  Tensor out = torch::empty_like(ac);
  const float *pa = ac.data_ptr<float>(), *pb = bc.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const uint8_t* t = mult.table7.data();
  dispatch_mode(
      mult.mode,
      [&](auto mode) {
        for (int64_t i = 0; i < ac.numel(); ++i) po[i] = product<decltype(mode)::value>(pa[i], pb[i], t);
      },
      [] {});
  return out;
}

// ------------------------------------------------------------------------------------------------ integer conv

// The integer op's checks, on any device: codes uint8 x NHWC [N, H, W, C] and w HWIO [kh, kw, C, O] (the codes are
// the bindings' own tensors, not a user's, so they keep TF's layouts), table int32 [65536], zero_a int32 [1], zero_w
// int32 [O], rescale float32 [O], all on x's device; padding [top, bottom, left, right]. Returns the geometry and the
// arguments (pointers into the contiguous tensors, which `keep` holds).
ConvGeometry int_conv2d_setup(const Tensor& x, const Tensor& w, const Tensor& table, const Tensor& zero_a,
                              const Tensor& zero_w, const Tensor& rescale, bool signed_codes, at::IntArrayRef stride,
                              at::IntArrayRef padding, at::IntArrayRef dilation, IntConvArgs* args,
                              std::vector<Tensor>* keep) {
  TORCH_CHECK(x.scalar_type() == torch::kUInt8 && w.scalar_type() == torch::kUInt8,
              "amdnn.int_conv2d: the codes must be uint8 (bytes), got ", x.scalar_type(), " and ", w.scalar_type());
  TORCH_CHECK(x.dim() == 4 && w.dim() == 4, "amdnn.int_conv2d: codes must be 4-D NHWC and filter codes 4-D HWIO; "
              "got ", x.sizes(), " and ", w.sizes());
  for (const Tensor* t : {&w, &table, &zero_a, &zero_w, &rescale}) check_same_device(x, *t, "int_conv2d");
  // The NCHW / OIHW sizes the shared geometry reads.
  const std::vector<int64_t> x_nchw{x.size(0), x.size(3), x.size(1), x.size(2)};
  const std::vector<int64_t> w_oihw{w.size(3), w.size(2), w.size(0), w.size(1)};
  const ConvGeometry g = geometry("int_conv2d", x_nchw, w_oihw, stride, padding, dilation);
  TORCH_CHECK(g.patch_size() <= kIntMaxTaps, "amdnn.int_conv2d: ", g.patch_size(), " taps per output (filter ",
              w.sizes(), "); the integer sums hold at most ", kIntMaxTaps);
  TORCH_CHECK(table.scalar_type() == torch::kInt32 && table.numel() == kIntTableEntries,
              "amdnn.int_conv2d: table must hold 65536 int32 products (256 x 256), got ", table.scalar_type(), " ",
              table.sizes());
  TORCH_CHECK(zero_a.scalar_type() == torch::kInt32 && zero_a.numel() == 1,
              "amdnn.int_conv2d: zero_a must be 1 int32 value, got ", zero_a.scalar_type(), " ", zero_a.sizes());
  TORCH_CHECK(zero_w.scalar_type() == torch::kInt32 && zero_w.numel() == g.out_c,
              "amdnn.int_conv2d: zero_w must be ", g.out_c, " int32 values (one per output channel), got ",
              zero_w.scalar_type(), " ", zero_w.sizes());
  TORCH_CHECK(rescale.scalar_type() == torch::kFloat32 && rescale.numel() == g.out_c,
              "amdnn.int_conv2d: rescale must be ", g.out_c, " float32 values (one per output channel), got ",
              rescale.scalar_type(), " ", rescale.sizes());
  *keep = {x.contiguous(), w.contiguous(), table.contiguous(), zero_a.contiguous(), zero_w.contiguous(),
           rescale.contiguous()};
  args->table = (*keep)[2].data_ptr<int32_t>();
  args->signed_codes = signed_codes;
  args->zero_a = (*keep)[3].data_ptr<int32_t>();
  args->zero_w = (*keep)[4].data_ptr<int32_t>();
  args->rescale = (*keep)[5].data_ptr<float>();
  return g;
}

Tensor int_conv2d_cpu_kernel(const Tensor& x, const Tensor& w, const Tensor& table, const Tensor& zero_a,
                             const Tensor& zero_w, const Tensor& rescale, bool signed_codes, at::IntArrayRef stride,
                             at::IntArrayRef padding, at::IntArrayRef dilation) {
  IntConvArgs args;
  std::vector<Tensor> keep;
  const ConvGeometry g = int_conv2d_setup(x, w, table, zero_a, zero_w, rescale, signed_codes, stride, padding,
                                          dilation, &args, &keep);
  Tensor y = torch::empty({g.batch, g.out_h, g.out_w, g.out_c}, x.options().dtype(torch::kFloat32));
  int_conv2d_cpu(g, keep[0].data_ptr<uint8_t>(), keep[1].data_ptr<uint8_t>(), args, y.data_ptr<float>(),
                 torch_parallel_for);
  return y;
}

// ------------------------------------------------------------------------------------------------ quantiser

// The quantiser's checks, on any device: x float32 (any shape), scale and zero float32 of 1 value or one per index
// of x's last axis, on x's device; codes within one kind's bytes. Returns the arguments (pointers into the contiguous
// tensors, which `keep` holds) and allocates the outputs.
QuantiseArgs quantise_setup(const Tensor& x, const Tensor& scale, const Tensor& zero, int64_t qmin, int64_t qmax,
                            std::vector<Tensor>* keep, Tensor* codes, Tensor* in_range) {
  check_float(x, "x", "quantise");
  check_float(scale, "scale", "quantise");
  check_float(zero, "zero", "quantise");
  for (const Tensor* t : {&scale, &zero}) check_same_device(x, *t, "quantise");
  const int64_t channels = scale.numel(), last = x.dim() > 0 ? x.size(-1) : 1;
  TORCH_CHECK(quantise_channels_ok(channels, zero.numel(), x.dim(), last),
              "amdnn.quantise: scale and zero must hold 1 value, or one per index of x's last axis (", last,
              "); got ", scale.sizes(), " and ", zero.sizes(), " for x ", x.sizes());
  TORCH_CHECK(quantise_codes_ok(qmin, qmax), "amdnn.quantise: codes [", qmin, ", ", qmax, "] ", kQuantiseCodesRule);
  *keep = {x.contiguous(), scale.contiguous(), zero.contiguous()};
  *codes = torch::empty(x.sizes(), x.options().dtype(torch::kUInt8));
  *in_range = torch::empty(x.sizes(), x.options().dtype(torch::kBool));
  QuantiseArgs args;
  args.scale = (*keep)[1].data_ptr<float>();
  args.zero = (*keep)[2].data_ptr<float>();
  args.channels = channels;
  args.qmin = static_cast<float>(qmin);
  args.qmax = static_cast<float>(qmax);
  return args;
}

std::tuple<Tensor, Tensor> quantise_cpu_kernel(const Tensor& x, const Tensor& scale, const Tensor& zero, int64_t qmin,
                                               int64_t qmax) {
  std::vector<Tensor> keep;
  Tensor codes, in_range;
  const QuantiseArgs args = quantise_setup(x, scale, zero, qmin, qmax, &keep, &codes, &in_range);
  quantise_cpu(keep[0].data_ptr<float>(), keep[0].numel(), args, codes.data_ptr<uint8_t>(), in_range.data_ptr<bool>(),
               torch_parallel_for);
  return {codes, in_range};
}

// The ranges' checks, on any device: x float32 (rank >= 1 per channel). Returns the contiguous x and the channel
// count, and allocates the outputs (float32 lo and hi, bool finite: 1 value, or one per index of x's last axis).
int64_t finite_range_setup(const Tensor& x, bool per_channel, Tensor* keep, Tensor* lo, Tensor* hi, Tensor* finite) {
  check_float(x, "x", "finite_range");
  TORCH_CHECK(!per_channel || x.dim() > 0, "amdnn.finite_range: per-channel ranges need an x of rank 1 or more "
              "(channels on its last axis); got a scalar");
  const int64_t channels = per_channel ? x.size(-1) : 1;
  *keep = x.contiguous();
  *lo = torch::empty({channels}, x.options());
  *hi = torch::empty({channels}, x.options());
  *finite = torch::empty({channels}, x.options().dtype(torch::kBool));
  return channels;
}

std::tuple<Tensor, Tensor, Tensor> finite_range_cpu_kernel(const Tensor& x, bool per_channel) {
  Tensor keep, lo, hi, finite;
  const int64_t channels = finite_range_setup(x, per_channel, &keep, &lo, &hi, &finite);
  finite_range_cpu(keep.data_ptr<float>(), keep.numel(), channels, lo.data_ptr<float>(), hi.data_ptr<float>(),
                   finite.data_ptr<bool>(), torch_parallel_for);
  return {lo, hi, finite};
}

// ------------------------------------------------------------------------------------------------ CUDA

#if defined(AMDNN_WITH_CUDA)

gpu::GpuMultiplier gpu_multiplier(const std::string& name, const Tensor& table, const Tensor& like) {
  gpu::GpuMultiplier mult;
  mult.mode = mode_of(name);
  if (mult.mode == Mode::kTable) {
    TORCH_CHECK(table.scalar_type() == torch::kUInt8 && table.numel() == kTableSize && table.device() == like.device(),
                "amdnn: on the GPU the table multiplier takes the canonical 128 x 128 table (16384 uint8) on the "
                "tensors' device ", like.device(), "; got ", table.numel(), " elements on ", table.device(),
                " (ops.torch_ops prepares it)");
    mult.table7 = table.contiguous().data_ptr<uint8_t>();
  }
  return mult;
}

void check_launch(const gpu::LaunchStatus& status, const char* op) {
  TORCH_CHECK(status.ok, "amdnn.", op, ": CUDA launch failed: ", status.what);
}

Tensor workspace(size_t bytes, const Tensor& like) {
  return torch::empty({static_cast<int64_t>(bytes)}, like.options().dtype(torch::kUInt8));
}

// torch's OIHW filter in the layout the CUDA kernels read: HWIO for the forward, HWOI for the input gradient
// (gemm_cuda_input_grad.cu), made by the core's coalesced transposes (gemm_cuda_layouts.cu) rather than torch's
// permute-and-copy.
Tensor filter_for_kernels(const Tensor& w, bool input_grad, cudaStream_t stream, const char* op) {
  const Tensor wc = w.contiguous();
  const int64_t o = w.size(0), i = w.size(1), taps = w.size(2) * w.size(3);
  Tensor out = input_grad ? torch::empty({w.size(2), w.size(3), o, i}, w.options())
                          : torch::empty({w.size(2), w.size(3), i, o}, w.options());
  const auto transpose = input_grad ? gpu::filter_oihw_to_hwoi : gpu::filter_oihw_to_hwio;
  check_launch(transpose(wc.data_ptr<float>(), o, i, taps, out.data_ptr<float>(), stream), op);
  return out;
}

Tensor conv2d_cuda_kernel(const Tensor& x, const Tensor& w, const Tensor& table, c10::string_view multiplier,
                          at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, bool) {
  check_float(x, "input", "conv2d");
  check_float(w, "weight", "conv2d");
  check_same_device(x, w, "conv2d");
  const ConvGeometry g = geometry("conv2d", x.sizes(), w.sizes(), stride, padding, dilation);
  const gpu::GpuMultiplier mult = gpu_multiplier(std::string(multiplier), table, x);
  // Checks first, then the device guard: every TORCH_CHECK above runs before any CUDA state changes.
  const c10::cuda::CUDAGuard guard(x.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  const Tensor xh = nhwc(x), wh = filter_for_kernels(w, false, stream, "conv2d");
  Tensor y = torch::empty({g.batch, g.out_h, g.out_w, g.out_c}, x.options());
  Tensor ws = workspace(gpu::conv2d_workspace_bytes(g), x);
  check_launch(gpu::conv2d(mult, g, xh.data_ptr<float>(), wh.data_ptr<float>(), y.data_ptr<float>(), ws.data_ptr(),
                           stream),
               "conv2d");
  return nchw_view(y);
}

Tensor conv2d_backward_input_cuda_kernel(at::IntArrayRef input_size, const Tensor& w, const Tensor& dy,
                                         const Tensor& table, c10::string_view multiplier, at::IntArrayRef stride,
                                         at::IntArrayRef padding, at::IntArrayRef dilation) {
  check_float(w, "weight", "conv2d_backward_input");
  check_float(dy, "grad_output", "conv2d_backward_input");
  check_same_device(w, dy, "conv2d_backward_input");
  const ConvGeometry g = geometry("conv2d_backward_input", input_size, w.sizes(), stride, padding, dilation);
  check_out_grad("conv2d_backward_input", g, dy);
  const gpu::GpuMultiplier mult = gpu_multiplier(std::string(multiplier), table, dy);
  // Checks first, then the device guard: every TORCH_CHECK above runs before any CUDA state changes.
  const c10::cuda::CUDAGuard guard(dy.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  const Tensor wh = filter_for_kernels(w, true, stream, "conv2d_backward_input"), dyh = nhwc(dy);
  Tensor dx = torch::empty({g.batch, g.in_h, g.in_w, g.in_c}, dy.options());
  Tensor ws = workspace(gpu::conv2d_backprop_input_hwoi_workspace_bytes(g), dy);
  check_launch(gpu::conv2d_backprop_input_hwoi(mult, g, wh.data_ptr<float>(), dyh.data_ptr<float>(),
                                               dx.data_ptr<float>(), ws.data_ptr(), stream),
               "conv2d_backward_input");
  return nchw_view(dx);
}

Tensor conv2d_backward_filter_cuda_kernel(const Tensor& x, at::IntArrayRef weight_size, const Tensor& dy,
                                          const Tensor& table, c10::string_view multiplier, at::IntArrayRef stride,
                                          at::IntArrayRef padding, at::IntArrayRef dilation) {
  check_float(x, "input", "conv2d_backward_filter");
  check_float(dy, "grad_output", "conv2d_backward_filter");
  check_same_device(x, dy, "conv2d_backward_filter");
  const ConvGeometry g = geometry("conv2d_backward_filter", x.sizes(), weight_size, stride, padding, dilation);
  check_out_grad("conv2d_backward_filter", g, dy);
  const gpu::GpuMultiplier mult = gpu_multiplier(std::string(multiplier), table, x);
  // Checks first, then the device guard: every TORCH_CHECK above runs before any CUDA state changes.
  const c10::cuda::CUDAGuard guard(x.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  const Tensor xh = nhwc(x), dyh = nhwc(dy);
  Tensor dw = torch::empty({g.filter_h, g.filter_w, g.in_c, g.out_c}, x.options());
  Tensor ws = workspace(gpu::conv2d_backprop_filter_workspace_bytes(g), x);
  check_launch(gpu::conv2d_backprop_filter(mult, g, xh.data_ptr<float>(), dyh.data_ptr<float>(), dw.data_ptr<float>(),
                                           ws.data_ptr(), stream),
               "conv2d_backward_filter");
  Tensor dw_oihw = torch::empty({g.out_c, g.in_c, g.filter_h, g.filter_w}, x.options());
  check_launch(gpu::filter_hwio_to_oihw(dw.data_ptr<float>(), g.out_c, g.in_c, g.filter_h * g.filter_w,
                                        dw_oihw.data_ptr<float>(), stream),
               "conv2d_backward_filter");
  return dw_oihw;
}

Tensor matmul_cuda_kernel(const Tensor& a, const Tensor& b, const Tensor& table, c10::string_view multiplier,
                          bool) {
  check_matmul(a, b);
  check_same_device(a, b, "matmul");
  const gpu::GpuMultiplier mult = gpu_multiplier(std::string(multiplier), table, a);
  // Checks first, then the device guard: every TORCH_CHECK above runs before any CUDA state changes.
  const c10::cuda::CUDAGuard guard(a.device());
  const auto [ad, ta] = matrix(a);
  const auto [bd, tb] = matrix(b);
  const int64_t m = a.size(0), n = b.size(1), k = a.size(1);
  Tensor c = torch::empty({m, n}, a.options());
  Tensor ws = workspace(gpu::matmul_workspace_bytes(m, n, k, ta, tb), a);
  check_launch(gpu::matmul(mult, ad.data_ptr<float>(), bd.data_ptr<float>(), c.data_ptr<float>(), m, n, k, ta, tb,
                           ws.data_ptr(), at::cuda::getCurrentCUDAStream().stream()),
               "matmul");
  return c;
}

// The integer op on the GPU: int_conv2d_setup's checks and arguments (all on x's CUDA device), then the CUDA core.
Tensor int_conv2d_cuda_kernel(const Tensor& x, const Tensor& w, const Tensor& table, const Tensor& zero_a,
                              const Tensor& zero_w, const Tensor& rescale, bool signed_codes, at::IntArrayRef stride,
                              at::IntArrayRef padding, at::IntArrayRef dilation) {
  IntConvArgs args;
  std::vector<Tensor> keep;
  const ConvGeometry g = int_conv2d_setup(x, w, table, zero_a, zero_w, rescale, signed_codes, stride, padding,
                                          dilation, &args, &keep);
  // Checks first, then the device guard: every TORCH_CHECK above runs before any CUDA state changes.
  const c10::cuda::CUDAGuard guard(x.device());
  Tensor y = torch::empty({g.batch, g.out_h, g.out_w, g.out_c}, x.options().dtype(torch::kFloat32));
  check_launch(gpu::int_conv2d(g, keep[0].data_ptr<uint8_t>(), keep[1].data_ptr<uint8_t>(), args, y.data_ptr<float>(),
                               at::cuda::getCurrentCUDAStream().stream()),
               "int_conv2d");
  return y;
}

// The quantiser on the GPU: quantise_setup's checks and outputs (on x's CUDA device), then the CUDA core.
std::tuple<Tensor, Tensor> quantise_cuda_kernel(const Tensor& x, const Tensor& scale, const Tensor& zero, int64_t qmin,
                                                int64_t qmax) {
  std::vector<Tensor> keep;
  Tensor codes, in_range;
  const QuantiseArgs args = quantise_setup(x, scale, zero, qmin, qmax, &keep, &codes, &in_range);
  const c10::cuda::CUDAGuard guard(x.device());  // after the checks, as int_conv2d's
  check_launch(gpu::quantise(keep[0].data_ptr<float>(), keep[0].numel(), args, codes.data_ptr<uint8_t>(),
                             in_range.data_ptr<bool>(), at::cuda::getCurrentCUDAStream().stream()),
               "quantise");
  return {codes, in_range};
}

// The ranges on the GPU: finite_range_setup's checks and outputs (on x's CUDA device), then the CUDA core.
std::tuple<Tensor, Tensor, Tensor> finite_range_cuda_kernel(const Tensor& x, bool per_channel) {
  Tensor keep, lo, hi, finite;
  const int64_t channels = finite_range_setup(x, per_channel, &keep, &lo, &hi, &finite);
  const c10::cuda::CUDAGuard guard(x.device());
  check_launch(gpu::finite_range(keep.data_ptr<float>(), keep.numel(), channels, lo.data_ptr<float>(),
                                 hi.data_ptr<float>(), finite.data_ptr<bool>(),
                                 at::cuda::getCurrentCUDAStream().stream()),
               "finite_range");
  return {lo, hi, finite};
}

std::vector<int64_t> gpu_path_counts() {
  const gpu::PathCounts counts = gpu::path_counts();
  return {static_cast<int64_t>(counts.fast), static_cast<int64_t>(counts.generic)};
}

#else

std::vector<int64_t> gpu_path_counts() { return {0, 0}; }

#endif

// The CPU GEMM's calls and products by kernel path (gemm.h PathCounts), as the TF binding's AmdnnPathCounts gives
// them: the torch engine logs them per epoch as the TensorFlow engine does.
std::vector<int64_t> cpu_path_counts() {
  const PathCounts counts = path_counts();
  return {counts.fast_calls, counts.generic_calls, counts.fast_products, counts.generic_products};
}

}  // namespace

TORCH_LIBRARY(amdnn, m) {
  m.def("conv2d(Tensor x, Tensor w, Tensor table, str multiplier, int[] stride, int[] padding, int[] dilation, "
        "bool exact_gradients=False) -> Tensor");
  m.def("conv2d_backward_input(int[] input_size, Tensor w, Tensor grad_output, Tensor table, str multiplier, "
        "int[] stride, int[] padding, int[] dilation) -> Tensor");
  m.def("conv2d_backward_filter(Tensor x, int[] weight_size, Tensor grad_output, Tensor table, str multiplier, "
        "int[] stride, int[] padding, int[] dilation) -> Tensor");
  m.def("matmul(Tensor a, Tensor b, Tensor table, str multiplier, bool exact_gradients=False) -> Tensor");
  m.def("products(Tensor a, Tensor b, Tensor table, str multiplier) -> Tensor");
  m.def("int_conv2d(Tensor x, Tensor w, Tensor table, Tensor zero_a, Tensor zero_w, Tensor rescale, "
        "bool signed_codes, int[] stride, int[] padding, int[] dilation) -> Tensor");
  m.def("quantise(Tensor x, Tensor scale, Tensor zero, int qmin, int qmax) -> (Tensor, Tensor)");
  m.def("finite_range(Tensor x, bool per_channel=False) -> (Tensor, Tensor, Tensor)");
  m.def("gpu_path_counts() -> int[]", &gpu_path_counts);
  m.def("cpu_path_counts() -> int[]", &cpu_path_counts);
}

TORCH_LIBRARY_IMPL(amdnn, CPU, m) {
  m.impl("conv2d", &conv2d_cpu_kernel);
  m.impl("conv2d_backward_input", &conv2d_backward_input_cpu_kernel);
  m.impl("conv2d_backward_filter", &conv2d_backward_filter_cpu_kernel);
  m.impl("matmul", &matmul_cpu_kernel);
  m.impl("products", &products_cpu_kernel);
  m.impl("int_conv2d", &int_conv2d_cpu_kernel);
  m.impl("quantise", &quantise_cpu_kernel);
  m.impl("finite_range", &finite_range_cpu_kernel);
}

#if defined(AMDNN_WITH_CUDA)
TORCH_LIBRARY_IMPL(amdnn, CUDA, m) {
  m.impl("conv2d", &conv2d_cuda_kernel);
  m.impl("conv2d_backward_input", &conv2d_backward_input_cuda_kernel);
  m.impl("conv2d_backward_filter", &conv2d_backward_filter_cuda_kernel);
  m.impl("matmul", &matmul_cuda_kernel);
  m.impl("int_conv2d", &int_conv2d_cuda_kernel);
  m.impl("quantise", &quantise_cuda_kernel);
  m.impl("finite_range", &finite_range_cuda_kernel);
}
#endif

}  // namespace amdnn
