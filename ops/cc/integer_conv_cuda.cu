// The integer modes on the GPU: the forward conv (integer_conv.h's gpu::int_conv2d: 8-bit codes, every product an
// entry of a 256 x 256 table, exact integer sums, one rescale; bit for bit ops/modes/integer_reference.py) and, at
// the end, the quantiser that makes its codes (integer_quantise.h's gpu::quantise).
//
// The products are shared-memory lookups, and a warp's lookup is one wavefront only when its 32 lanes read 32
// different banks (or the same word). The table itself does not allow that: lanes holding 32 output channels of one
// pixel read 32 random columns of a 512-byte row of 16-bit entries (128 words in 32 banks), 2.8 wavefronts on
// random codes. So a block of 512 pixels x 64 output channels builds, for each tap k, the table's columns of its
// channels' weight codes turned into rows: R_k[a][p] = T[a][w_k,2p] | T[a][w_k,2p+1] << 16. A warp holds one pixel
// at a time in all its lanes, lane p the channel pair p, and reads row a_k of R_k: 128 bytes in 32 banks, one
// wavefront for 64 products (lut's byte table gives 32). Building R_k reads the 64 columns from the table in
// shared memory and writes them as rows, 32 + 32 KB (512 wavefronts) per tap, against 512 of the block's lookups.
// The rows of two taps share 256 bytes (R_k at k % 2 x 128), so a lookup's address a << 8 | k % 2 << 7 | lane << 2
// is one PRMT of the code's byte; with the two sums below, 4 instructions for 2 products. On an H200 (2026-11-28,
// bench/gpu_integer_ops.cu) the 7 ResNet-18 shapes run at 5.2 T products/s; without the builds (wrong sums) 8.5 T:
// the builds are 40 % of the time. Addresses of two ops (a << 7 of 16-bit offsets, then | lane) ran 4.2 T.
//
// The table in shared memory is TT[w][a], 16 bits an entry, biased to be unsigned (T + 32768 for signed codes, whose
// tables are int16; T for unsigned, uint16): 128 KB, loaded by each block from the int32 table. A lane sums the
// 32-bit words of two entries as they come, S = sum (u0 + u1 << 16) mod 2^32, and the high halves H = sum u1; then
// sum u0 = S - H << 16 (exact: below 2^31 for K <= 2^15). A table with an entry outside 16 bits (which no table
// file holds, but the op allows |T| <= 65535) runs a direct kernel instead, as do GPUs with less than 204 KB of
// shared memory a block (before the H100): right, and many times slower.
//
// Blocks that would leave the GPU half idle (ResNet-18's last two stages at batch 128: 32 and 64 tiles) cut K into
// slices whose partial sums, zero-point terms included, are added into y as int32 (y zeroed first) and rescaled by a
// second kernel: integer sums in any order give the same bits. Only for K <= kSplitMaxTaps, where the total fits.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <initializer_list>

#include "gemm_cuda.h"
#include "gemm_cuda_launch.cuh"
#include "integer_conv.h"
#include "integer_quantise.h"

namespace amdnn {
namespace gpu {
namespace {

constexpr int kWarps = 16;
constexpr int kThreads = 32 * kWarps;
constexpr int kWarpPixels = 32;
constexpr int kPixels = kWarps * kWarpPixels;  // a block's pixels: one staging thread each
constexpr int kChannels = 64;                  // a block's output channels: 32 lanes x a pair
constexpr int kChunk = 8;                      // taps staged at once (one 8-byte load where in_c % 8 == 0)
constexpr int kCodes = 256;
constexpr int kRowBytes = 2 * 2 * kChannels;   // row a of R_k and R_k+1 (even, odd k): 2 x 128 bytes
constexpr int kColumnBytes = 2 * kCodes;       // a column of the table, TT[w]
// Shared memory: the table, R_k of two taps (64 KB), and the staged taps' activation and weight codes.
constexpr int kTableAt = 0;
constexpr int kRAt = kTableAt + kCodes * kColumnBytes;
constexpr int kCodesAt = kRAt + kCodes * kRowBytes;                 // [2][kChunk][kPixels] bytes
constexpr int kWeightsAt = kCodesAt + 2 * kChunk * kPixels;         // [2][kChunk][kChannels] bytes
constexpr int kSumAAt = kWeightsAt + 2 * kChunk * kChannels;        // each pixel's sum of activation values
constexpr int kSumWAt = kSumAAt + 4 * kPixels;                      // each channel's sum of weight values
constexpr int kFlagAt = kSumWAt + 4 * kChannels;                    // set: the table does not fit 16 bits
constexpr int kSharedBytes = kFlagAt + 16;                          // 208,144 (an H100 block takes 227 KB)
// K of a split conv: |acc| < 2^31 needs K x (65535 + 3 x 255^2) < 2^31 (|T| <= 65535, codes and zero points <= 255).
constexpr int64_t kSplitMaxTaps = 8192;
constexpr int64_t kMinSplitTaps = 64;  // 64 taps take ~50 us (H200): its block's table load (256 KB) is a few
constexpr float kSmallestNormal = 1.17549435e-38f;

struct Params {
  const uint8_t* x;
  const uint8_t* w;
  const int32_t* table;
  const int32_t* zero_a;
  const int32_t* zero_w;
  const float* rescale;
  float* y;
  int64_t pixels;
  int out_c, taps, in_h, in_w, in_c, filter_w, out_w, out_hw;
  int stride_h, stride_w, dilation_h, dilation_w, pad_top, pad_left;
  int k_per_split;
  bool split;        // partial sums into y as int32 (finish_split rescales)
  bool wide_x;       // 8 codes a load: in_c % 8 == 0 and x 8-byte aligned
  bool wide_table;   // 16-byte table loads
  bool pair_stores;  // float2 stores: out_c even and y 8-byte aligned
};

template <bool kSigned>
__device__ __forceinline__ int value_of(uint32_t byte) {
  return kSigned ? static_cast<int>(static_cast<int8_t>(byte)) : static_cast<int>(byte & 255u);
}

// fl32(fl32(acc) x rescale), a result below 2^-126 flushed to +0 (integer_reference.fl32: round, then flush).
__device__ __forceinline__ float rescaled(float acc, float scale) {
  const float y = __fmul_rn(acc, scale);
  return fabsf(y) < kSmallestNormal ? 0.0f : y;
}

// An output channel's part of acc beside the table sum: acc = table_sum - zw sum_a + rest, rest = -za sum_w + K za zw
// (int64: exact for every K, code and zero point).
struct Channel {
  int zw;
  int64_t rest;
  float scale;
};

__device__ __forceinline__ Channel channel_of(const Params& p, int c, int sum_w, int taps, int za) {
  const int zw = __ldg(p.zero_w + c);
  return {zw, -static_cast<int64_t>(za) * sum_w + static_cast<int64_t>(taps) * za * zw, __ldg(p.rescale + c)};
}

__device__ __forceinline__ int64_t acc_of(const Channel& ch, int table_sum, int sum_a) {
  return table_sum - static_cast<int64_t>(ch.zw) * sum_a + ch.rest;
}

// Writes output `at`: y, or in a split conv its slice's acc added into y as int32 (mod 2^32: the total fits int32,
// so it comes out exact).
__device__ __forceinline__ void write_output(const Params& p, int64_t at, const Channel& ch, int64_t acc) {
  if (p.split)
    atomicAdd(reinterpret_cast<int*>(p.y) + at, static_cast<int>(static_cast<uint32_t>(acc)));
  else
    p.y[at] = rescaled(__ll2float_rn(acc), ch.scale);
}

// The input offset of tap (kh, kw, ci) of the patch at (ih0, iw0), or -1 for a padding tap.
__device__ __forceinline__ int64_t tap_offset(const Params& p, int ih0, int iw0, int kh, int kw, int ci) {
  const int ih = ih0 + kh * p.dilation_h, iw = iw0 + kw * p.dilation_w;
  if (ih < 0 || ih >= p.in_h || iw < 0 || iw >= p.in_w) return -1;
  return (static_cast<int64_t>(ih) * p.in_w + iw) * p.in_c + ci;
}

// The patch of output pixel `pixel`: its image's offset in x and its top-left input row and column.
struct Patch {
  int64_t image;
  int ih0, iw0;
};

__device__ __forceinline__ Patch patch_of(const Params& p, int64_t pixel) {
  const int64_t n = pixel / p.out_hw;
  const int r = static_cast<int>(pixel - n * p.out_hw), oh = r / p.out_w, ow = r - oh * p.out_w;
  return {n * p.in_h * p.in_w * p.in_c, oh * p.stride_h - p.pad_top, ow * p.stride_w - p.pad_left};
}

// A tap cursor (kh, kw, ci) moved along k without divisions.
struct Tap {
  int kh, kw, ci;
  __device__ __forceinline__ void advance(const Params& p, int by) {  // by <= in_c, or by == in_c's multiple 8 steps
    ci += by;
    if (ci >= p.in_c) {
      ci -= p.in_c;
      if (++kw == p.filter_w) {
        kw = 0;
        ++kh;
      }
    }
  }
};

__device__ __forceinline__ Tap tap_at(const Params& p, int k) {
  const int per_row = p.filter_w * p.in_c, kh = k / per_row, rest = k - kh * per_row;
  return {kh, rest / p.in_c, rest % p.in_c};
}

// The direct kernel's tile: each output's K products read from the int32 table in global memory, one by one.
template <bool kSigned>
__device__ __noinline__ void direct_tile(const Params& p, int64_t m0, int n0, int k_begin, int taps, int za) {
  for (int e = threadIdx.x; e < kPixels * kChannels; e += kThreads) {
    const int64_t pixel = m0 + e / kChannels;
    const int c = n0 + e % kChannels;
    if (pixel >= p.pixels || c >= p.out_c) continue;
    const Patch patch = patch_of(p, pixel);
    Tap tap = tap_at(p, k_begin);
    int table_sum = 0, sum_a = 0, sum_w = 0;
    for (int t = 0; t < taps; ++t, tap.advance(p, 1)) {
      const int64_t at = tap_offset(p, patch.ih0, patch.iw0, tap.kh, tap.kw, tap.ci);
      const uint32_t a = at < 0 ? static_cast<uint32_t>(za) & 255u : __ldg(p.x + patch.image + at);
      const uint32_t w = __ldg(p.w + static_cast<int64_t>(k_begin + t) * p.out_c + c);
      table_sum += __ldg(p.table + (a << 8 | w));
      sum_a += at < 0 ? za : value_of<kSigned>(a);
      sum_w += value_of<kSigned>(w);
    }
    const Channel ch = channel_of(p, c, sum_w, taps, za);
    write_output(p, pixel * p.out_c + c, ch, acc_of(ch, table_sum, sum_a));
  }
}

// TT[w][a] = T[a][w] + bias as uint16 (each word two codes a), from the int32 table; sets the flag if an entry does
// not fit. A warp's stores fill 32 consecutive words of one column.
template <bool kSigned>
__device__ __forceinline__ void load_table(const Params& p, unsigned char* smem) {
  constexpr uint32_t kBias = kSigned ? 32768u : 0u;
  uint32_t* tt = reinterpret_cast<uint32_t*>(smem + kTableAt);
  uint32_t outside = 0;
#pragma unroll 2
  for (int item = threadIdx.x; item < (kCodes / 2) * (kCodes / 8); item += kThreads) {
    const int pair = item % (kCodes / 2), group = item / (kCodes / 2);  // codes a 2 pair, 2 pair + 1; w 8 group..+7
    const int32_t* row = p.table + 2 * pair * kCodes + 8 * group;
    int v0[8], v1[8];
    if (p.wide_table) {
      const int4* r0 = reinterpret_cast<const int4*>(row);
      const int4* r1 = reinterpret_cast<const int4*>(row + kCodes);
      const int4 a = __ldg(r0), b = __ldg(r0 + 1), c = __ldg(r1), d = __ldg(r1 + 1);
      v0[0] = a.x, v0[1] = a.y, v0[2] = a.z, v0[3] = a.w, v0[4] = b.x, v0[5] = b.y, v0[6] = b.z, v0[7] = b.w;
      v1[0] = c.x, v1[1] = c.y, v1[2] = c.z, v1[3] = c.w, v1[4] = d.x, v1[5] = d.y, v1[6] = d.z, v1[7] = d.w;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) v0[j] = __ldg(row + j), v1[j] = __ldg(row + kCodes + j);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const uint32_t u0 = static_cast<uint32_t>(v0[j]) + kBias, u1 = static_cast<uint32_t>(v1[j]) + kBias;
      outside |= (u0 | u1) >> 16;
      tt[(8 * group + j) * (kCodes / 2) + pair] = u0 | u1 << 16;
    }
  }
  if (outside) *reinterpret_cast<volatile int*>(smem + kFlagAt) = 1;
}

// Where a lane's two build steps read and write: the block's 16 warps x 2 steps cover the 32 chunks of 8 codes a of
// every pair, a lane chunk q = (lane + 2 warp + step) % 32 of its pair's two columns (16 bytes each; a quarter-warp's
// 8 lanes 8 consecutive chunks: 32 banks), then word `lane` of the chunk's 8 rows (bank `lane`).
struct BuildPlace {
  uint32_t read[2];   // q x 16
  uint32_t write[2];  // q x 8 rows + lane x 4
};

__device__ __forceinline__ BuildPlace build_place(int lane, int warp) {
  BuildPlace place;
#pragma unroll
  for (int step = 0; step < 2; ++step) {
    const uint32_t q = (lane + 2 * warp + step) & 31;
    place.read[step] = q * 16;
    place.write[step] = q * 8 * kRowBytes + 4 * lane;
  }
  return place;
}

// Builds R_k into `r` (its half of the rows) from the weight codes of the lane's pair (c0 | c1 << 8).
__device__ __forceinline__ void build_rows(const unsigned char* smem, unsigned char* r, uint32_t codes,
                                           const BuildPlace& place) {
  const uint32_t column0 = (codes & 255u) * kColumnBytes, column1 = (codes >> 8) * kColumnBytes;
#pragma unroll
  for (int step = 0; step < 2; ++step) {
    const uint4 e = *reinterpret_cast<const uint4*>(smem + kTableAt + (column0 | place.read[step]));
    const uint4 f = *reinterpret_cast<const uint4*>(smem + kTableAt + (column1 | place.read[step]));
    constexpr int kRow = kRowBytes / 4;  // in words
    uint32_t* out = reinterpret_cast<uint32_t*>(r + place.write[step]);
    out[0 * kRow] = __byte_perm(e.x, f.x, 0x5410), out[1 * kRow] = __byte_perm(e.x, f.x, 0x7632);
    out[2 * kRow] = __byte_perm(e.y, f.y, 0x5410), out[3 * kRow] = __byte_perm(e.y, f.y, 0x7632);
    out[4 * kRow] = __byte_perm(e.z, f.z, 0x5410), out[5 * kRow] = __byte_perm(e.z, f.z, 0x7632);
    out[6 * kRow] = __byte_perm(e.w, f.w, 0x5410), out[7 * kRow] = __byte_perm(e.w, f.w, 0x7632);
  }
}

// One tap's products of a warp's 32 pixels, whose codes a (a byte each) come by broadcast: lane `lane` reads word
// `lane` of row a, at a << 8 | half << 7 | lane << 2 (one PRMT from the code's word and `lane_half`, the last two).
__device__ __forceinline__ void look_up(const unsigned char* r, const unsigned char* codes, uint32_t lane_half,
                                        uint32_t (&s)[kWarpPixels], uint32_t (&h)[kWarpPixels]) {
  const uint4* codes16 = reinterpret_cast<const uint4*>(codes);
#pragma unroll
  for (int m = 0; m < kWarpPixels / 16; ++m) {
    const uint4 c = codes16[m];
    const uint32_t words[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int pixel = 16 * m + i;
      const uint32_t at = __byte_perm(words[i / 4], lane_half, 0x5504 + 16 * (i % 4));  // [lane_half, a, 0, 0]
      const uint32_t v = *reinterpret_cast<const uint32_t*>(r + at);
      s[pixel] += v;
      h[pixel] += v >> 16;
    }
  }
}

// A thread's share of staging: the codes of its pixel's taps (8 a chunk) and one weight code of the chunk, loaded
// into registers a few taps before they are stored (and their values summed) into shared memory.
template <bool kSigned>
struct Stager {
  Patch patch;
  Tap tap;        // of the next chunk's first code
  bool pixel_ok;  // the tile's last pixels may lie past the output
  uint2 codes;    // the chunk's codes, padding taps holding za's byte, taps past the block's 0
  int pads;       // how many of them are padding taps
  uint32_t weight;
  bool weight_ok;
  int sum_a = 0, sum_w = 0;

  __device__ __forceinline__ void fetch(const Params& p, int k, int k_end, int n0, int za) {
    const uint32_t pad = (static_cast<uint32_t>(za) & 255u) * 0x01010101u;
    const int count = min(kChunk, k_end - k);
    if (p.wide_x) {  // count == kChunk: in_c and the slices are multiples of 8
      const int64_t at = tap_offset(p, patch.ih0, patch.iw0, tap.kh, tap.kw, tap.ci);
      pads = !pixel_ok || at < 0 ? kChunk : 0;
      codes = pads ? make_uint2(pad, pad) : __ldg(reinterpret_cast<const uint2*>(p.x + patch.image + at));
      tap.advance(p, kChunk);
    } else {
      uint32_t bytes[kChunk];
      pads = 0;
#pragma unroll
      for (int i = 0; i < kChunk; ++i) {
        const int64_t at = i < count && pixel_ok ? tap_offset(p, patch.ih0, patch.iw0, tap.kh, tap.kw, tap.ci) : -1;
        bytes[i] = i >= count ? 0u : at < 0 ? pad & 255u : __ldg(p.x + patch.image + at);
        if (i < count) {
          pads += at < 0;
          tap.advance(p, 1);
        }
      }
      codes.x = bytes[0] | bytes[1] << 8 | bytes[2] << 16 | bytes[3] << 24;
      codes.y = bytes[4] | bytes[5] << 8 | bytes[6] << 16 | bytes[7] << 24;
    }
    const int kk = threadIdx.x / kChannels, c = n0 + threadIdx.x % kChannels;
    weight_ok = kk < count && c < p.out_c;
    weight = weight_ok ? __ldg(p.w + static_cast<int64_t>(k + kk) * p.out_c + c) : 0u;
  }

  // The sums count a padding tap as za (its byte's value differs where za lies outside the codes' range).
  __device__ __forceinline__ void store(unsigned char* smem, int buffer, int za) {
    if (kSigned)
      sum_a = __dp4a(static_cast<int>(codes.y), 0x01010101, __dp4a(static_cast<int>(codes.x), 0x01010101, sum_a));
    else
      sum_a = static_cast<int>(
          __dp4a(codes.y, 0x01010101u, __dp4a(codes.x, 0x01010101u, static_cast<uint32_t>(sum_a))));
    sum_a += pads * (za - value_of<kSigned>(static_cast<uint32_t>(za)));
    if (weight_ok) sum_w += value_of<kSigned>(weight);
    unsigned char* at = smem + kCodesAt + buffer * kChunk * kPixels + threadIdx.x;
#pragma unroll
    for (int i = 0; i < kChunk; ++i)
      at[i * kPixels] = static_cast<unsigned char>((i < 4 ? codes.x : codes.y) >> (8 * (i % 4)));
    smem[kWeightsAt + buffer * kChunk * kChannels + threadIdx.x] = static_cast<unsigned char>(weight);
  }
};

template <bool kSigned>
__global__ void __launch_bounds__(kThreads, 1) int_conv_kernel(const Params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  wait_for_prior_kernel();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kPixels;
  const int n0 = blockIdx.y * kChannels, k_begin = blockIdx.z * p.k_per_split;
  const int taps = min(p.taps - k_begin, p.k_per_split), k_end = k_begin + taps;
  const int za = __ldg(p.zero_a);
  int* sum_a = reinterpret_cast<int*>(smem + kSumAAt);
  int* sum_w = reinterpret_cast<int*>(smem + kSumWAt);
  if (threadIdx.x < kChannels) sum_w[threadIdx.x] = 0;
  if (threadIdx.x == 0) *reinterpret_cast<int*>(smem + kFlagAt) = 0;
  __syncthreads();
  load_table<kSigned>(p, smem);

  Stager<kSigned> stager;
  stager.pixel_ok = m0 + threadIdx.x < p.pixels;
  stager.patch = patch_of(p, stager.pixel_ok ? m0 + threadIdx.x : 0);
  stager.tap = tap_at(p, k_begin);
  if (taps > 0) {
    stager.fetch(p, k_begin, k_end, n0, za);
    stager.store(smem, 0, za);
  }
  __syncthreads();
  if (*reinterpret_cast<volatile int*>(smem + kFlagAt)) {
    direct_tile<kSigned>(p, m0, n0, k_begin, taps, za);
    return;
  }
  const uint16_t* weights = reinterpret_cast<const uint16_t*>(smem + kWeightsAt) + lane;  // the lane's pair
  const BuildPlace place = build_place(lane, warp);
  if (taps > 0) build_rows(smem, smem + kRAt, weights[0], place);  // tap 0: the even half
  __syncthreads();

  uint32_t s[kWarpPixels], h[kWarpPixels];
#pragma unroll
  for (int i = 0; i < kWarpPixels; ++i) s[i] = h[i] = 0;
  // Tap t's codes lie in row t % 16 of the staged codes and weights ([2][kChunk] rows: chunks alternate), its R_k in
  // half t % 2 of the rows.
  const unsigned char* codes = smem + kCodesAt + warp * kWarpPixels;
  for (int t = 0; t < taps; ++t) {
    const int kk = t % kChunk, buffer = (t / kChunk) & 1;
    const bool next = t - kk + kChunk < taps;
    if (kk == 0 && next) stager.fetch(p, k_begin + t + kChunk, k_end, n0, za);
    if (kk == kChunk / 2 && next) stager.store(smem, buffer ^ 1, za);  // read from the next chunk on
    const int half = (t & 1) * (kRowBytes / 2);
    if (t + 1 < taps)
      build_rows(smem, smem + kRAt + (kRowBytes / 2 - half), weights[(t + 1) % (2 * kChunk) * (kChannels / 2)], place);
    look_up(smem + kRAt, codes + (t % (2 * kChunk)) * kPixels, 4u * lane | half, s, h);
    __syncthreads();
  }
  allow_next_kernel();
  sum_a[threadIdx.x] = stager.sum_a;
  atomicAdd(sum_w + threadIdx.x % kChannels, stager.sum_w);
  __syncthreads();

  // Each lane's pair of channels for the warp's 32 pixels.
  const int bias = kSigned ? 32768 : 0;
  const int c0 = n0 + 2 * lane;
  const bool ok0 = c0 < p.out_c, ok1 = c0 + 1 < p.out_c;
  const Channel ch0 = ok0 ? channel_of(p, c0, sum_w[2 * lane], taps, za) : Channel{};
  const Channel ch1 = ok1 ? channel_of(p, c0 + 1, sum_w[2 * lane + 1], taps, za) : Channel{};
#pragma unroll
  for (int i = 0; i < kWarpPixels; ++i) {
    const int64_t pixel = m0 + warp * kWarpPixels + i;
    if (pixel >= p.pixels) break;
    const int sa = sum_a[warp * kWarpPixels + i];
    const int64_t acc0 = acc_of(ch0, static_cast<int>(s[i] - (h[i] << 16)) - bias * taps, sa);
    const int64_t acc1 = acc_of(ch1, static_cast<int>(h[i]) - bias * taps, sa);
    const int64_t at = pixel * p.out_c + c0;
    if (ok1 && p.pair_stores && !p.split) {
      *reinterpret_cast<float2*>(p.y + at) =
          make_float2(rescaled(__ll2float_rn(acc0), ch0.scale), rescaled(__ll2float_rn(acc1), ch1.scale));
    } else {
      if (ok0) write_output(p, at, ch0, acc0);
      if (ok1) write_output(p, at + 1, ch1, acc1);
    }
  }
}

// The kernel for GPUs without the shared memory: the direct tile for every block.
template <bool kSigned>
__global__ void __launch_bounds__(kThreads) int_conv_direct_kernel(const Params p) {
  wait_for_prior_kernel();
  const int k_begin = blockIdx.z * p.k_per_split;
  direct_tile<kSigned>(p, static_cast<int64_t>(blockIdx.x) * kPixels, blockIdx.y * kChannels, k_begin,
                       min(p.taps - k_begin, p.k_per_split), __ldg(p.zero_a));
}

// y = fl32(fl32(acc) x rescale[c]) in place, from the int32 sums of a split conv.
__global__ void finish_split(float* y, const float* rescale, int64_t count, int out_c) {
  wait_for_prior_kernel();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  y[i] = rescaled(__int2float_rn(reinterpret_cast<const int*>(y)[i]), __ldg(rescale + i % out_c));
}

// What this device allows, read once per device: its SMs, and whether int_conv_kernel's shared memory was granted.
struct DeviceFacts {
  int sms = 0;
  bool large_shared = false;
};

DeviceFacts device_facts() {
  constexpr int kDevices = 64;
  static std::atomic<int> known[kDevices];  // 0: not read yet, else sms << 1 | large_shared
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) {
    cudaGetLastError();
    return {1, false};
  }
  int state = known[device].load(std::memory_order_relaxed);
  if (state == 0) {
    int sms = 1, optin = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
      cudaGetLastError();
      sms = 1, optin = 0;
    }
    bool large = optin >= kSharedBytes;
    for (auto kernel : {int_conv_kernel<true>, int_conv_kernel<false>})
      large = large && cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes) ==
                           cudaSuccess;
    cudaGetLastError();
    state = std::max(sms, 1) << 1 | (large ? 1 : 0);
    known[device].store(state, std::memory_order_relaxed);
  }
  return {state >> 1, (state & 1) != 0};
}

bool aligned(const void* pointer, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(pointer) % bytes == 0; }

// The quantiser (integer_quantise.h), a value a thread in a grid-strided loop.
__global__ void quantise_kernel(const float* x, int64_t count, QuantiseArgs args, uint8_t* codes, bool* in_range) {
  wait_for_prior_kernel();
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    const int64_t c = args.channels == 1 ? 0 : i % args.channels;
    bool mask = false;
    codes[i] = quantised_byte(__ldg(x + i), __ldg(args.scale + c), __ldg(args.zero + c), args.qmin, args.qmax, &mask);
    in_range[i] = mask;
  }
}

// The ranges' outputs before the pass: every bound +0 (the bit pattern 0), every channel finite.
__global__ void finite_range_init_kernel(int64_t channels, float* lo, float* hi, bool* finite) {
  wait_for_prior_kernel();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  lo[c] = 0.0f;
  hi[c] = 0.0f;
  finite[c] = true;
}

// The ranges (integer_quantise.h), x viewed as [rows, channels]: thread t keeps channel t % channels' bounds over the
// rows t / channels, + row_step, ... (consecutive threads read consecutive values), then merges them into the
// outputs by atomics on their bit patterns: lo is +0 or negative, and a more negative float has a larger unsigned
// pattern; hi is +0 or positive, ordered as its pattern. Max is exact, so the bits do not depend on the order. Per
// tensor (one channel) a warp first reduces its lanes' bounds by shuffles: one atomic a warp.
__global__ void finite_range_kernel(const float* x, int64_t rows, int64_t channels, int64_t row_step, float* lo,
                                    float* hi, bool* finite) {
  wait_for_prior_kernel();
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool active = t < channels * row_step;
  float low = 0.0f, high = 0.0f;
  bool all_finite = true;
  const int64_t c = active ? t % channels : 0;
  if (active) {
    for (int64_t r = t / channels; r < rows; r += row_step) finite_range_step(__ldg(x + r * channels + c), &low, &high,
                                                                                &all_finite);
  }
  if (channels == 1) {  // every lane of the block's warps reaches here (the grid is whole warps)
    for (int offset = 16; offset > 0; offset /= 2) {
      low = fminf(low, __shfl_xor_sync(0xffffffffu, low, offset));
      high = fmaxf(high, __shfl_xor_sync(0xffffffffu, high, offset));
    }
    all_finite = __all_sync(0xffffffffu, all_finite);
    if ((threadIdx.x & 31) != 0) return;
  }
  if (!active) return;
  if (low < 0.0f) atomicMax(reinterpret_cast<unsigned int*>(lo + c), __float_as_uint(low));
  if (high > 0.0f) atomicMax(reinterpret_cast<unsigned int*>(hi + c), __float_as_uint(high));
  if (!all_finite) finite[c] = false;  // every writer writes the same value
}

}  // namespace

LaunchStatus finite_range(const float* x, int64_t count, int64_t channels, float* lo, float* hi, bool* finite,
                          cudaStream_t stream) {
  if (channels <= 0) return {};
  const int64_t rows = count / channels;
  LaunchStatus status = launch_kernel(false, finite_range_init_kernel, dim3(static_cast<unsigned>((channels + 255) /
                                      256)), dim3(256), 0, stream, channels, lo, hi, finite);
  if (!status.ok || rows == 0) return status;
  // About 16 values a thread, at most 2^20 threads (enough to fill any GPU), at least one thread a channel.
  const int64_t row_step = std::max<int64_t>(1, std::min((rows + 15) / 16, (int64_t{1} << 20) / channels));
  const int64_t threads = channels * row_step;
  return launch_kernel(true, finite_range_kernel, dim3(static_cast<unsigned>((threads + 255) / 256)), dim3(256), 0,
                       stream, x, rows, channels, row_step, lo, hi, finite);
}

LaunchStatus quantise(const float* x, int64_t count, const QuantiseArgs& args, uint8_t* codes, bool* in_range,
                      cudaStream_t stream) {
  if (count <= 0) return {};
  // Enough blocks of 256 to fill any GPU several times over; more would only add blocks that find no work.
  const int64_t blocks = std::min<int64_t>((count + 255) / 256, 65536);
  return launch_kernel(true, quantise_kernel, dim3(static_cast<unsigned>(blocks)), dim3(256), 0, stream, x, count,
                       args, codes, in_range);
}

LaunchStatus int_conv2d(const ConvGeometry& g, const uint8_t* x, const uint8_t* w, const IntConvArgs& args, float* y,
                        cudaStream_t stream) {
  const int64_t m = g.out_pixels(), n = g.out_c, k = g.patch_size();
  if (m == 0 || n == 0) return {};
  if (k > kIntMaxTaps) return {false, "int_conv2d: more than kIntMaxTaps (32768) taps an output"};
  const int64_t row_tiles = (m + kPixels - 1) / kPixels, column_tiles = (n + kChannels - 1) / kChannels;
  if (column_tiles > 65535 || row_tiles > kMaxElements || g.in_h * g.in_w * g.in_c > kMaxElements)
    return {false, "int_conv2d: more than 4,194,240 output channels or 2^31 elements in one image"};
  const DeviceFacts facts = device_facts();

  Params p{x, w, args.table, args.zero_a, args.zero_w, args.rescale, y, m};
  p.out_c = static_cast<int>(n);
  p.taps = static_cast<int>(k);
  p.in_h = static_cast<int>(g.in_h), p.in_w = static_cast<int>(g.in_w), p.in_c = static_cast<int>(g.in_c);
  p.filter_w = static_cast<int>(g.filter_w);
  p.out_w = static_cast<int>(g.out_w), p.out_hw = static_cast<int>(g.out_h * g.out_w);
  p.stride_h = static_cast<int>(g.stride_h), p.stride_w = static_cast<int>(g.stride_w);
  p.dilation_h = static_cast<int>(g.dilation_h), p.dilation_w = static_cast<int>(g.dilation_w);
  p.pad_top = static_cast<int>(g.pad_top), p.pad_left = static_cast<int>(g.pad_left);
  p.wide_x = g.in_c % kChunk == 0 && aligned(x, 8);
  p.wide_table = aligned(args.table, 16);
  p.pair_stores = n % 2 == 0 && aligned(y, 8);

  // Slices where the tiles would fill less than half the SMs (one block an SM), each of at least kMinSplitTaps.
  const int64_t tiles = row_tiles * column_tiles;
  int64_t splits = 1;
  if (k <= kSplitMaxTaps && 2 * tiles <= facts.sms)
    splits = std::max<int64_t>(1, std::min(facts.sms / tiles, k / kMinSplitTaps));
  const int64_t per_split = (k + splits - 1) / splits;
  p.k_per_split = static_cast<int>(std::max<int64_t>(kChunk, (per_split + kChunk - 1) / kChunk * kChunk));
  splits = std::max<int64_t>(1, (k + p.k_per_split - 1) / p.k_per_split);
  p.split = splits > 1;

  if (p.split) {
    const cudaError_t zeroed = cudaMemsetAsync(y, 0, static_cast<size_t>(m * n) * sizeof(float), stream);
    if (zeroed != cudaSuccess) {
      cudaGetLastError();
      return {false, cudaGetErrorString(zeroed)};
    }
  }
  const dim3 grid(static_cast<unsigned>(row_tiles), static_cast<unsigned>(column_tiles),
                  static_cast<unsigned>(splits));
  const LaunchStatus launched =
      facts.large_shared
          ? launch_kernel(true, args.signed_codes ? int_conv_kernel<true> : int_conv_kernel<false>, grid,
                          dim3(kThreads), kSharedBytes, stream, p)
          : launch_kernel(true, args.signed_codes ? int_conv_direct_kernel<true> : int_conv_direct_kernel<false>, grid,
                          dim3(kThreads), 0, stream, p);
  if (!launched.ok || !p.split) return launched;
  const int64_t count = m * n;
  return launch_kernel(true, finish_split, dim3(static_cast<unsigned>((count + 255) / 256)), dim3(256), 0, stream, y,
                       args.rescale, count, static_cast<int>(n));
}

}  // namespace gpu
}  // namespace amdnn
