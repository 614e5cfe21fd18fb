// GPU check of ops/cc/multiplier.h, the header the CPU kernels and the coming CUDA kernels share: every mode's
// product<M>() computed on the device must equal, bit for bit, the same function compiled for the host (which the
// CPU test suite checks against the numpy reference). Not part of CI (no GPU there): run with run_on_gpu.sh.
//
//   nvcc -O2 -std=c++17 -arch=sm_90 -I../../ops/cc multiplier_header_check.cu -o check && ./check
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "multiplier.h"

using amdnn::Mode;

#define CHECK_CUDA(call)                                                                     \
  do {                                                                                       \
    cudaError_t status = (call);                                                             \
    if (status != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(status)); \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)

template <Mode M>
__global__ void products(const float* a, const float* b, float* out, int n, const uint8_t* table) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = amdnn::product<M>(a[i], b[i], table);
}

bool same(float x, float y) {
  uint32_t ux, uy;
  std::memcpy(&ux, &x, 4);
  std::memcpy(&uy, &y, 4);
  if (x != x && y != y) return true;    // any NaN matches any NaN
  if (x == 0.0f && y == 0.0f) return true;  // signed zeros may differ (rule 4)
  return ux == uy;
}

template <Mode M>
int check(const char* name, const std::vector<float>& a, const std::vector<float>& b, const float* da,
          const float* db, float* dout, const uint8_t* dtable, const uint8_t* table) {
  const int n = static_cast<int>(a.size());
  CHECK_CUDA(cudaMemset(dout, 0xFF, n * sizeof(float)));  // poison: every element must be written
  products<M><<<(n + 255) / 256, 256>>>(da, db, dout, n, dtable);
  CHECK_CUDA(cudaGetLastError());
  std::vector<float> gpu(n);
  CHECK_CUDA(cudaMemcpy(gpu.data(), dout, n * sizeof(float), cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    const float host = amdnn::product<M>(a[i], b[i], table);
    if (!same(host, gpu[i]) && bad++ < 3)
      std::printf("  %s: %a x %a: host %a, device %a\n", name, a[i], b[i], host, gpu[i]);
  }
  std::printf("%-6s %d of %d products differ\n", name, bad, n);
  return bad;
}

int main() {
  // Random sign, every biased exponent, random mantissa; 2 % special values (zeros, subnormals, inf, NaN).
  const int n = 1 << 22;
  std::mt19937 rng(12345);
  const uint32_t specials[] = {0x0u, 0x80000000u, 0x1u, 0x807FFFFFu, 0x7F800000u, 0xFF800000u, 0x7FC00000u,
                               0x00800000u, 0x7F7FFFFFu};
  auto draw = [&]() {
    uint32_t u = rng();
    if (rng() % 50 == 0) u = specials[rng() % 9];
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  std::vector<float> a(n), b(n);
  for (int i = 0; i < n; ++i) a[i] = draw(), b[i] = draw();
  uint8_t table[amdnn::kTableSize];  // the am16 table, used as a lut table
  for (uint32_t fa = 0; fa < 128; ++fa)
    for (uint32_t fb = 0; fb < 128; ++fb) {
      const amdnn::MantissaProduct p = amdnn::mbm_mantissa(fa, fb, 7);
      table[(fa << 7) | fb] = static_cast<uint8_t>((p.carry << 7) | p.mantissa);
    }
  float *da, *db, *dout;
  uint8_t* dtable;
  CHECK_CUDA(cudaMalloc(&da, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&db, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dout, n * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&dtable, sizeof(table)));
  CHECK_CUDA(cudaMemcpy(da, a.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db, b.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dtable, table, sizeof(table), cudaMemcpyHostToDevice));
  int bad = 0;
#define AMDNN_CHECK_MODE(id, name, fn) bad += check<Mode::id>(name, a, b, da, db, dout, dtable, table);
  AMDNN_MODES(AMDNN_CHECK_MODE)
#undef AMDNN_CHECK_MODE
  std::printf(bad == 0 ? "ALL BIT-EXACT\n" : "MISMATCHES\n");
  return bad == 0 ? 0 : 1;
}
