// Attention kernels (gpu_backend_attention.cu): the causal softmax over the
// score matrices and its backward, a warp per row, and the one-query
// decode step, a block per head. The products around them are cuBLASLt's.
// The contract is the CPU's (engine/src/nn/cpu_attention.cpp,
// kernels_rows_loops.inc): softmax in float over columns 0..t of row t,
// zeros after; the dropout mask multiplies the probabilities into
// `dropped`; the backward pass writes the scores' gradient times the
// 1/sqrt(d) scale, zeros above the diagonal.
#pragma once

#include <cstdint>

#include "../kernel_language.cuh"
#include "row_reduce.cuh"

namespace baton::gpu::kernels {

constexpr int kAttnWarps = 8;  // warps (rows) per block of the row kernels

__device__ inline float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(reduce::kFullMask, v, o));
  return v;
}

// The maximum over the block, on every thread (`shared`: 32 floats).
__device__ inline float block_max(float v, float* shared) {
  const int lane = static_cast<int>(threadIdx.x) % reduce::kWarp;
  const int warp = static_cast<int>(threadIdx.x) / reduce::kWarp;
  const int warps = static_cast<int>(blockDim.x) / reduce::kWarp;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  return warp_max(lane < warps ? shared[lane] : -INFINITY);
}

// rows = batch * heads * seq rows of `seq` scores each (row r is query
// position r % seq of its matrix), in place in p: p = causal softmax. With
// a mask, dropped = p * mask over the whole row.
__global__ void __launch_bounds__(kAttnWarps * 32)
    causal_softmax_kernel(float* __restrict__ p, const float* __restrict__ mask,
                          float* __restrict__ dropped, int64_t rows, int64_t seq) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kAttnWarps + threadIdx.x / 32;
  if (r >= rows) return;  // whole warps leave together
  const int64_t t = r % seq;
  float* row = p + r * seq;
  float mx = -INFINITY;
  for (int64_t j = lane; j <= t; j += 32) mx = fmaxf(mx, row[j]);
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int64_t j = lane; j <= t; j += 32) sum += expf(row[j] - mx);
  sum = reduce::warp_sum(sum);
  const float inv = 1.0f / sum;
  const float* m = mask != nullptr ? mask + r * seq : nullptr;
  float* d = dropped != nullptr ? dropped + r * seq : nullptr;
  for (int64_t j = lane; j < seq; j += 32) {
    const float v = j <= t ? expf(row[j] - mx) * inv : 0.0f;
    row[j] = v;
    if (m != nullptr) d[j] = v * m[j];
  }
}

// In place on dp (the probabilities' gradient, rows as above): with the
// mask, dp *= mask first (the gradient of `dropped`); then dp = p * (dp -
// sum_j p_j dp_j) * scale over columns 0..t, zeros after.
__global__ void __launch_bounds__(kAttnWarps * 32)
    causal_softmax_backward_kernel(const float* __restrict__ p, float* __restrict__ dp,
                                   const float* __restrict__ mask, int64_t rows, int64_t seq,
                                   float scale) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kAttnWarps + threadIdx.x / 32;
  if (r >= rows) return;
  const int64_t t = r % seq;
  const float* pr = p + r * seq;
  float* dr = dp + r * seq;
  const float* m = mask != nullptr ? mask + r * seq : nullptr;
  float dot = 0.0f;
  for (int64_t j = lane; j <= t; j += 32) dot += pr[j] * (m != nullptr ? dr[j] * m[j] : dr[j]);
  dot = reduce::warp_sum(dot);
  for (int64_t j = lane; j < seq; j += 32) {
    float v = 0.0f;
    if (j <= t) {
      const float g = m != nullptr ? dr[j] * m[j] : dr[j];
      v = pr[j] * (g - dot) * scale;
    }
    dr[j] = v;
  }
}

// One query against `len` cached keys and values, a block per head (head
// = first_head + blockIdx.x): scores = K_h q_h / sqrt(d) (a warp per key,
// lanes over the head's dimensions), softmax, out_h = scores V_h (a thread
// per output dimension, reading V's rows coalesced). The scores live in
// `scores` (len floats, one head at a time) or, when it is null, in the
// launch's dynamic shared memory (len floats).
__global__ void attention_decode_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                        const float* __restrict__ v, int64_t len, int64_t heads,
                                        int64_t hd, float scale, float* scores, int64_t first_head,
                                        float* __restrict__ out) {
  BATON_DYNAMIC_SHARED(float, smem);
  __shared__ float red[32];
  float* s = scores != nullptr ? scores : smem;
  const int64_t h = first_head + blockIdx.x;
  const int64_t c = heads * hd;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int warps = static_cast<int>(blockDim.x) / 32;
  const float* qh = q + h * hd;
  for (int64_t j = warp; j < len; j += warps) {
    const float* kj = k + j * c + h * hd;
    float dot = 0.0f;
    for (int64_t d = lane; d < hd; d += 32) dot += qh[d] * kj[d];
    dot = reduce::warp_sum(dot);
    if (lane == 0) s[j] = dot * scale;
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) mx = fmaxf(mx, s[j]);
  mx = block_max(mx, red);
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    const float e = expf(s[j] - mx);
    s[j] = e;
    sum += e;
  }
  sum = reduce::block_sum(sum, red);  // its barriers also publish s
  const float inv = len > 0 ? 1.0f / sum : 0.0f;
  for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float acc = 0.0f;
    for (int64_t j = 0; j < len; ++j) acc += s[j] * inv * v[j * c + h * hd + d];
    out[h * hd + d] = acc;
  }
}

}  // namespace baton::gpu::kernels
