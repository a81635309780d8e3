// Fused causal attention for bf16 precision (gpu_backend_attention.cu),
// flash-attention style: no (seq x seq) matrix in memory, every product on
// the tensor cores through the warp matrix functions (nvcuda::wmma,
// m16n16k16, bf16 operands, float accumulators; on the emulator
// simt/simt_wmma.h). Q, K, V and the output's gradient are read as float
// from the fused QKV buffer (ld 3C, a head's columns hd wide) and rounded
// to bfloat16 as their tiles enter shared memory; probabilities and score
// gradients are rounded to bfloat16 as they become a product's operand;
// the softmax, its statistics and every accumulator are float.
//
// Tiles: kTile = 64 rows per block (queries in the forward and dQ kernels,
// keys in the dK/dV kernel), kWarps = 4 warps of kRows = 16 rows each; a
// score tile is a warp's 16 rows by 64 columns, four 16 x 16 fragments. The
// head's dimensions are padded with zeros to 16 kD (kD = 4 for head_dim <=
// 64, 8 up to 128). The layout of a fragment's elements over the lanes is
// unspecified, so a warp moves score fragments through its own rows of a
// float tile in shared memory for the softmax: lanes 2r and 2r + 1 own row
// r, 32 columns each, and share the row's max and sums by one shuffle.
//
// forward_kernel: a block per (batch * head, query tile); key tiles 0 ..
//   the diagonal, S = Q K^T, online softmax (running max and sum, base 2),
//   P rounded to bf16, O = diag(alpha) O + P V with O in the warp's rows of
//   shared memory (rescaling needs each element's row); out written as
//   float and each row's logsumexp of its scaled scores (natural log) in
//   `lse` (batch * heads * seq).
// backward_dq_kernel: a block per (batch * head, query tile); a first pass
//   over the key tiles sums D_i = sum_j P_ij dP_ij (P recomputed from S and
//   lse, dP = dO V^T: the backward has no O to take D from), a second
//   computes dS = P (dP - D) and dQ += dS K in fragments; writes dQ
//   (times scale) and D (batch * heads * seq floats of `dsum`).
// backward_dkv_kernel: a block per (batch * head, key tile); the query
//   tiles from the diagonal on, S^T = K Q^T and dP^T = V dO^T, then
//   dV += P^T dO and dK += dS^T Q in fragments.
// On the diagonal tile a warp skips the fragments the causal mask empties.
// Every sum runs in a fixed order and each output has one writer: the same
// bits run to run, no atomics. The backward does the work of nine causal
// T x T x hd products where flash-attention 2 does five (D from a pass of
// its own; S and dP recomputed by both backward kernels).
//
// Shared memory (these kernels have no static shared memory, so the
// dynamic array starts at the block's window; every region a multiple of
// 32 bytes, as wmma's 256-bit pointer alignment needs), head_dim 64 / 128:
// forward 70 / 110 KiB, dQ 79 / 111 KiB, dK/dV 88.5 / 120.5 KiB (beyond 48 KiB
// by the opt-in attribute, set at launch).
#pragma once

#include <cmath>
#include <cstdint>

#include "../kernel_language.cuh"

namespace baton::gpu::kernels::flash {

namespace wmma = nvcuda::wmma;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 16;                 // a warp's rows, one fragment high
constexpr int kTile = kWarps * kRows;     // 64 rows; 64 columns of scores
constexpr int kFrags = kTile / 16;        // fragments across a score tile
constexpr int kMaxHeadDim = 128;          // kD = 8
constexpr int kLdS = kTile + 4;           // floats per score row
constexpr int kLdP = kTile + 8;           // bf16 per probability row
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

using bf16 = __nv_bfloat16;
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragBRow = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragBCol = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// Dimension fragments for a head: 4 up to 64 dimensions, else 8.
__host__ __device__ constexpr int dim_frags(int hd) { return hd <= 64 ? 4 : 8; }
// bf16 per shared row of Q, K, V or dO; floats per row of an output tile.
__host__ __device__ constexpr int row_ld(int kd) { return 16 * kd + 8; }
__host__ __device__ constexpr int out_ld(int kd) { return 16 * kd + 4; }

// Bytes of the regions.
__host__ __device__ constexpr int64_t tile_bytes(int kd) { return int64_t{kTile} * row_ld(kd) * 2; }
constexpr int64_t kScoreBytes = int64_t{kRows} * kLdS * 4;  // a warp's float score rows
constexpr int64_t kProbBytes = int64_t{kRows} * kLdP * 2;   // a warp's bf16 rows
__host__ __device__ constexpr int64_t out_bytes(int kd) { return int64_t{kRows} * out_ld(kd) * 4; }
static_assert(kScoreBytes % 32 == 0 && kProbBytes % 32 == 0);
static_assert(tile_bytes(4) % 32 == 0 && tile_bytes(8) % 32 == 0);
static_assert(out_bytes(4) % 32 == 0 && out_bytes(8) % 32 == 0);
// The backward kernels stage their outputs through a warp's two score tiles.
static_assert(out_bytes(8) <= 2 * kScoreBytes);

// Dynamic shared memory of each kernel (bytes).
__host__ __device__ constexpr int64_t forward_smem(int kd) {
  return 3 * tile_bytes(kd) + kWarps * (kScoreBytes + kProbBytes + out_bytes(kd));
}
__host__ __device__ constexpr int64_t backward_dq_smem(int kd) {
  return 4 * tile_bytes(kd) + kWarps * (2 * kScoreBytes + kProbBytes);
}
__host__ __device__ constexpr int64_t backward_dkv_smem(int kd) {
  return 4 * tile_bytes(kd) + kWarps * (2 * kScoreBytes + 2 * kProbBytes) + 2 * kTile * 4;
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
    *reinterpret_cast<__nv_bfloat162*>(dst + r * ld + d) = __floats2bfloat162_rn(v.x, v.y);
  }
}

// dst (16 x 16 j.. fragments, float rows of kLdS) = A B^T for the warp's 16
// rows of `a` (bf16 rows of lda) against rows 16 j .. 16 j + 15 of `b`
// (bf16 rows of ldb), j in [j0, kFrags): kD dimension fragments each.
template <int kD>
__device__ inline void scores(float* dst, const bf16* a, int lda, const bf16* b, int ldb, int j0,
                              int j1) {
  FragA fa[kD];
#pragma unroll
  for (int t = 0; t < kD; ++t) wmma::load_matrix_sync(fa[t], a + 16 * t, lda);
  for (int j = j0; j < j1; ++j) {
    FragC acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int t = 0; t < kD; ++t) {
      FragBCol fb;
      wmma::load_matrix_sync(fb, b + 16 * j * ldb + 16 * t, ldb);
      wmma::mma_sync(acc, fa[t], fb, acc);
    }
    wmma::store_matrix_sync(dst + 16 * j, acc, kLdS, wmma::mem_row_major);
  }
}

// acc[t] += P B for t < kD: P the warp's bf16 rows (kLdP) fragments j in
// [j0, j1), B rows 16 j .. of a bf16 tile of ld `ldb`.
template <int kD>
__device__ inline void accumulate(FragC (&acc)[kD], const bf16* p, const bf16* b, int ldb, int j0,
                                  int j1) {
  for (int j = j0; j < j1; ++j) {
    FragA fp;
    wmma::load_matrix_sync(fp, p + 16 * j, kLdP);
#pragma unroll
    for (int t = 0; t < kD; ++t) {
      FragBRow fb;
      wmma::load_matrix_sync(fb, b + 16 * j * ldb + 16 * t, ldb);
      wmma::mma_sync(acc[t], fp, fb, acc[t]);
    }
  }
}

// The warp's 16 x 16 kD accumulators through its staging rows (floats of
// out_ld(kD)) into dst rows (row r at dst + r * ld_dst), columns < hd,
// rows < n, times `mul`. Lanes 2r and 2r + 1 write row r's halves.
template <int kD>
__device__ inline void write_rows(float* stage, const FragC (&acc)[kD], float* dst,
                                  int64_t ld_dst, int n, int hd, float mul) {
  constexpr int ld = out_ld(kD);
#pragma unroll
  for (int t = 0; t < kD; ++t) wmma::store_matrix_sync(stage + 16 * t, acc[t], ld, wmma::mem_row_major);
  __syncwarp();
  const int lane = static_cast<int>(threadIdx.x) % 32, r = lane >> 1, half = lane & 1;
  if (r < n) {
    for (int c = half * 8 * kD; c < (half + 1) * 8 * kD && c < hd; ++c)
      dst[r * ld_dst + c] = stage[r * ld + c] * mul;
  }
  __syncwarp();
}

// grid (batch * heads, query tiles).
template <int kD>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const float* __restrict__ qkv, float* __restrict__ out, float* __restrict__ lse,
                   int64_t seq, int64_t heads, int hd, float scale_log2) {
  BATON_DYNAMIC_SHARED(float, smem);
  constexpr int ldh = row_ld(kD), ldo = out_ld(kD);
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  char* at = reinterpret_cast<char*>(smem);
  bf16* qs = reinterpret_cast<bf16*>(at);
  bf16* ks = reinterpret_cast<bf16*>(at + tile_bytes(kD));
  bf16* vs = reinterpret_cast<bf16*>(at + 2 * tile_bytes(kD));
  at += 3 * tile_bytes(kD);
  float* ss = reinterpret_cast<float*>(at + warp * kScoreBytes);  // the warp's scores
  at += kWarps * kScoreBytes;
  bf16* ps = reinterpret_cast<bf16*>(at + warp * kProbBytes);  // and probabilities
  at += kWarps * kProbBytes;
  float* os = reinterpret_cast<float*>(at + warp * out_bytes(kD));  // and output rows

  const int64_t bh = blockIdx.x, b = bh / heads, h = bh % heads;
  const int64_t c = heads * hd, ld3 = 3 * c;
  // The last query tiles (the most key tiles) first.
  const int64_t q0 = static_cast<int64_t>(gridDim.y - 1 - blockIdx.y) * kTile;
  const float* base = qkv + b * seq * ld3 + h * hd;
  const int nq = seq - q0 < kTile ? static_cast<int>(seq - q0) : kTile;
  load_tile(qs, ldh, base + q0 * ld3, ld3, nq, hd);
  const int r = lane >> 1, half = lane & 1;
  const int64_t qi = q0 + warp * kRows + r;  // this lane's row
  const bool row_ok = qi < seq;
  for (int idx = lane; idx < kRows * ldo; idx += 32) os[idx] = 0.0f;
  float m = -INFINITY, l = 0.0f;  // l: this lane's half of the row's sum

  for (int64_t k0 = 0; k0 < q0 + nq; k0 += kTile) {
    const int nk = seq - k0 < kTile ? static_cast<int>(seq - k0) : kTile;
    __syncthreads();  // the previous tile's readers are done
    load_tile(ks, ldh, base + c + k0 * ld3, ld3, nk, hd);
    load_tile(vs, ldh, base + 2 * c + k0 * ld3, ld3, nk, hd);
    __syncthreads();
    // On the diagonal tile the key fragments past the warp's rows are masked.
    const int nf = k0 == q0 ? warp + 1 : kFrags;
    scores<kD>(ss, qs + warp * kRows * ldh, ldh, ks, ldh, 0, nf);
    __syncwarp();
    // Columns c <= lim are keys this row sees (lim >= 0 for a live row).
    const int64_t lim = qi - k0;
    const int c0 = half * 32, c1 = c0 + 32 < 16 * nf ? c0 + 32 : 16 * nf;
    float mx = -INFINITY;
    if (row_ok)
      for (int cc = c0; cc < c1 && cc <= lim; ++cc) mx = fmaxf(mx, ss[r * kLdS + cc]);
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    const float m_new = row_ok ? fmaxf(m, mx * scale_log2) : 0.0f;
    const float alpha = row_ok ? exp2f(m - m_new) : 1.0f;
    float sum = 0.0f;
    for (int cc = c0; cc < c1; ++cc) {
      const float p = row_ok && cc <= lim ? exp2f(ss[r * kLdS + cc] * scale_log2 - m_new) : 0.0f;
      ps[r * kLdP + cc] = __float2bfloat16_rn(p);
      sum += p;
    }
    l = l * alpha + sum;
    m = m_new;
    for (int cc = half * 8 * kD; cc < (half + 1) * 8 * kD; ++cc) os[r * ldo + cc] *= alpha;
    __syncwarp();
    FragC acc[kD];
#pragma unroll
    for (int t = 0; t < kD; ++t) wmma::load_matrix_sync(acc[t], os + 16 * t, ldo, wmma::mem_row_major);
    accumulate<kD>(acc, ps, vs, ldh, 0, nf);
#pragma unroll
    for (int t = 0; t < kD; ++t) wmma::store_matrix_sync(os + 16 * t, acc[t], ldo, wmma::mem_row_major);
    __syncwarp();
  }
  const float total = l + __shfl_xor_sync(0xffffffffu, l, 1);
  if (row_ok) {
    const float inv = 1.0f / total;
    float* orow = out + (b * seq + qi) * c + h * hd;
    for (int cc = half * 8 * kD; cc < (half + 1) * 8 * kD && cc < hd; ++cc)
      orow[cc] = os[r * ldo + cc] * inv;
    if (half == 0) lse[bh * seq + qi] = (m + log2f(total)) * kLn2;
  }
}

// grid (batch * heads, query tiles). dout: (batch * seq, C); writes the Q
// columns of dqkv and dsum (batch * heads * seq).
template <int kD>
__global__ void __launch_bounds__(kThreads)
    backward_dq_kernel(const float* __restrict__ qkv, const float* __restrict__ dout,
                       const float* __restrict__ lse, float* __restrict__ dqkv,
                       float* __restrict__ dsum, int64_t seq, int64_t heads, int hd, float scale,
                       float scale_log2) {
  BATON_DYNAMIC_SHARED(float, smem);
  constexpr int ldh = row_ld(kD);
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  char* at = reinterpret_cast<char*>(smem);
  bf16* qs = reinterpret_cast<bf16*>(at);
  bf16* dos = reinterpret_cast<bf16*>(at + tile_bytes(kD));
  bf16* ks = reinterpret_cast<bf16*>(at + 2 * tile_bytes(kD));
  bf16* vs = reinterpret_cast<bf16*>(at + 3 * tile_bytes(kD));
  at += 4 * tile_bytes(kD);
  float* ss = reinterpret_cast<float*>(at + warp * 2 * kScoreBytes);  // S, then dP, rows
  float* dps = ss + kRows * kLdS;
  at += kWarps * 2 * kScoreBytes;
  bf16* dss = reinterpret_cast<bf16*>(at + warp * kProbBytes);  // dS rows

  const int64_t bh = blockIdx.x, b = bh / heads, h = bh % heads;
  const int64_t c = heads * hd, ld3 = 3 * c;
  const int64_t q0 = static_cast<int64_t>(gridDim.y - 1 - blockIdx.y) * kTile;
  const float* base = qkv + b * seq * ld3 + h * hd;
  const int nq = seq - q0 < kTile ? static_cast<int>(seq - q0) : kTile;
  load_tile(qs, ldh, base + q0 * ld3, ld3, nq, hd);
  load_tile(dos, ldh, dout + (b * seq + q0) * c + h * hd, c, nq, hd);
  const int r = lane >> 1, half = lane & 1;
  const int64_t qi = q0 + warp * kRows + r;
  const bool row_ok = qi < seq;
  const float lse2 = row_ok ? lse[bh * seq + qi] * kLog2e : 0.0f;
  const bf16* qw = qs + warp * kRows * ldh;
  const bf16* dow = dos + warp * kRows * ldh;

  // S and dP of the warp's rows against a key tile; returns the fragments.
  auto load_and_score = [&](int64_t k0) {
    const int nk = seq - k0 < kTile ? static_cast<int>(seq - k0) : kTile;
    __syncthreads();  // the previous tile's readers are done
    load_tile(ks, ldh, base + c + k0 * ld3, ld3, nk, hd);
    load_tile(vs, ldh, base + 2 * c + k0 * ld3, ld3, nk, hd);
    __syncthreads();
    const int nf = k0 == q0 ? warp + 1 : kFrags;
    scores<kD>(ss, qw, ldh, ks, ldh, 0, nf);
    scores<kD>(dps, dow, ldh, vs, ldh, 0, nf);
    __syncwarp();
    return nf;
  };
  // Pass 1: D_i = sum_j P_ij dP_ij.
  float dacc = 0.0f;
  for (int64_t k0 = 0; k0 < q0 + nq; k0 += kTile) {
    const int nf = load_and_score(k0);
    const int64_t lim = qi - k0;
    const int c0 = half * 32, c1 = c0 + 32 < 16 * nf ? c0 + 32 : 16 * nf;
    if (row_ok) {
      for (int cc = c0; cc < c1 && cc <= lim; ++cc)
        dacc = fmaf(exp2f(ss[r * kLdS + cc] * scale_log2 - lse2), dps[r * kLdS + cc], dacc);
    }
    __syncwarp();
  }
  const float dd = dacc + __shfl_xor_sync(0xffffffffu, dacc, 1);
  // Pass 2: dS = P (dP - D), dQ += dS K.
  FragC dq[kD];
#pragma unroll
  for (int t = 0; t < kD; ++t) wmma::fill_fragment(dq[t], 0.0f);
  for (int64_t k0 = 0; k0 < q0 + nq; k0 += kTile) {
    const int nf = load_and_score(k0);
    const int64_t lim = qi - k0;
    const int c0 = half * 32, c1 = c0 + 32 < 16 * nf ? c0 + 32 : 16 * nf;
    for (int cc = c0; cc < c1; ++cc) {
      float g = 0.0f;
      if (row_ok && cc <= lim) {
        const float p = exp2f(ss[r * kLdS + cc] * scale_log2 - lse2);
        g = p * (dps[r * kLdS + cc] - dd);
      }
      dss[r * kLdP + cc] = __float2bfloat16_rn(g);
    }
    __syncwarp();
    accumulate<kD>(dq, dss, ks, ldh, 0, nf);
  }
  __syncwarp();
  const int live = nq - warp * kRows;  // rows of this warp inside the sequence
  write_rows<kD>(ss, dq, dqkv + (b * seq + q0 + warp * kRows) * ld3 + h * hd, ld3, live, hd,
                 scale);
  if (row_ok && half == 0) dsum[bh * seq + qi] = dd;
}

// grid (batch * heads, key tiles): the K and V columns of dqkv.
template <int kD>
__global__ void __launch_bounds__(kThreads)
    backward_dkv_kernel(const float* __restrict__ qkv, const float* __restrict__ dout,
                        const float* __restrict__ lse, const float* __restrict__ dsum,
                        float* __restrict__ dqkv, int64_t seq, int64_t heads, int hd, float scale,
                        float scale_log2) {
  BATON_DYNAMIC_SHARED(float, smem);
  constexpr int ldh = row_ld(kD);
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  char* at = reinterpret_cast<char*>(smem);
  bf16* ks = reinterpret_cast<bf16*>(at);
  bf16* vs = reinterpret_cast<bf16*>(at + tile_bytes(kD));
  bf16* qs = reinterpret_cast<bf16*>(at + 2 * tile_bytes(kD));
  bf16* dos = reinterpret_cast<bf16*>(at + 3 * tile_bytes(kD));
  at += 4 * tile_bytes(kD);
  float* sts = reinterpret_cast<float*>(at + warp * 2 * kScoreBytes);  // S^T, then dP^T, rows
  float* dpts = sts + kRows * kLdS;
  at += kWarps * 2 * kScoreBytes;
  bf16* pts = reinterpret_cast<bf16*>(at + warp * 2 * kProbBytes);  // P^T, then dS^T, rows
  bf16* dsts = pts + kRows * kLdP;
  at += kWarps * 2 * kProbBytes;
  float* lse_s = reinterpret_cast<float*>(at);  // the query tile's logsumexp (base 2)
  float* dd_s = lse_s + kTile;                  // and D

  const int64_t bh = blockIdx.x, b = bh / heads, h = bh % heads;
  const int64_t c = heads * hd, ld3 = 3 * c;
  const int64_t k0 = static_cast<int64_t>(blockIdx.y) * kTile;  // the first (most queries) first
  const float* base = qkv + b * seq * ld3 + h * hd;
  const int nk = seq - k0 < kTile ? static_cast<int>(seq - k0) : kTile;
  load_tile(ks, ldh, base + c + k0 * ld3, ld3, nk, hd);
  load_tile(vs, ldh, base + 2 * c + k0 * ld3, ld3, nk, hd);
  const int r = lane >> 1, half = lane & 1;
  const int64_t kj = k0 + warp * kRows + r;  // this lane's key
  const bool key_ok = kj < seq;
  const bf16* kw = ks + warp * kRows * ldh;
  const bf16* vw = vs + warp * kRows * ldh;

  FragC dk[kD], dv[kD];
#pragma unroll
  for (int t = 0; t < kD; ++t) {
    wmma::fill_fragment(dk[t], 0.0f);
    wmma::fill_fragment(dv[t], 0.0f);
  }
  // Queries before k0 see none of these keys.
  for (int64_t q0 = k0; q0 < seq; q0 += kTile) {
    const int nq = seq - q0 < kTile ? static_cast<int>(seq - q0) : kTile;
    __syncthreads();  // the previous tile's readers are done
    load_tile(qs, ldh, base + q0 * ld3, ld3, nq, hd);
    load_tile(dos, ldh, dout + (b * seq + q0) * c + h * hd, c, nq, hd);
    for (int i = static_cast<int>(threadIdx.x); i < kTile; i += static_cast<int>(blockDim.x)) {
      lse_s[i] = i < nq ? lse[bh * seq + q0 + i] * kLog2e : 0.0f;
      dd_s[i] = i < nq ? dsum[bh * seq + q0 + i] : 0.0f;
    }
    __syncthreads();
    // On the diagonal tile the query fragments before the warp's keys are masked.
    const int j0 = q0 == k0 ? warp : 0;
    scores<kD>(sts, kw, ldh, qs, ldh, j0, kFrags);
    scores<kD>(dpts, vw, ldh, dos, ldh, j0, kFrags);
    __syncwarp();
    const int c0 = half * 32 > 16 * j0 ? half * 32 : 16 * j0, c1 = half * 32 + 32;
    for (int cc = c0; cc < c1; ++cc) {
      const int64_t qi = q0 + cc;
      float p = 0.0f, g = 0.0f;
      if (key_ok && qi >= kj && cc < nq) {
        p = exp2f(sts[r * kLdS + cc] * scale_log2 - lse_s[cc]);
        g = p * (dpts[r * kLdS + cc] - dd_s[cc]);
      }
      pts[r * kLdP + cc] = __float2bfloat16_rn(p);
      dsts[r * kLdP + cc] = __float2bfloat16_rn(g);
    }
    __syncwarp();
    accumulate<kD>(dv, pts, dos, ldh, j0, kFrags);
    accumulate<kD>(dk, dsts, qs, ldh, j0, kFrags);
  }
  __syncwarp();
  const int live = nk - warp * kRows;
  float* row = dqkv + (b * seq + k0 + warp * kRows) * ld3 + c + h * hd;
  write_rows<kD>(sts, dk, row, ld3, live, hd, scale);
  write_rows<kD>(sts, dv, row + c, ld3, live, hd, 1.0f);
}

}  // namespace baton::gpu::kernels::flash
