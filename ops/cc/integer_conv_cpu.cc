// The integer modes' forward op on the CPU (integer_conv.h): table products, exact int32 sums, rescale.
//
// Work is split by blocks of output pixels. The weights are copied once per call into rows of k padded to a whole
// number of vectors (the padding channels' results are never stored). Each pixel's patch is copied as bytes (taps
// outside the input hold the zero point's byte), with the sum of its code values; the taps whose code is not the zero
// point's are listed, and one pass over them per group of 64 channels keeps the int32 sums in registers: the tap's
// code selects a row of the table (a * 256), the weights' bytes of the group index into it. On x86-64 the look-ups are
// the AVX2 (8 lanes) or AVX-512 (16 lanes) 32-bit gathers from an int32 table (256 KB, L2-resident); elsewhere the
// generic loop does the same sums one product at a time. Gathers bound it: about 1.9 products/ns on one core of the
// AVX2 EPYC here, against oneDNN's ~25 fp32 multiply-adds/ns, so skipping the zero point's taps (half of a ReLU
// layer's, 80 % of an MNIST image's) is what counts. An exact table (the int8 / uint8 modes without a circuit, found by
// comparing the table with the codes' products at each call, ~20 us) takes integer multiply-adds instead on AVX2 and
// AVX-512 (vpmaddwd): 4 pixels x 16 (AVX2) or 32 (AVX-512) channels in registers, every tap, 16 or 32 products an
// instruction, which took the exact modes' forward from ~11x oneDNN's fp32 to 1.3-2.9x on the convs here. Integer
// sums do not depend on their order, so every path gives the same bits; the zero-point terms and the rescale are the
// epilogue, once per output.
#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "integer_conv.h"

namespace amdnn {
namespace {

#if defined(__AVX512F__) && defined(__AVX512BW__)
constexpr int64_t kLanes = 16;
constexpr const char* kLevel = "avx512";
#elif defined(__AVX2__)
constexpr int64_t kLanes = 8;
constexpr const char* kLevel = "avx2";
#else
constexpr int64_t kLanes = 8;  // the generic loop keeps the same padded layout
constexpr const char* kLevel = "generic";
#endif
constexpr int64_t kGroupVectors = 64 / kLanes;  // channels per pass over a pixel's taps: 64, in 8 or 4 accumulators
constexpr int64_t kBlockPixels = 16;  // pixels per task of the thread pool

inline int32_t code_value(uint8_t byte, bool signed_codes) {
  return signed_codes ? static_cast<int32_t>(static_cast<int8_t>(byte)) : static_cast<int32_t>(byte);
}

// Copies output pixel p's patch (K bytes, HWC order like the filter's HWI) and returns the sum of its code values.
int64_t load_patch(const ConvGeometry& g, const uint8_t* x, int64_t p, uint8_t fill_byte, int32_t fill_value,
                   bool signed_codes, uint8_t* patch) {
  const int64_t n = p / (g.out_h * g.out_w), ho = (p / g.out_w) % g.out_h, wo = p % g.out_w;
  int64_t sum = 0;
  for (int64_t kh = 0; kh < g.filter_h; ++kh) {
    const int64_t hi = ho * g.stride_h + kh * g.dilation_h - g.pad_top;
    for (int64_t kw = 0; kw < g.filter_w; ++kw) {
      const int64_t wi = wo * g.stride_w + kw * g.dilation_w - g.pad_left;
      uint8_t* dst = patch + (kh * g.filter_w + kw) * g.in_c;
      if (hi < 0 || hi >= g.in_h || wi < 0 || wi >= g.in_w) {
        std::memset(dst, fill_byte, g.in_c);
        sum += static_cast<int64_t>(fill_value) * g.in_c;
        continue;
      }
      const uint8_t* src = x + ((n * g.in_h + hi) * g.in_w + wi) * g.in_c;
      std::memcpy(dst, src, g.in_c);
      int32_t part = 0;  // <= 255 x in_c: int32 for in_c < 2^23
      if (signed_codes) {
        for (int64_t c = 0; c < g.in_c; ++c) part += static_cast<int8_t>(src[c]);
      } else {
        for (int64_t c = 0; c < g.in_c; ++c) part += src[c];
      }
      sum += part;
    }
  }
  return sum;
}

// sums[v] (v < kVectors x kLanes) = sum over j < count of table[rows[j] + w[taps[j] * stride + v]]: one pixel's
// nonzero taps (rows[j] = its code at tap taps[j], times 256) against a group of channels.
template <int64_t kVectors>
void table_sums(const int32_t* rows, const int32_t* taps, int64_t count, const uint8_t* w, int64_t stride,
                const int32_t* table, int32_t* sums) {
#if defined(__AVX512F__) && defined(__AVX512BW__)
  __m512i acc[kVectors];
  for (int64_t v = 0; v < kVectors; ++v) acc[v] = _mm512_setzero_si512();
  for (int64_t j = 0; j < count; ++j) {
    const __m512i row = _mm512_set1_epi32(rows[j]);
    const uint8_t* wk = w + taps[j] * stride;
    for (int64_t v = 0; v < kVectors; ++v) {
      const __m512i col = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wk + v * kLanes)));
      acc[v] = _mm512_add_epi32(acc[v], _mm512_i32gather_epi32(_mm512_add_epi32(row, col), table, 4));
    }
  }
  for (int64_t v = 0; v < kVectors; ++v) _mm512_storeu_si512(sums + v * kLanes, acc[v]);
#elif defined(__AVX2__)
  __m256i acc[kVectors];
  for (int64_t v = 0; v < kVectors; ++v) acc[v] = _mm256_setzero_si256();
  for (int64_t j = 0; j < count; ++j) {
    const __m256i row = _mm256_set1_epi32(rows[j]);
    const uint8_t* wk = w + taps[j] * stride;
    for (int64_t v = 0; v < kVectors; ++v) {
      const __m256i col = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(wk + v * kLanes)));
      acc[v] = _mm256_add_epi32(acc[v], _mm256_i32gather_epi32(table, _mm256_add_epi32(row, col), 4));
    }
  }
  for (int64_t v = 0; v < kVectors; ++v) _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + v * kLanes), acc[v]);
#else
  std::fill(sums, sums + kVectors * kLanes, 0);
  for (int64_t j = 0; j < count; ++j) {
    const int32_t* row = table + rows[j];
    const uint8_t* wk = w + taps[j] * stride;
    for (int64_t v = 0; v < kVectors * kLanes; ++v) sums[v] += row[wk[v]];
  }
#endif
}

using TableSums = void (*)(const int32_t*, const int32_t*, int64_t, const uint8_t*, int64_t, const int32_t*,
                           int32_t*);
template <int64_t... kVectors>
constexpr std::array<TableSums, sizeof...(kVectors)> table_sums_by_width(std::integer_sequence<int64_t, kVectors...>) {
  return {table_sums<kVectors + 1>...};
}
constexpr auto kTableSums = table_sums_by_width(std::make_integer_sequence<int64_t, kGroupVectors>());

#if defined(__AVX2__)
// True when the table holds the exact products of the codes' values (the int8 / uint8 modes without a circuit).
bool is_exact_table(const int32_t* table, bool signed_codes) {
  for (int32_t a = 0; a < 256; ++a) {
    const int32_t value = code_value(static_cast<uint8_t>(a), signed_codes);
    for (int32_t b = 0; b < 256; ++b)
      if (table[(a << 8) + b] != value * code_value(static_cast<uint8_t>(b), signed_codes)) return false;
  }
  return true;
}

// The exact products by integer multiply-adds: vpmaddwd takes two taps of a pixel (its codes less the zero point,
// int16 pairs broadcast) against the same two taps of 8 (AVX2) or 16 (AVX-512) channels' weights (int16 pairs) and
// adds each channel's two products into an int32 lane: 16 or 32 products an instruction against 8 or 16 a gather. Every term is at most 255 x 255 in
// magnitude, so with K <= kIntMaxTaps every partial sum fits int32 and the sum is the table path's, exactly.
constexpr int64_t kExactPixels = 4;  // pixels sharing each load of the weights: 8 accumulators in registers
#if defined(__AVX512F__) && defined(__AVX512BW__)
constexpr int64_t kExactLanes = 16;  // int32 sums (channels) per vector
using ExactVector = __m512i;
inline ExactVector exact_load(const int16_t* p) { return _mm512_loadu_si512(p); }
inline ExactVector exact_broadcast(int32_t pair) { return _mm512_set1_epi32(pair); }
inline ExactVector exact_madd_add(ExactVector acc, ExactVector a, ExactVector w) {
  return _mm512_add_epi32(acc, _mm512_madd_epi16(a, w));
}
inline void exact_store(int32_t* p, ExactVector v) { _mm512_storeu_si512(p, v); }
#else
constexpr int64_t kExactLanes = 8;
using ExactVector = __m256i;
inline ExactVector exact_load(const int16_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline ExactVector exact_broadcast(int32_t pair) { return _mm256_set1_epi32(pair); }
inline ExactVector exact_madd_add(ExactVector acc, ExactVector a, ExactVector w) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(a, w));
}
inline void exact_store(int32_t* p, ExactVector v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
#endif
constexpr int64_t kExactChannels = 2 * kExactLanes;  // two vectors of channels: 16 (AVX2) or 32 (AVX-512)

// sums[p * kExactChannels + v] = sum over tap pairs j < pairs of madd(pairs_p[j], w[j]) for 4 pixels and the
// channels of two vectors; pixel p's taps (int16) start at taps + p * pixel_stride, the weights' pair j at
// w + j * w_stride (int16 units: each channel's two taps side by side).
void exact_sums(const int16_t* taps, int64_t pixel_stride, int64_t pairs, const int16_t* w, int64_t w_stride,
                int32_t* sums) {
  ExactVector acc[kExactPixels][2];
  for (auto& pixel : acc) {
    for (auto& vector : pixel) vector = ExactVector{};  // zero
  }
  for (int64_t j = 0; j < pairs; ++j) {
    const int16_t* wj = w + j * w_stride;
    const ExactVector w0 = exact_load(wj), w1 = exact_load(wj + 2 * kExactLanes);
    for (int64_t p = 0; p < kExactPixels; ++p) {
      int32_t pair;  // taps 2j and 2j + 1 as one 32-bit lane (memcpy: int16 storage read as int32 is undefined)
      std::memcpy(&pair, taps + p * pixel_stride + 2 * j, sizeof pair);
      const ExactVector a = exact_broadcast(pair);
      acc[p][0] = exact_madd_add(acc[p][0], a, w0);
      acc[p][1] = exact_madd_add(acc[p][1], a, w1);
    }
  }
  for (int64_t p = 0; p < kExactPixels; ++p) {
    exact_store(sums + p * kExactChannels, acc[p][0]);
    exact_store(sums + p * kExactChannels + kExactLanes, acc[p][1]);
  }
}
#endif

// Each channel's constant part of acc beside the sum over the taps not at the zero point: sum_k T[z_a, w_kc] (the
// zero point's taps, summed once) - z_a sum_k w_kc + K z_a z_w[c] (int64: |.| < 2^41).
std::vector<int64_t> channel_offsets(const ConvGeometry& g, const uint8_t* w, const IntConvArgs& args,
                                     const int32_t* zero_row) {
  const int64_t taps = g.patch_size(), channels = g.out_c;
  const int64_t zero_a = args.zero_a[0];
  std::vector<int64_t> offsets(static_cast<size_t>(channels), 0);
  for (int64_t k = 0; k < taps; ++k)
    for (int64_t c = 0; c < channels; ++c)
      offsets[c] += zero_row[w[k * channels + c]] - zero_a * code_value(w[k * channels + c], args.signed_codes);
  for (int64_t c = 0; c < channels; ++c) offsets[c] += taps * zero_a * args.zero_w[c];
  return offsets;
}

// y[p, c] from the sum over p's taps not at the zero point (sums), p's code sum and the channel's constant part.
inline void store_outputs(const IntConvArgs& args, const int32_t* sums, int64_t a_sum, const int64_t* offsets,
                          int64_t c0, int64_t count, float* out) {
  for (int64_t v = 0; v < count; ++v) {
    const int64_t c = c0 + v;
    const int64_t acc = static_cast<int64_t>(sums[v]) - args.zero_w[c] * a_sum + offsets[c];
    out[c] = static_cast<float>(acc) * args.rescale[c];  // one rounding from int64, one product
  }
}

#if defined(__AVX2__)
// The exact tables' path: per block of pixels, each pixel's taps as int16 pairs (code value - z_a: 0 at the zero
// point and in the padding), then per 16 (AVX2) or 32 (AVX-512) channels, 4 pixels at a time, exact_sums over all
// tap pairs.
void int_conv2d_exact(const ConvGeometry& g, const uint8_t* x, const uint8_t* w, const IntConvArgs& args,
                      const int64_t* offsets, float* y, const ParallelFor& parallel_for) {
  const int64_t taps = g.patch_size(), channels = g.out_c, pixels = g.out_pixels();
  const bool signed_codes = args.signed_codes;
  const int32_t zero_a = args.zero_a[0];
  const uint8_t fill_byte = static_cast<uint8_t>(zero_a & 255);
  const int64_t pairs = (taps + 1) / 2;
  const int64_t stride = (channels + kExactChannels - 1) / kExactChannels * kExactChannels;
  // Weights as [pair][channel][2] int16 values, padded with 0 (an odd K's last tap, channels past out_c).
  std::vector<int16_t> packed(static_cast<size_t>(pairs * stride * 2), 0);
  for (int64_t k = 0; k < taps; ++k)
    for (int64_t c = 0; c < channels; ++c)
      packed[((k / 2) * stride + c) * 2 + k % 2] = static_cast<int16_t>(code_value(w[k * channels + c],
                                                                                   signed_codes));
  const int64_t blocks = (pixels + kBlockPixels - 1) / kBlockPixels;
  static_assert(kBlockPixels % kExactPixels == 0, "a block is whole groups of pixels");
  auto work = [&](int64_t begin, int64_t end) {
    std::vector<uint8_t> patch(static_cast<size_t>(taps));
    std::vector<int16_t> tap_pairs(static_cast<size_t>(kBlockPixels * pairs * 2));
    std::vector<int64_t> a_sums(static_cast<size_t>(kBlockPixels));
    alignas(64) int32_t sums[kExactPixels * kExactChannels];
    for (int64_t block = begin; block < end; ++block) {
      const int64_t first = block * kBlockPixels, count = std::min(kBlockPixels, pixels - first);
      for (int64_t i = 0; i < kBlockPixels; ++i) {  // pixels past the end: all-zero pairs, results not stored
        int16_t* dst = tap_pairs.data() + i * pairs * 2;
        if (taps % 2 == 1) dst[taps] = 0;  // an odd K's last pair
        if (i >= count) {
          std::fill(dst, dst + 2 * pairs, int16_t{0});
          continue;
        }
        a_sums[i] = load_patch(g, x, first + i, fill_byte, zero_a, signed_codes, patch.data());
        for (int64_t k = 0; k < taps; ++k) dst[k] = static_cast<int16_t>(code_value(patch[k], signed_codes) - zero_a);
      }
      for (int64_t c0 = 0; c0 < channels; c0 += kExactChannels) {
        const int64_t valid = std::min(kExactChannels, channels - c0);
        for (int64_t i0 = 0; i0 < count; i0 += kExactPixels) {
          exact_sums(tap_pairs.data() + i0 * pairs * 2, pairs * 2, pairs, packed.data() + c0 * 2, stride * 2, sums);
          for (int64_t i = i0; i < std::min(i0 + kExactPixels, count); ++i)
            store_outputs(args, sums + (i - i0) * kExactChannels, a_sums[i], offsets, c0, valid,
                          y + (first + i) * channels);
        }
      }
    }
  };
  parallel_for(blocks, kBlockPixels * taps * channels / 4, work);
}
#endif

}  // namespace

const char* int_conv2d_cpu_level() { return kLevel; }

void int_conv2d_cpu(const ConvGeometry& g, const uint8_t* x, const uint8_t* w, const IntConvArgs& args, float* y,
                    const ParallelFor& parallel_for) {
  const int64_t taps = g.patch_size(), channels = g.out_c, pixels = g.out_pixels();
  if (pixels == 0 || channels == 0) return;
  const bool signed_codes = args.signed_codes;
  const int32_t zero_a = args.zero_a[0];
  const uint8_t fill_byte = static_cast<uint8_t>(zero_a & 255);
  const int32_t* zero_row = args.table + (static_cast<int32_t>(fill_byte) << 8);
  const std::vector<int64_t> offsets = channel_offsets(g, w, args, zero_row);
#if defined(__AVX2__)
  // The exact path reads z_a as the padding taps' value: only for a zero point that is a code of the kind (the
  // layers' always are; the table path indexes by z_a's byte, as the reference does, for any).
  if (code_value(fill_byte, signed_codes) == zero_a && is_exact_table(args.table, signed_codes)) {
    int_conv2d_exact(g, x, w, args, offsets.data(), y, parallel_for);
    return;
  }
#endif

  // Taps at the zero point are most of a ReLU network's (and all of the padding): their products are summed once per
  // channel (channel_offsets), and each pixel looks up only its other taps in D[a, w] = T[a, w] - T[z_a, w]
  // (|D| <= 65535 for either kind, so 2^15 of them still fit int32). Exact: the same integer acc.
  std::vector<int32_t> differences(static_cast<size_t>(kIntTableEntries));
  for (int64_t a = 0; a < 256; ++a)
    for (int64_t b = 0; b < 256; ++b) differences[(a << 8) + b] = args.table[(a << 8) + b] - zero_row[b];

  // The weights by rows of k, padded to whole vectors with byte 0 (a valid index: its sums are never stored).
  const int64_t stride = (channels + kLanes - 1) / kLanes * kLanes;
  std::vector<uint8_t> packed(static_cast<size_t>(taps * stride + kLanes), 0);
  for (int64_t k = 0; k < taps; ++k) std::memcpy(packed.data() + k * stride, w + k * channels, channels);

  const int64_t blocks = (pixels + kBlockPixels - 1) / kBlockPixels;
  const int64_t group = kGroupVectors * kLanes;
  auto work = [&](int64_t begin, int64_t end) {
    std::vector<uint8_t> patch(static_cast<size_t>(taps));
    std::vector<int32_t> rows(static_cast<size_t>(taps)), nonzero(static_cast<size_t>(taps));
    std::vector<int32_t> sums(static_cast<size_t>(group));
    for (int64_t p = begin * kBlockPixels; p < std::min(end * kBlockPixels, pixels); ++p) {
      const int64_t a_sum = load_patch(g, x, p, fill_byte, zero_a, signed_codes, patch.data());
      int64_t count = 0;
      for (int64_t k = 0; k < taps; ++k) {
        rows[count] = static_cast<int32_t>(patch[k]) << 8;
        nonzero[count] = static_cast<int32_t>(k);
        count += patch[k] != fill_byte;
      }
      float* out = y + p * channels;
      for (int64_t c0 = 0; c0 < channels; c0 += group) {
        const int64_t vectors = std::min(kGroupVectors, (channels - c0 + kLanes - 1) / kLanes);
        kTableSums[vectors - 1](rows.data(), nonzero.data(), count, packed.data() + c0, stride, differences.data(),
                                sums.data());
        store_outputs(args, sums.data(), a_sum, offsets.data(), c0, std::min(group, channels - c0), out);
      }
    }
  };
  parallel_for(blocks, kBlockPixels * taps * channels * 4, work);
}

}  // namespace amdnn
