// Single-thread rate of the CPU GEMM (ops/cc/gemm_cpu.cc) per mode, without TensorFlow: the steady number behind
// docs/performance.md's "GEMM rate" columns. Built and run by bench/gemm_rate.py for one x86-64 level at a time.
//
// Usage: gemm_rate MODE M N K REPEATS [TABLE_FILE]  (MODE as the ops take it; "table" reads TABLE_FILE)
// Operands are random normal (every product on the fast path). The result is first checked bit for bit against
// product<M>() of multiplier.h summed in k order, then timed: best of REPEATS, in Gproducts/s (M * N * K / s).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "../ops/cc/gemm.h"
#include "../ops/cc/multiplier_setup.h"

namespace {

template <amdnn::Mode M>
float reference_sum(const amdnn::Multiplier& mult, const float* a, const float* b, int64_t n, int64_t k, int64_t i,
                    int64_t j) {
  float acc = 0.0f;
  for (int64_t kk = 0; kk < k; ++kk) acc += amdnn::product<M>(a[i * k + kk], b[kk * n + j], mult.table7.data());
  return acc;
}

float reference(const amdnn::Multiplier& mult, const float* a, const float* b, int64_t n, int64_t k, int64_t i,
                int64_t j) {
  return amdnn::dispatch_mode(
      mult.mode, [&](auto mode) { return reference_sum<decltype(mode)::value>(mult, a, b, n, k, i, j); },
      [] { return 0.0f; });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s MODE M N K REPEATS [TABLE_FILE]\n", argv[0]);
    return 2;
  }
  amdnn::Mode mode;
  if (!amdnn::parse_mode(argv[1], &mode)) {
    std::fprintf(stderr, "unknown mode %s; valid: %s\n", argv[1], amdnn::valid_mode_names().c_str());
    return 2;
  }
  const int64_t m = std::stoll(argv[2]), n = std::stoll(argv[3]), k = std::stoll(argv[4]);
  const int repeats = std::stoi(argv[5]);
  std::vector<uint8_t> table;
  if (argc > 6) {
    std::ifstream file(argv[6], std::ios::binary);
    table.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  }
  amdnn::Multiplier mult;
  const std::string error = amdnn::make_multiplier(mode, table.data(), static_cast<int64_t>(table.size()), &mult);
  if (!error.empty()) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 2;
  }
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> a(m * k), b(k * n), c(m * n);
  for (float& v : a) v = normal(rng);
  for (float& v : b) v = normal(rng);
  const amdnn::DenseSource a_source(k), b_source(n);
  const amdnn::GemmOperand ga{&a_source, a.data()}, gb{&b_source, b.data()};
  const bool fast = amdnn::fast_path_is_exact(mode, amdnn::summarize_operand(a.data(), m * k),
                                              amdnn::summarize_operand(b.data(), k * n));
  auto run = [&] { amdnn::approximate_gemm(mult, ga, gb, m, n, k, c.data(), n, fast, amdnn::run_serially, 1); };

  run();
  // Every 7th row and column (all of them for small sizes): the reference is ~50x slower than the kernel.
  const int64_t step = m * n > 65536 ? 7 : 1;
  int64_t mismatches = 0;
  for (int64_t i = 0; i < m; i += step)
    for (int64_t j = 0; j < n; j += step)
      if (amdnn::bits_of(reference(mult, a.data(), b.data(), n, k, i, j)) != amdnn::bits_of(c[i * n + j])) ++mismatches;
  if (mismatches != 0) {
    std::printf("%s %s MISMATCH: %lld outputs differ from the reference\n", amdnn::cpu_kernel_level(), argv[1],
                static_cast<long long>(mismatches));
    return 1;
  }
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const amdnn::PathCounts counts = amdnn::path_counts();
  std::printf("%s\t%s\t%.2f Gproducts/s\t(generic products: %lld)\n", amdnn::cpu_kernel_level(), argv[1],
              static_cast<double>(m * n * k) / best * 1e-9, static_cast<long long>(counts.generic_products));
  return 0;
}
