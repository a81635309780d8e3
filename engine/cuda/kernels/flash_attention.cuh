// Fused causal attention for bf16 precision (gpu_backend_attention.cu),
// flash-attention style: no (seq x seq) matrix in memory. Q, K, V and the
// output's gradient are read as float from the fused QKV buffer (ld 3C, a
// head's columns hd wide) and rounded to bfloat16 as their tiles enter
// shared memory; every product is a float FMA on those bf16 values, with
// float accumulation; the softmax and its statistics are float.
//
// Tiles: kTile = 64 rows (queries in the forward and dQ kernels, keys in
// the dK/dV kernel) per block of kWarps = 8 warps, each warp owning
// kRowsPerWarp = 8 of the rows; the 64 columns of a score tile (keys, or
// queries in the dK/dV kernel) are spread over the lanes, two per lane, so
// a row's max and sums are warp shuffles. A row's tile of probabilities
// (or their gradients) goes through the warp's rows of a float tile in
// shared memory, from which every lane reads it broadcast while it
// accumulates its own head dimensions (2 * lane + 64 * c, c < kChunks) of
// the output in registers. bf16 rows are ld = tile_ld(hd) wide: an odd
// number of 32-bit words, so lanes reading the same column of different
// rows hit different banks.
//
// forward_kernel: a block per (batch * head, query tile); key tiles 0 ..
//   the diagonal streamed through shared memory, online softmax (running
//   max and sum, base 2), out written as float and each row's logsumexp of
//   its scaled scores (natural log) saved in `lse` (batch * heads * seq).
// backward_dq_kernel: a block per (batch * head, query tile); a first pass
//   over the key tiles sums D_i = sum_j P_ij dP_ij (P recomputed from Q, K
//   and lse, dP = dO V^T), a second computes dS = P (dP - D) and dQ =
//   scale dS K; writes dQ and D (batch * heads * seq floats of `dsum`).
// backward_dkv_kernel: a block per (batch * head, key tile); the query
//   tiles from the diagonal on, P^T and dS^T recomputed, dV = P^T dO and
//   dK = scale dS^T Q in registers.
// Every sum runs in a fixed order and each output has one writer: the same
// bits run to run, no atomics. The price: the backward pass does the work
// of about nine (causal) T x T x hd products where flash-attention 2 does
// five (D from a pass of its own since the backward has no O; QK^T and
// dO V^T recomputed by both backward kernels).
//
// Products are float FMAs (CUDA cores), not tensor cores: these kernels
// run on the emulator as written. Shared memory per block, head_dim 64 /
// 128: forward 41 / 65 KiB, dQ 50 / 82 KiB, dK/dV 66 / 98 KiB (beyond 48
// KiB by the opt-in attribute, set at launch).
#pragma once

#include <cmath>
#include <cstdint>

#include "../kernel_language.cuh"
#include "attention.cuh"
#include "row_reduce.cuh"

namespace baton::gpu::kernels::flash {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = 8;
constexpr int kTile = kWarps * kRowsPerWarp;  // 64 rows, 64 columns (two per lane)
constexpr int kMaxHeadDim = 128;              // kChunks = 2
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

using bf16 = __nv_bfloat16;
using bf162 = __nv_bfloat162;

// bf16 elements per shared row: the head's dimensions rounded up to 32-bit
// words, an odd number of words.
__host__ __device__ constexpr int tile_ld(int hd) { return 2 * (((hd + 1) / 2) | 1); }

// Dynamic shared memory of each kernel (bytes).
__host__ __device__ constexpr int64_t forward_smem(int hd) {
  return int64_t{kTile} * kTile * 4 + 3 * int64_t{kTile} * tile_ld(hd) * 2;
}
__host__ __device__ constexpr int64_t backward_dq_smem(int hd) {
  return int64_t{kTile} * kTile * 4 + 2 * int64_t{kTile} * 4 + 4 * int64_t{kTile} * tile_ld(hd) * 2;
}
__host__ __device__ constexpr int64_t backward_dkv_smem(int hd) {
  return 2 * int64_t{kTile} * kTile * 4 + 2 * int64_t{kTile} * 4 +
         4 * int64_t{kTile} * tile_ld(hd) * 2;
}

__device__ inline float2 pair(const bf16* row, int d) {
  return __bfloat1622float2(*reinterpret_cast<const bf162*>(row + d));
}

// The tile's keys [0, end) that a warp's rows can see: its first row is
// `offset` keys past the tile's first key (negative: none of them).
__device__ inline int causal_end(int nk, int64_t offset) {
  const int64_t end = offset + kRowsPerWarp;
  return end < 0 ? 0 : (end < nk ? static_cast<int>(end) : nk);
}

// Rows [0, n) of a tile (row r at src + r * ld_src, hd floats) into dst as
// bf16 rows of `ld`; rows n .. kTile and the padding columns are zeros.
// Consecutive threads take consecutive pairs of a row (coalesced); float2
// loads when the rows are 8-byte aligned.
__device__ inline void load_tile(bf16* dst, int ld, const float* src, int64_t ld_src, int n,
                                 int hd) {
  const int words = ld / 2;
  const bool aligned =
      hd % 2 == 0 && ld_src % 2 == 0 && (reinterpret_cast<uintptr_t>(src) & 7u) == 0;
  for (int idx = static_cast<int>(threadIdx.x); idx < kTile * words;
       idx += static_cast<int>(blockDim.x)) {
    const int r = idx / words, d = 2 * (idx % words);
    float2 v = make_float2(0.0f, 0.0f);
    if (r < n && d < hd) {
      const float* p = src + r * ld_src + d;
      if (aligned) {
        v = *reinterpret_cast<const float2*>(p);
      } else {
        v.x = p[0];
        if (d + 1 < hd) v.y = p[1];
      }
    }
    *reinterpret_cast<bf162*>(dst + r * ld + d) = __floats2bfloat162_rn(v.x, v.y);
  }
}

// Two dot products of the head's `words` pairs: a row `x` (broadcast)
// against the rows ya, yb (one per lane).
__device__ inline void dot2(const bf16* x, const bf16* ya, const bf16* yb, int words, float& sa,
                            float& sb) {
  for (int w = 0; w < words; ++w) {
    const float2 a = pair(x, 2 * w), p = pair(ya, 2 * w), q = pair(yb, 2 * w);
    sa = fmaf(a.x, p.x, fmaf(a.y, p.y, sa));
    sb = fmaf(a.x, q.x, fmaf(a.y, q.y, sb));
  }
}

// grid (batch * heads, query tiles); kChunks * 64 >= hd.
template <int kChunks>
__global__ void __launch_bounds__(kThreads, 1)
    forward_kernel(const float* __restrict__ qkv, float* __restrict__ out, float* __restrict__ lse,
                   int64_t seq, int64_t heads, int hd, float scale_log2) {
  BATON_DYNAMIC_SHARED(float, smem);
  const int ld = tile_ld(hd), words = (hd + 1) / 2;
  float* ps = smem;  // kTile x kTile probabilities, a warp's rows its own
  bf16* qs = reinterpret_cast<bf16*>(smem + kTile * kTile);
  bf16* ks = qs + kTile * ld;
  bf16* vs = ks + kTile * ld;
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int64_t bh = blockIdx.x, b = bh / heads, h = bh % heads;
  const int64_t c = heads * hd, ld3 = 3 * c;
  // The last query tiles (the most key tiles) first.
  const int64_t q0 = static_cast<int64_t>(gridDim.y - 1 - blockIdx.y) * kTile;
  const float* base = qkv + b * seq * ld3 + h * hd;
  const int nq = seq - q0 < kTile ? static_cast<int>(seq - q0) : kTile;
  const int row0 = warp * kRowsPerWarp;
  load_tile(qs, ld, base + q0 * ld3, ld3, nq, hd);

  float o[kRowsPerWarp][2 * kChunks];
  float m[kRowsPerWarp], l[kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int d = 0; d < 2 * kChunks; ++d) o[i][d] = 0.0f;
  }
  for (int64_t k0 = 0; k0 < q0 + nq; k0 += kTile) {
    const int nk = seq - k0 < kTile ? static_cast<int>(seq - k0) : kTile;
    __syncthreads();  // the previous tile's readers are done
    load_tile(ks, ld, base + c + k0 * ld3, ld3, nk, hd);
    load_tile(vs, ld, base + 2 * c + k0 * ld3, ld3, nk, hd);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int64_t qi = q0 + row0 + i;
      if (qi >= seq) {  // the warp's rows past the sequence (uniform)
        ps[(row0 + i) * kTile + lane] = 0.0f;
        ps[(row0 + i) * kTile + lane + 32] = 0.0f;
        continue;
      }
      float s0 = 0.0f, s1 = 0.0f;
      dot2(qs + (row0 + i) * ld, ks + lane * ld, ks + (lane + 32) * ld, words, s0, s1);
      // Scores in base 2; keys after the query masked. k0 <= q0 <= qi, so
      // every tile leaves the row at least one key.
      s0 = k0 + lane <= qi ? s0 * scale_log2 : -INFINITY;
      s1 = k0 + lane + 32 <= qi ? s1 * scale_log2 : -INFINITY;
      const float mx = fmaxf(m[i], warp_max(fmaxf(s0, s1)));
      const float alpha = exp2f(m[i] - mx);
      const float p0 = exp2f(s0 - mx), p1 = exp2f(s1 - mx);
      l[i] = l[i] * alpha + (p0 + p1);  // this lane's share; summed at the end
      m[i] = mx;
#pragma unroll
      for (int d = 0; d < 2 * kChunks; ++d) o[i][d] *= alpha;
      ps[(row0 + i) * kTile + lane] = p0;
      ps[(row0 + i) * kTile + lane + 32] = p1;
    }
    __syncwarp();
    // O += P V: this lane's dimensions, keys in order; keys after the
    // warp's last query (on the diagonal tile) have p = 0.
    const int jend = causal_end(nk, q0 + row0 - k0);
    for (int j = 0; j < jend; ++j) {
#pragma unroll
      for (int cc = 0; cc < kChunks; ++cc) {
        const int d = 2 * lane + 64 * cc;
        if (d >= hd) continue;
        const float2 v = pair(vs + j * ld, d);
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i) {
          const float p = ps[(row0 + i) * kTile + j];
          o[i][2 * cc] = fmaf(p, v.x, o[i][2 * cc]);
          o[i][2 * cc + 1] = fmaf(p, v.y, o[i][2 * cc + 1]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int64_t qi = q0 + row0 + i;
    if (qi >= seq) continue;
    const float sum = reduce::warp_sum(l[i]);
    const float inv = 1.0f / sum;
    float* orow = out + (b * seq + qi) * c + h * hd;
#pragma unroll
    for (int cc = 0; cc < kChunks; ++cc) {
      const int d = 2 * lane + 64 * cc;
      if (d < hd) orow[d] = o[i][2 * cc] * inv;
      if (d + 1 < hd) orow[d + 1] = o[i][2 * cc + 1] * inv;
    }
    if (lane == 0) lse[bh * seq + qi] = (m[i] + log2f(sum)) * kLn2;
  }
}

// grid (batch * heads, query tiles). dout: (batch * seq, C); writes the Q
// columns of dqkv and dsum (batch * heads * seq).
template <int kChunks>
__global__ void __launch_bounds__(kThreads, 1)
    backward_dq_kernel(const float* __restrict__ qkv, const float* __restrict__ dout,
                       const float* __restrict__ lse, float* __restrict__ dqkv,
                       float* __restrict__ dsum, int64_t seq, int64_t heads, int hd, float scale,
                       float scale_log2) {
  BATON_DYNAMIC_SHARED(float, smem);
  const int ld = tile_ld(hd), words = (hd + 1) / 2;
  float* dss = smem;                   // kTile x kTile score gradients, a warp's rows its own
  float* lse_s = dss + kTile * kTile;  // the rows' logsumexp (base 2)
  float* dd_s = lse_s + kTile;         // and D
  bf16* qs = reinterpret_cast<bf16*>(dd_s + kTile);
  bf16* dos = qs + kTile * ld;
  bf16* ks = dos + kTile * ld;
  bf16* vs = ks + kTile * ld;
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int64_t bh = blockIdx.x, b = bh / heads, h = bh % heads;
  const int64_t c = heads * hd, ld3 = 3 * c;
  // The last query tiles (the most key tiles) first.
  const int64_t q0 = static_cast<int64_t>(gridDim.y - 1 - blockIdx.y) * kTile;
  const float* base = qkv + b * seq * ld3 + h * hd;
  const int nq = seq - q0 < kTile ? static_cast<int>(seq - q0) : kTile;
  const int row0 = warp * kRowsPerWarp;
  load_tile(qs, ld, base + q0 * ld3, ld3, nq, hd);
  load_tile(dos, ld, dout + (b * seq + q0) * c + h * hd, c, nq, hd);
  if (lane < kRowsPerWarp) {
    lse_s[row0 + lane] = row0 + lane < nq ? lse[bh * seq + q0 + row0 + lane] * kLog2e : 0.0f;
  }
  // The rows' D, summed per lane in the warp's rows of dss first.
  for (int i = 0; i < kRowsPerWarp; ++i) {
    dss[(row0 + i) * kTile + lane] = 0.0f;
  }
  __syncwarp();
  // P and dP of row i against this tile's keys lane and lane + 32.
  auto scores = [&](int i, int64_t k0, float& p0, float& p1, float& dp0, float& dp1) {
    const int64_t qi = q0 + row0 + i;
    float s0 = 0.0f, s1 = 0.0f;
    dp0 = 0.0f;
    dp1 = 0.0f;
    dot2(qs + (row0 + i) * ld, ks + lane * ld, ks + (lane + 32) * ld, words, s0, s1);
    dot2(dos + (row0 + i) * ld, vs + lane * ld, vs + (lane + 32) * ld, words, dp0, dp1);
    const float l2 = lse_s[row0 + i];
    p0 = k0 + lane <= qi ? exp2f(s0 * scale_log2 - l2) : 0.0f;
    p1 = k0 + lane + 32 <= qi ? exp2f(s1 * scale_log2 - l2) : 0.0f;
  };
  auto load_keys = [&](int64_t k0) {
    const int nk = seq - k0 < kTile ? static_cast<int>(seq - k0) : kTile;
    __syncthreads();  // the previous tile's readers are done
    load_tile(ks, ld, base + c + k0 * ld3, ld3, nk, hd);
    load_tile(vs, ld, base + 2 * c + k0 * ld3, ld3, nk, hd);
    __syncthreads();
    return nk;
  };
  // Pass 1: D_i = sum_j P_ij dP_ij.
  for (int64_t k0 = 0; k0 < q0 + nq; k0 += kTile) {
    load_keys(k0);
#pragma unroll 1
    for (int i = 0; i < kRowsPerWarp; ++i) {
      if (row0 + i >= nq) break;  // the warp's rows past the sequence (uniform)
      float p0, p1, dp0, dp1;
      scores(i, k0, p0, p1, dp0, dp1);
      float& acc = dss[(row0 + i) * kTile + lane];
      acc = fmaf(p0, dp0, fmaf(p1, dp1, acc));
    }
  }
#pragma unroll 1
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const float d = reduce::warp_sum(dss[(row0 + i) * kTile + lane]);
    if (lane == 0) dd_s[row0 + i] = d;
  }
  __syncwarp();
  // Pass 2: dS = P (dP - D), dQ = scale dS K.
  float dq[kRowsPerWarp][2 * kChunks];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i)
#pragma unroll
    for (int d = 0; d < 2 * kChunks; ++d) dq[i][d] = 0.0f;
  for (int64_t k0 = 0; k0 < q0 + nq; k0 += kTile) {
    const int nk = load_keys(k0);
#pragma unroll 1
    for (int i = 0; i < kRowsPerWarp; ++i) {
      float p0 = 0.0f, p1 = 0.0f, dp0 = 0.0f, dp1 = 0.0f;
      if (row0 + i < nq) scores(i, k0, p0, p1, dp0, dp1);
      dss[(row0 + i) * kTile + lane] = p0 * (dp0 - dd_s[row0 + i]);
      dss[(row0 + i) * kTile + lane + 32] = p1 * (dp1 - dd_s[row0 + i]);
    }
    __syncwarp();
    const int jend = causal_end(nk, q0 + row0 - k0);
    for (int j = 0; j < jend; ++j) {
#pragma unroll
      for (int cc = 0; cc < kChunks; ++cc) {
        const int d = 2 * lane + 64 * cc;
        if (d >= hd) continue;
        const float2 k = pair(ks + j * ld, d);
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i) {
          const float g = dss[(row0 + i) * kTile + j];
          dq[i][2 * cc] = fmaf(g, k.x, dq[i][2 * cc]);
          dq[i][2 * cc + 1] = fmaf(g, k.y, dq[i][2 * cc + 1]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int64_t qi = q0 + row0 + i;
    if (qi >= seq) continue;
    float* row = dqkv + (b * seq + qi) * ld3 + h * hd;
#pragma unroll
    for (int cc = 0; cc < kChunks; ++cc) {
      const int d = 2 * lane + 64 * cc;
      if (d < hd) row[d] = dq[i][2 * cc] * scale;
      if (d + 1 < hd) row[d + 1] = dq[i][2 * cc + 1] * scale;
    }
    if (lane == 0) dsum[bh * seq + qi] = dd_s[row0 + i];
  }
}

// grid (batch * heads, key tiles): the K and V columns of dqkv.
template <int kChunks>
__global__ void __launch_bounds__(kThreads, 1)
    backward_dkv_kernel(const float* __restrict__ qkv, const float* __restrict__ dout,
                        const float* __restrict__ lse, const float* __restrict__ dsum,
                        float* __restrict__ dqkv, int64_t seq, int64_t heads, int hd, float scale,
                        float scale_log2) {
  BATON_DYNAMIC_SHARED(float, smem);
  const int ld = tile_ld(hd), words = (hd + 1) / 2;
  float* ps = smem;                    // kTile x kTile: P^T, a warp's key rows its own
  float* dss = ps + kTile * kTile;     // dS^T likewise
  float* lse_s = dss + kTile * kTile;  // the query tile's logsumexp (base 2)
  float* dd_s = lse_s + kTile;         // and D
  bf16* ks = reinterpret_cast<bf16*>(dd_s + kTile);
  bf16* vs = ks + kTile * ld;
  bf16* qs = vs + kTile * ld;
  bf16* dos = qs + kTile * ld;
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int64_t bh = blockIdx.x, b = bh / heads, h = bh % heads;
  const int64_t c = heads * hd, ld3 = 3 * c;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * kTile;  // the first (most queries) first
  const float* base = qkv + b * seq * ld3 + h * hd;
  const int nk = seq - k0 < kTile ? static_cast<int>(seq - k0) : kTile;
  const int row0 = warp * kRowsPerWarp;
  load_tile(ks, ld, base + c + k0 * ld3, ld3, nk, hd);
  load_tile(vs, ld, base + 2 * c + k0 * ld3, ld3, nk, hd);

  float dk[kRowsPerWarp][2 * kChunks], dv[kRowsPerWarp][2 * kChunks];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i)
#pragma unroll
    for (int d = 0; d < 2 * kChunks; ++d) {
      dk[i][d] = 0.0f;
      dv[i][d] = 0.0f;
    }
  // Queries before k0 see none of these keys.
  for (int64_t q0 = k0; q0 < seq; q0 += kTile) {
    const int nq = seq - q0 < kTile ? static_cast<int>(seq - q0) : kTile;
    __syncthreads();  // the previous tile's readers are done
    load_tile(qs, ld, base + q0 * ld3, ld3, nq, hd);
    load_tile(dos, ld, dout + (b * seq + q0) * c + h * hd, c, nq, hd);
    for (int r = static_cast<int>(threadIdx.x); r < kTile; r += static_cast<int>(blockDim.x)) {
      lse_s[r] = r < nq ? lse[bh * seq + q0 + r] * kLog2e : 0.0f;
      dd_s[r] = r < nq ? dsum[bh * seq + q0 + r] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int64_t kj = k0 + row0 + i;
      float p[2] = {0.0f, 0.0f}, g[2] = {0.0f, 0.0f};
      if (kj < seq) {
        float s[2] = {0.0f, 0.0f}, dp[2] = {0.0f, 0.0f};
        dot2(ks + (row0 + i) * ld, qs + lane * ld, qs + (lane + 32) * ld, words, s[0], s[1]);
        dot2(vs + (row0 + i) * ld, dos + lane * ld, dos + (lane + 32) * ld, words, dp[0], dp[1]);
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int r = lane + 32 * u;
          const int64_t qi = q0 + r;
          if (qi >= kj && qi < seq) {
            p[u] = exp2f(s[u] * scale_log2 - lse_s[r]);
            g[u] = p[u] * (dp[u] - dd_s[r]);
          }
        }
      }
      ps[(row0 + i) * kTile + lane] = p[0];
      ps[(row0 + i) * kTile + lane + 32] = p[1];
      dss[(row0 + i) * kTile + lane] = g[0];
      dss[(row0 + i) * kTile + lane + 32] = g[1];
    }
    __syncwarp();
    // dV += P^T dO, dK += dS^T Q: this lane's dimensions, queries in order;
    // queries before the warp's first key (on the diagonal tile) have p = 0.
    const int64_t first = k0 + row0 - q0;
    for (int j = first > 0 ? static_cast<int>(first) : 0; j < nq; ++j) {
#pragma unroll
      for (int cc = 0; cc < kChunks; ++cc) {
        const int d = 2 * lane + 64 * cc;
        if (d >= hd) continue;
        const float2 gy = pair(dos + j * ld, d), q = pair(qs + j * ld, d);
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i) {
          const float pj = ps[(row0 + i) * kTile + j], gj = dss[(row0 + i) * kTile + j];
          dv[i][2 * cc] = fmaf(pj, gy.x, dv[i][2 * cc]);
          dv[i][2 * cc + 1] = fmaf(pj, gy.y, dv[i][2 * cc + 1]);
          dk[i][2 * cc] = fmaf(gj, q.x, dk[i][2 * cc]);
          dk[i][2 * cc + 1] = fmaf(gj, q.y, dk[i][2 * cc + 1]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int64_t kj = k0 + row0 + i;
    if (kj >= seq) continue;
    float* row = dqkv + (b * seq + kj) * ld3 + c + h * hd;
#pragma unroll
    for (int cc = 0; cc < kChunks; ++cc) {
      const int d = 2 * lane + 64 * cc;
      if (d < hd) {
        row[d] = dk[i][2 * cc] * scale;
        row[c + d] = dv[i][2 * cc];
      }
      if (d + 1 < hd) {
        row[d + 1] = dk[i][2 * cc + 1] * scale;
        row[c + d + 1] = dv[i][2 * cc + 1];
      }
    }
  }
}

}  // namespace baton::gpu::kernels::flash
