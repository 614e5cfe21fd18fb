// Each conv op of the CUDA core alone, per shape: the forward, input gradient and filter gradient of the seven
// ResNet-18 CIFAR shapes of bench/gpu_benchmark.py (batch 128, 3x3, padding 1), through the launch functions of
// gemm_cuda.h (split-K passes included, no torch, no layout copies), with a hash of each output's bits. It shows
// where the benchmark's time goes, op by op, and which ops run below the kernels' best rate (docs/performance.md,
// "Per op"). Not the benchmark of record (bench/gpu_benchmark.py, against cuDNN, is).
//
//     F="-arch=sm_90 -O3 -fmad=false --expt-relaxed-constexpr -std=c++17 -I ops/cc"   # the binding's flags
//     for f in bench/gpu_conv_ops.cu ops/cc/gemm_cuda*.cu; do nvcc $F -c $f -o /tmp/$(basename $f .cu).o & done; wait
//     nvcc -arch=sm_90 -o /tmp/conv_ops /tmp/gpu_conv_ops.o /tmp/gemm_cuda*.o && /tmp/conv_ops [am16,lut,acc32,mit16]
//
// (~2.5 minutes on 2 cores.) Times: median of 9 spans of 10 back-to-back calls (CUDA events). Inputs as the
// benchmark's: x and dy standard normal, w scaled by sqrt(2 / fan-in).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gemm_cuda.h"
#include "gpu_bench.cuh"
#include "multiplier.h"

using namespace amdnn;
using namespace amdnn::gpu;
using amdnn_bench::bits_hash;
using amdnn_bench::to_device;

namespace {

float near_normal(uint32_t& s) {  // a sum of 4 uniforms, scaled to unit variance
  float t = 0;
  for (int i = 0; i < 4; ++i) {
    s = s * 1664525u + 1013904223u;
    t += (s >> 8) / 16777216.0f;
  }
  return (t - 2.0f) * 1.732f;
}

}  // namespace

int main(int argc, char** argv) {
  uint8_t* const table7 = amdnn_bench::device_acc16_table();  // lut runs acc16's table (ACC_7)
  const int shapes[7][4] = {{32, 64, 64, 1}, {32, 64, 128, 2}, {16, 128, 128, 1}, {16, 128, 256, 2},
                            {8, 256, 256, 1}, {8, 256, 512, 2},  {4, 512, 512, 1}};  // size, in, out, stride
  struct Named {
    const char* name;
    Mode mode;
  };
  const Named modes[] = {
      {"am16", Mode::kAm16}, {"lut", Mode::kTable}, {"acc32", Mode::kAcc32}, {"mit16", Mode::kMit16}};
  const char* only = argc > 1 ? argv[1] : "am16,lut,acc32,mit16";
  bool failed = false;
  for (const Named& named : modes) {
    if (!strstr(only, named.name)) continue;
    double sum_f = 0, sum_x = 0, sum_w = 0, sum_products = 0;
    for (const auto& shape : shapes) {
      const int size = shape[0], cin = shape[1], cout = shape[2], stride = shape[3], out = (size + stride - 1) / stride;
      const ConvGeometry g{128, size, size, cin, 3, 3, cout, stride, stride, 1, 1, 1, 1, out, out};
      const size_t nx = 128ull * size * size * cin, nw = 9ull * cin * cout, ny = 128ull * out * out * cout;
      std::vector<float> hx(nx), hw(nw), hdy(ny);
      uint32_t seed = 12345;
      for (float& v : hx) v = near_normal(seed);
      for (float& v : hw) v = near_normal(seed) * std::sqrt(2.0f / (9 * cin));
      for (float& v : hdy) v = near_normal(seed);
      float *x = to_device(hx), *w = to_device(hw), *dy = to_device(hdy), *y, *dx, *dw;
      cudaMalloc(&y, ny * 4);
      cudaMalloc(&dx, nx * 4);
      cudaMalloc(&dw, nw * 4);
      void* workspace;
      cudaMalloc(&workspace, std::max({conv2d_workspace_bytes(g), conv2d_backprop_input_workspace_bytes(g),
                                       conv2d_backprop_filter_workspace_bytes(g)}) + 16);
      const GpuMultiplier mult{named.mode, table7};
      LaunchStatus status;
      auto checked = [&](LaunchStatus s) { if (!s.ok) status = s; };
      auto median_ms = [](auto call) { return amdnn_bench::median_ms(call, 9, 10); };
      const float tf = median_ms([&] { checked(conv2d(mult, g, x, w, y, workspace, nullptr)); });
      const float tx = median_ms([&] { checked(conv2d_backprop_input(mult, g, w, dy, dx, workspace, nullptr)); });
      const float tw = median_ms([&] { checked(conv2d_backprop_filter(mult, g, x, dy, dw, workspace, nullptr)); });
      const cudaError_t error = cudaDeviceSynchronize();
      if (!status.ok || error != cudaSuccess) {
        printf("%s %d/%d/%d/%d: %s\n", named.name, size, cin, cout, stride,
               status.ok ? cudaGetErrorString(error) : status.what);
        failed = true;
      }
      const double products = double(ny) * 9 * cin;  // each op's
      printf("%-6s %2d/%3d/%3d/%d  fwd %6.3f ms (%4.2f T/s)  dx %6.3f (%4.2f)  dw %6.3f (%4.2f)  sum %6.3f  "
             "hash %016llx %016llx %016llx\n",
             named.name, size, cin, cout, stride, tf, products / tf / 1e9, tx, products / tx / 1e9, tw,
             products / tw / 1e9, tf + tx + tw, static_cast<unsigned long long>(bits_hash(y, ny)),
             static_cast<unsigned long long>(bits_hash(dx, nx)), static_cast<unsigned long long>(bits_hash(dw, nw)));
      sum_f += tf;
      sum_x += tx;
      sum_w += tw;
      sum_products += products;
      for (void* p : {static_cast<void*>(x), static_cast<void*>(w), static_cast<void*>(dy), static_cast<void*>(y),
                      static_cast<void*>(dx), static_cast<void*>(dw), workspace})
        cudaFree(p);
    }
    printf("%-6s total  fwd %6.3f ms  dx %6.3f  dw %6.3f  sum %6.3f  (%4.2f T products/s)\n", named.name, sum_f, sum_x,
           sum_w, sum_f + sum_x + sum_w, 3 * sum_products / (sum_f + sum_x + sum_w) / 1e9);
  }
  return failed ? 1 : 0;
}
