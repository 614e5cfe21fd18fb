// The integer modes' forward op on the CPU (integer_conv.h): table products, exact int32 sums, rescale.
//
// Work is split by blocks of output pixels. A block's patches are copied once as bytes (taps outside the input hold
// the zero point's byte), with the sum of each patch's code values; the weights are copied once per call into rows
// of k padded to a whole number of vectors (the padding channels' results are never stored). Then, for a pair of
// pixels and a group of channels, one pass over k keeps the int32 sums in registers: at tap k the two pixels' codes
// select two rows of the table (a * 256), the weights' bytes of the group index into them. On x86-64 the look-ups
// are the AVX2 (8 lanes) or AVX-512 (16 lanes) 32-bit gathers from the int32 table (256 KB, L2-resident); elsewhere
// the generic loop does the same sums one product at a time. Integer sums do not depend on their order, so every
// layer gives the same bits; the zero-point terms and the rescale are the epilogue, once per output.
#include <algorithm>
#include <cstring>
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
constexpr int64_t kGroupVectors = 4;  // channels per pass: 4 vectors (32 or 64), 2 pixels: 8 accumulators
constexpr int64_t kBlockPixels = 16;  // pixels per task: their patches (16 x K bytes) stay in L1/L2

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

// sums[j * width + v] (j < pixels <= 2) = sum over k of table[patch_j[k] * 256 + w[k * stride + v]], v < width.
template <int64_t kVectors>
void table_sums(const uint8_t* const* patches, int pixels, int64_t taps, const uint8_t* w, int64_t stride,
                const int32_t* table, int32_t* sums) {
  constexpr int64_t width = kVectors * kLanes;
#if defined(__AVX512F__) && defined(__AVX512BW__)
  __m512i acc0[kVectors], acc1[kVectors];
  for (int64_t v = 0; v < kVectors; ++v) acc0[v] = acc1[v] = _mm512_setzero_si512();
  const uint8_t* p0 = patches[0];
  const uint8_t* p1 = patches[pixels > 1 ? 1 : 0];
  for (int64_t k = 0; k < taps; ++k) {
    const __m512i row0 = _mm512_set1_epi32(static_cast<int32_t>(p0[k]) << 8);
    const __m512i row1 = _mm512_set1_epi32(static_cast<int32_t>(p1[k]) << 8);
    const uint8_t* wk = w + k * stride;
    for (int64_t v = 0; v < kVectors; ++v) {
      const __m512i col = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wk + v * kLanes)));
      acc0[v] = _mm512_add_epi32(acc0[v], _mm512_i32gather_epi32(_mm512_add_epi32(row0, col), table, 4));
      acc1[v] = _mm512_add_epi32(acc1[v], _mm512_i32gather_epi32(_mm512_add_epi32(row1, col), table, 4));
    }
  }
  for (int64_t v = 0; v < kVectors; ++v) {
    _mm512_storeu_si512(sums + v * kLanes, acc0[v]);
    _mm512_storeu_si512(sums + width + v * kLanes, acc1[v]);
  }
#elif defined(__AVX2__)
  __m256i acc0[kVectors], acc1[kVectors];
  for (int64_t v = 0; v < kVectors; ++v) acc0[v] = acc1[v] = _mm256_setzero_si256();
  const uint8_t* p0 = patches[0];
  const uint8_t* p1 = patches[pixels > 1 ? 1 : 0];
  for (int64_t k = 0; k < taps; ++k) {
    const __m256i row0 = _mm256_set1_epi32(static_cast<int32_t>(p0[k]) << 8);
    const __m256i row1 = _mm256_set1_epi32(static_cast<int32_t>(p1[k]) << 8);
    const uint8_t* wk = w + k * stride;
    for (int64_t v = 0; v < kVectors; ++v) {
      const __m256i col = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(wk + v * kLanes)));
      acc0[v] = _mm256_add_epi32(acc0[v], _mm256_i32gather_epi32(table, _mm256_add_epi32(row0, col), 4));
      acc1[v] = _mm256_add_epi32(acc1[v], _mm256_i32gather_epi32(table, _mm256_add_epi32(row1, col), 4));
    }
  }
  for (int64_t v = 0; v < kVectors; ++v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + v * kLanes), acc0[v]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + width + v * kLanes), acc1[v]);
  }
#else
  std::fill(sums, sums + 2 * width, 0);
  for (int j = 0; j < pixels; ++j) {
    int32_t* out = sums + j * width;
    for (int64_t k = 0; k < taps; ++k) {
      const int32_t* row = table + (static_cast<int32_t>(patches[j][k]) << 8);
      const uint8_t* wk = w + k * stride;
      for (int64_t v = 0; v < width; ++v) out[v] += row[wk[v]];
    }
  }
#endif
}

using TableSums = void (*)(const uint8_t* const*, int, int64_t, const uint8_t*, int64_t, const int32_t*, int32_t*);
constexpr TableSums kTableSums[kGroupVectors] = {table_sums<1>, table_sums<2>, table_sums<3>, table_sums<4>};

}  // namespace

const char* int_conv2d_cpu_level() { return kLevel; }

void int_conv2d_cpu(const ConvGeometry& g, const uint8_t* x, const uint8_t* w, const IntConvArgs& args, float* y,
                    const ParallelFor& parallel_for) {
  const int64_t taps = g.patch_size(), channels = g.out_c, pixels = g.out_pixels();
  if (pixels == 0 || channels == 0) return;
  const bool signed_codes = args.signed_codes;
  const int32_t zero_a = args.zero_a[0];
  const uint8_t fill_byte = static_cast<uint8_t>(zero_a & 255);

  // The weights by rows of k, padded to whole vectors with byte 0 (a valid index: its sums are never stored), and
  // each channel's sum of code values.
  const int64_t stride = (channels + kLanes - 1) / kLanes * kLanes;
  std::vector<uint8_t> packed(static_cast<size_t>(taps * stride + kLanes), 0);
  std::vector<int64_t> weight_sums(static_cast<size_t>(channels), 0);
  for (int64_t k = 0; k < taps; ++k) {
    std::memcpy(packed.data() + k * stride, w + k * channels, channels);
    for (int64_t c = 0; c < channels; ++c) weight_sums[c] += code_value(w[k * channels + c], signed_codes);
  }
  // The constant part of each channel's zero-point terms: K z_a z_w[c] - z_a sum_k w_kc (int64: |.| < 2^41).
  std::vector<int64_t> offsets(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c)
    offsets[c] = taps * static_cast<int64_t>(zero_a) * args.zero_w[c] - static_cast<int64_t>(zero_a) * weight_sums[c];

  const int64_t blocks = (pixels + kBlockPixels - 1) / kBlockPixels;
  const int64_t group = kGroupVectors * kLanes;
  auto work = [&](int64_t begin, int64_t end) {
    std::vector<uint8_t> patches(static_cast<size_t>(kBlockPixels * taps));
    std::vector<int64_t> patch_sums(kBlockPixels);
    std::vector<int32_t> sums(static_cast<size_t>(2 * group));
    for (int64_t block = begin; block < end; ++block) {
      const int64_t first = block * kBlockPixels, count = std::min(kBlockPixels, pixels - first);
      for (int64_t i = 0; i < count; ++i)
        patch_sums[i] = load_patch(g, x, first + i, fill_byte, zero_a, signed_codes, patches.data() + i * taps);
      for (int64_t c0 = 0; c0 < channels; c0 += group) {
        const int64_t vectors = std::min(kGroupVectors, (channels - c0 + kLanes - 1) / kLanes);
        const int64_t width = vectors * kLanes, valid = std::min(group, channels - c0);
        for (int64_t i = 0; i < count; i += 2) {
          const int pair = count - i > 1 ? 2 : 1;
          const uint8_t* pair_patches[2] = {patches.data() + i * taps, patches.data() + (i + pair - 1) * taps};
          kTableSums[vectors - 1](pair_patches, pair, taps, packed.data() + c0, stride, args.table, sums.data());
          for (int j = 0; j < pair; ++j) {
            float* out = y + (first + i + j) * channels + c0;
            const int64_t a_sum = patch_sums[i + j];
            for (int64_t v = 0; v < valid; ++v) {
              const int64_t c = c0 + v;
              const int64_t acc = static_cast<int64_t>(sums[j * width + v]) - args.zero_w[c] * a_sum + offsets[c];
              out[v] = static_cast<float>(acc) * args.rescale[c];  // one rounding from int64, one product
            }
          }
        }
      }
    }
  };
  parallel_for(blocks, kBlockPixels * taps * channels * 4, work);
}

}  // namespace amdnn
