// The integer modes' forward (ops/cc/integer_conv_cuda.cu) alone on the seven ResNet-18 CIFAR shapes of
// bench/gpu_benchmark.py (batch 128, 3x3, padding 1), through gpu::int_conv2d (no torch), with a hash of each
// output's bits: a kernel variant that must keep the bits shows it shape by shape, and its time without the binding.
//
//     F="-arch=sm_90 -O3 -fmad=false --expt-relaxed-constexpr -std=c++17 -I ops/cc"   # the binding's flags
//     nvcc $F -c bench/gpu_integer_ops.cu -o /tmp/io.o && nvcc $F -c ops/cc/integer_conv_cuda.cu -o /tmp/ic.o
//     nvcc -arch=sm_90 -o /tmp/integer_ops /tmp/io.o /tmp/ic.o && /tmp/integer_ops [signed|unsigned]
//
// Times: median of 9 spans of 10 back-to-back calls (CUDA events). Codes, table (int16 or uint16 range), zero points
// and rescales from a fixed generator, the same in every build.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "gemm_cuda.h"
#include "gpu_bench.cuh"
#include "integer_conv.h"

using namespace amdnn;

namespace {

uint32_t next(uint32_t& s) {
  s = s * 1664525u + 1013904223u;
  return s >> 8;
}

template <class T>
T* device_copy(const std::vector<T>& host) {
  T* device;
  cudaMalloc(&device, host.size() * sizeof(T));
  cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  return device;
}

}  // namespace

int main(int argc, char** argv) {
  const bool signed_codes = argc < 2 || std::strcmp(argv[1], "unsigned") != 0;
  const int shapes[7][4] = {{32, 64, 64, 1}, {32, 64, 128, 2}, {16, 128, 128, 1}, {16, 128, 256, 2},
                            {8, 256, 256, 1}, {8, 256, 512, 2}, {4, 512, 512, 1}};
  const int64_t batch = 128;
  uint32_t s = 12345;
  std::vector<int32_t> table(kIntTableEntries);
  for (int32_t& t : table) t = signed_codes ? static_cast<int32_t>(next(s) % 65536) - 32768 : next(s) % 65536;
  int32_t* table_d = device_copy(table);
  const int32_t zero_a = signed_codes ? -3 : 121;
  int32_t* zero_a_d = device_copy(std::vector<int32_t>{zero_a});
  float total = 0;
  double products = 0;
  std::printf("%s codes; shape (size/in/out/stride): ms, T products/s, output hash\n",
              signed_codes ? "signed" : "unsigned");
  for (const auto& shape : shapes) {
    const int64_t size = shape[0], in_c = shape[1], out_c = shape[2], stride = shape[3];
    const int64_t out = (size - 1) / stride + 1;
    const ConvGeometry g{batch, size, size, in_c, 3, 3, out_c, stride, stride, 1, 1, 1, 1, out, out};
    std::vector<uint8_t> x(batch * size * size * in_c), w(9 * in_c * out_c);
    for (uint8_t& v : x) v = static_cast<uint8_t>(next(s));
    for (uint8_t& v : w) v = static_cast<uint8_t>(next(s));
    std::vector<int32_t> zero_w(out_c);
    std::vector<float> rescale(out_c);
    for (int64_t c = 0; c < out_c; ++c) {
      zero_w[c] = signed_codes ? static_cast<int32_t>(next(s) % 256) - 128 : next(s) % 256;
      rescale[c] = 1e-6f * (1 + next(s) % 1000);
    }
    uint8_t *x_d = device_copy(x), *w_d = device_copy(w);
    int32_t* zero_w_d = device_copy(zero_w);
    float* rescale_d = device_copy(rescale);
    float* y;
    cudaMalloc(&y, g.out_pixels() * out_c * sizeof(float));
    IntConvArgs args;
    args.table = table_d;
    args.signed_codes = signed_codes;
    args.zero_a = zero_a_d;
    args.zero_w = zero_w_d;
    args.rescale = rescale_d;
    const gpu::LaunchStatus status = gpu::int_conv2d(g, x_d, w_d, args, y, nullptr);
    if (!status.ok) {
      std::printf("launch failed: %s\n", status.what);
      return 1;
    }
    const float ms = amdnn_bench::median_ms([&] { gpu::int_conv2d(g, x_d, w_d, args, y, nullptr); }, 9, 10);
    const double n = static_cast<double>(g.out_pixels()) * out_c * g.patch_size();
    const cudaError_t error = cudaDeviceSynchronize();
    std::printf("%lld/%lld/%lld/%lld: %.3f ms, %.2f T/s, %016llx%s\n", (long long)size, (long long)in_c,
                (long long)out_c, (long long)stride, ms, n / ms / 1e9,
                (unsigned long long)amdnn_bench::bits_hash(y, g.out_pixels() * out_c),
                error == cudaSuccess ? "" : cudaGetErrorString(error));
    total += ms;
    products += n;
    cudaFree(x_d), cudaFree(w_d), cudaFree(zero_w_d), cudaFree(rescale_d), cudaFree(y);
  }
  std::printf("all seven: %.3f ms, %.2f T products/s\n", total, products / total / 1e9);
  return 0;
}
