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
// layer's, 80 % of an MNIST image's) is what counts. At AVX-512 a circuit's table (its differences D within 16 bits)
// is looked up by permutes of the tap's row held in registers instead (int_conv2d_permute): 3.3-3.6x the gathers'
// rate with VBMI, 1.2-2.5x without, on 16 cores of a Xeon. An exact table (the int8 / uint8 modes without a
// circuit, found by comparing the table with the codes' products at each call, ~20 us) takes integer multiply-adds
// instead on AVX2 and AVX-512 (vpmaddwd): 4 pixels x 16 (AVX2) or 32 (AVX-512) channels in registers, every tap,
// 16 or 32 products an instruction, which took the exact modes' forward from ~11x oneDNN's fp32 to 1.3-2.9x on the
// convs here. Integer sums do not depend on their order, so every path gives the same bits; the zero-point terms and
// the rescale are the epilogue, once per output.
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
#if defined(__AVX512VBMI__)
constexpr const char* kLevel = "avx512-vbmi";
#else
constexpr const char* kLevel = "avx512";
#endif
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

#if defined(__AVX512F__) && defined(__AVX512BW__)
// The look-ups by permutes (AVX-512), for a table whose differences D[a, w] (above) span at most 65535, as the
// circuits' do (a multiplier's row at the zero point is small: 0 for a ReLU layer's uint8 codes or symmetric int8
// ones). Row a of D - lowest (0..65535, 512 bytes) stays in eight vector registers while a pixel's nonzero tap of
// code a runs over 128 channels, whose weight codes index it by permutes:
// - with VBMI, the row as two 256-byte planes (its low and its high bytes); per 64 channels four vpermi2b (two
//   128-entry halves a plane, chosen by the weight's top bit), the two planes unpacked to words: ~17 instructions
//   for 64 products;
// - without, the row as 256 words; per 32 channels four vpermi2w (64 words each), chosen by the weight's bits 6 and
//   7: ~13 instructions (of more micro-ops: vpermi2w is three) for 32 products;
// where the gathers load every product on its own (16 a gather). The words are split into even and odd dwords and
// summed; the weights' channels are ordered so that accumulator dwords come out in channel order. The sum of
// D - lowest over a pixel's count taps is < 2^31 (count <= kIntMaxTaps), and adding lowest x count in wrapping int32
// arithmetic gives the sum of D: the same integer as the other paths.
#if defined(__AVX512VBMI__)
using PermuteWeight = uint8_t;             // a weight code as the byte permutes' index
constexpr int64_t kPermuteChannels = 64;   // channels a vector of weight codes holds
#else
using PermuteWeight = uint16_t;            // a weight code as the word permutes' index
constexpr int64_t kPermuteChannels = 32;
#endif
constexpr int64_t kPermutePass = 128;      // channels a pass over a pixel's taps (8 int32 accumulators)
constexpr int64_t kPermuteRowBytes = 512;  // a row of D - lowest
constexpr int64_t kPermuteSlack = 16;      // tap lists are stored whole vectors at a time

// The channel (of a vector's kPermuteChannels) whose weight sits at element i of the vector. With VBMI, unpacking
// the looked-up bytes to words (bytes 16L..16L+7 of 128-bit lane L to words_a, 16L+8..16L+15 to words_b) and the
// words to even and odd dwords puts byte 16L + 8h + 2j + o in dword 4L + j of accumulator 2h + o; without, word
// 2d + o goes to dword d of accumulator o. Either order makes accumulator q's dword d channel 16q + d.
constexpr int64_t permute_channel(int64_t i) {
#if defined(__AVX512VBMI__)
  const int64_t lane = i >> 4, r = i & 15;
  return 16 * (2 * (r >> 3) + (r & 1)) + 4 * lane + ((r & 7) >> 1);
#else
  return 16 * (i & 1) + (i >> 1);
#endif
}

// Row a's 512 bytes for entries v[b] = D[a, b] - lowest: VBMI's planes, else little-endian words.
void store_permute_row(const uint32_t* v, uint8_t* row) {
  for (int64_t b = 0; b < 256; ++b) {
#if defined(__AVX512VBMI__)
    row[b] = static_cast<uint8_t>(v[b] & 255);
    row[256 + b] = static_cast<uint8_t>(v[b] >> 8);
#else
    row[2 * b] = static_cast<uint8_t>(v[b] & 255);
    row[2 * b + 1] = static_cast<uint8_t>(v[b] >> 8);
#endif
  }
}

// A 64-byte aligned buffer of `count` zero values.
template <class T>
struct AlignedBuffer {
  explicit AlignedBuffer(size_t count) : storage(count * sizeof(T) + 64, 0) {}
  T* data() {
    const uintptr_t at = reinterpret_cast<uintptr_t>(storage.data());
    return reinterpret_cast<T*>(storage.data() + ((64 - at % 64) % 64));
  }
  std::vector<uint8_t> storage;
};

// Lists the taps of a patch whose byte is not the zero point's: rows[j] = its code x kPermuteRowBytes, taps[j] = its
// index k, in k order. Returns their count; rows and taps hold taps + kPermuteSlack entries.
int64_t nonzero_taps(const uint8_t* patch, int64_t taps, uint8_t fill_byte, int32_t* rows, int32_t* nonzero) {
  const __m128i fill = _mm_set1_epi8(static_cast<char>(fill_byte));
  const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  int64_t count = 0;
  for (int64_t k = 0; k < taps; k += 16) {
    const __mmask16 valid = taps - k >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (taps - k)) - 1);
    const __m128i bytes = _mm_maskz_loadu_epi8(valid, patch + k);
    const __mmask16 keep = _mm_mask_cmpneq_epi8_mask(valid, bytes, fill);
    const __m512i row = _mm512_slli_epi32(_mm512_cvtepu8_epi32(bytes), 9);  // x kPermuteRowBytes
    const __m512i tap = _mm512_add_epi32(lanes, _mm512_set1_epi32(static_cast<int32_t>(k)));
    _mm512_storeu_si512(rows + count, _mm512_maskz_compress_epi32(keep, row));
    _mm512_storeu_si512(nonzero + count, _mm512_maskz_compress_epi32(keep, tap));
    count += __builtin_popcount(keep);
  }
  return count;
}
static_assert(kPermuteRowBytes == 1 << 9, "nonzero_taps shifts by 9");

// sums[kPermuteChannels g + c] (g < kVectors) = sum over j < count of the 16-bit entry of row rows[j] at the weight
// of channel c of vector g of tap taps[j] (w: taps' rows of `stride` weights, each vector in permute_channel order).
template <int64_t kVectors>
void permute_sums(const int32_t* rows, const int32_t* taps, int64_t count, const PermuteWeight* w, int64_t stride,
                  const uint8_t* planes, int32_t* sums) {
  constexpr int kAccumulators = kPermuteChannels / 16;
  const __m512i low_words = _mm512_set1_epi32(0xFFFF);
  __m512i acc[kVectors][kAccumulators];
  for (int64_t g = 0; g < kVectors; ++g)
    for (int q = 0; q < kAccumulators; ++q) acc[g][q] = _mm512_setzero_si512();
  for (int64_t j = 0; j < count; ++j) {
    const uint8_t* row = planes + rows[j];
    __m512i t[8];
    for (int i = 0; i < 8; ++i) t[i] = _mm512_load_si512(row + 64 * i);
    const PermuteWeight* wk = w + taps[j] * stride;
    for (int64_t g = 0; g < kVectors; ++g) {
      const __m512i index = _mm512_load_si512(wk + g * kPermuteChannels);
#if defined(__AVX512VBMI__)
      const __mmask64 upper = _mm512_movepi8_mask(index);  // entries 128..255: the second half of each plane
      const __m512i lo = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(t[0], index, t[1]),
                                                _mm512_permutex2var_epi8(t[2], index, t[3]));
      const __m512i hi = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(t[4], index, t[5]),
                                                _mm512_permutex2var_epi8(t[6], index, t[7]));
      const __m512i words[2] = {_mm512_unpacklo_epi8(lo, hi), _mm512_unpackhi_epi8(lo, hi)};
#else
      const __mmask32 bit6 = _mm512_test_epi16_mask(index, _mm512_set1_epi16(64));
      const __mmask32 bit7 = _mm512_test_epi16_mask(index, _mm512_set1_epi16(128));
      const __m512i lo = _mm512_mask_blend_epi16(bit6, _mm512_permutex2var_epi16(t[0], index, t[1]),
                                                 _mm512_permutex2var_epi16(t[2], index, t[3]));
      const __m512i hi = _mm512_mask_blend_epi16(bit6, _mm512_permutex2var_epi16(t[4], index, t[5]),
                                                 _mm512_permutex2var_epi16(t[6], index, t[7]));
      const __m512i words[1] = {_mm512_mask_blend_epi16(bit7, lo, hi)};
#endif
      for (int h = 0; h < kAccumulators / 2; ++h) {
        acc[g][2 * h] = _mm512_add_epi32(acc[g][2 * h], _mm512_and_si512(words[h], low_words));
        acc[g][2 * h + 1] = _mm512_add_epi32(acc[g][2 * h + 1], _mm512_srli_epi32(words[h], 16));
      }
    }
  }
  for (int64_t g = 0; g < kVectors; ++g)
    for (int q = 0; q < kAccumulators; ++q) _mm512_storeu_si512(sums + g * kPermuteChannels + 16 * q, acc[g][q]);
}

template <int64_t... kVectors>
constexpr auto permute_sums_by_width(std::integer_sequence<int64_t, kVectors...>) {
  return std::array<decltype(&permute_sums<1>), sizeof...(kVectors)>{permute_sums<kVectors + 1>...};
}
constexpr auto kPermuteSums = permute_sums_by_width(
    std::make_integer_sequence<int64_t, kPermutePass / kPermuteChannels>());

// The look-up path by permutes: per pixel, its nonzero taps listed, then per 128 channels (or the rest) one
// permute_sums pass over them; the sums corrected by lowest x count and stored.
void int_conv2d_permute(const ConvGeometry& g, const uint8_t* x, const uint8_t* w, const IntConvArgs& args,
                        const int64_t* offsets, const int32_t* differences, int32_t lowest, float* y,
                        const ParallelFor& parallel_for) {
  const int64_t taps = g.patch_size(), channels = g.out_c, pixels = g.out_pixels();
  const bool signed_codes = args.signed_codes;
  const int32_t zero_a = args.zero_a[0];
  const uint8_t fill_byte = static_cast<uint8_t>(zero_a & 255);
  AlignedBuffer<uint8_t> plane_storage(static_cast<size_t>(256 * kPermuteRowBytes));
  uint8_t* planes = plane_storage.data();
  for (int64_t a = 0; a < 256; ++a) {
    uint32_t v[256];
    for (int64_t b = 0; b < 256; ++b) v[b] = static_cast<uint32_t>(differences[(a << 8) + b] - lowest);  // < 2^16
    store_permute_row(v, planes + a * kPermuteRowBytes);
  }
  // The weights by rows of k, each vector's channels in permute_channel order, padded with code 0.
  const int64_t stride = (channels + kPermuteChannels - 1) / kPermuteChannels * kPermuteChannels;
  AlignedBuffer<PermuteWeight> weight_storage(static_cast<size_t>(taps * stride));
  PermuteWeight* packed = weight_storage.data();
  for (int64_t k = 0; k < taps; ++k)
    for (int64_t i = 0; i < stride; ++i) {
      const int64_t c = i / kPermuteChannels * kPermuteChannels + permute_channel(i % kPermuteChannels);
      if (c < channels) packed[k * stride + i] = w[k * channels + c];
    }

  const int64_t blocks = (pixels + kBlockPixels - 1) / kBlockPixels;
  auto work = [&](int64_t begin, int64_t end) {
    std::vector<uint8_t> patch(static_cast<size_t>(taps));
    std::vector<int32_t> rows(static_cast<size_t>(taps + kPermuteSlack));
    std::vector<int32_t> nonzero(static_cast<size_t>(taps + kPermuteSlack));
    alignas(64) int32_t sums[kPermutePass];
    for (int64_t p = begin * kBlockPixels; p < std::min(end * kBlockPixels, pixels); ++p) {
      const int64_t a_sum = load_patch(g, x, p, fill_byte, zero_a, signed_codes, patch.data());
      const int64_t count = nonzero_taps(patch.data(), taps, fill_byte, rows.data(), nonzero.data());
      // sum of D = sum of (D - lowest) + lowest x count, in wrapping int32 (the true sum fits)
      const uint32_t correction = static_cast<uint32_t>(static_cast<int64_t>(lowest) * count);
      float* out = y + p * channels;
      for (int64_t c0 = 0; c0 < channels; c0 += kPermutePass) {
        const int64_t valid = std::min(kPermutePass, channels - c0);
        kPermuteSums[(valid + kPermuteChannels - 1) / kPermuteChannels - 1](rows.data(), nonzero.data(), count,
                                                                            packed + c0, stride, planes, sums);
        for (int64_t v = 0; v < valid; ++v)
          sums[v] = static_cast<int32_t>(static_cast<uint32_t>(sums[v]) + correction);
        store_outputs(args, sums, a_sum, offsets, c0, valid, out);
      }
    }
  };
  parallel_for(blocks, kBlockPixels * taps * channels, work);
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
#if defined(__AVX512F__) && defined(__AVX512BW__)
  const auto [lowest, highest] = std::minmax_element(differences.begin(), differences.end());
  if (*highest - *lowest <= 65535) {
    int_conv2d_permute(g, x, w, args, offsets.data(), differences.data(), *lowest, y, parallel_for);
    return;
  }
#endif

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
