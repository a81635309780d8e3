// Kernels of the token ops (gpu_backend_tokens.cu): float token ids to
// int32 with a count of bad ones, the embedding gather, and its
// deterministic scatter-add.
//
// The scatter-add (dtable[ids[i]] += dout[i]) without atomics: a block per
// token i scans all the ids in chunks of blockDim. The first token holding
// an id owns that id's table row; the block of any later token with the
// same id stops at the chunk where it sees the earlier one. The owner
// collects its id's tokens chunk by chunk (a ballot compacts each chunk's
// matches in token order into shared memory) and adds their rows of dout
// to the table row's old value, each column by one thread, in token order
// (the first 1,024 columns in registers, the rest in place): the same sums
// in the same order as the CPU's loop, bit for bit, whatever the schedule.
// Cost: n blocks reading up to n ids each (n^2 int compares, 67M for
// n = 8192, the ids from L1/L2; a later token's block stops at the first
// holder of its id), every dout row read once, and each used table row
// read and written once; independent of the vocabulary (a block per table
// row would scan the ids vocab times).
#pragma once

#include <cstdint>

#include "../kernel_language.cuh"
#include "row_reduce.cuh"

namespace baton::gpu::tokens {

constexpr unsigned kThreads = 256;
// The scatter-add keeps each thread's first columns of the owned row in
// registers (1,024 columns at 256 threads), the rest in global memory:
// either way the row's old value, then each token's in token order.
constexpr int kRegisterColumns = 4;

// ids[i] = x[i]; bad_part[block] = how many of the block's values are not
// integers in [0, vocab) (their ids are left unwritten).
__global__ void token_ids_kernel(const float* x, int32_t* ids, int64_t n, int64_t vocab,
                                 double* bad_part) {
  __shared__ int shared[reduce::kWarp];
  int bad = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float v = x[i];
    if (!(v >= 0.0f && v < static_cast<float>(vocab)) || v != floorf(v)) {
      ++bad;
    } else {
      ids[i] = static_cast<int32_t>(v);
    }
  }
  bad = reduce::block_sum(bad, shared);
  if (threadIdx.x == 0) bad_part[blockIdx.x] = bad;
}

// out[i] = table[ids[i]]: a block per row (grid-stride), threads over the
// columns, four at a time when `kVec4` (dim % 4 == 0 and 16-byte aligned
// pointers: the caller checks).
template <bool kVec4>
__global__ void embedding_forward_kernel(const int32_t* ids, const float* table, float* out,
                                         int64_t n, int64_t dim) {
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const float* src = table + static_cast<int64_t>(ids[i]) * dim;
    float* dst = out + i * dim;
    if constexpr (kVec4) {
      const float4* s4 = reinterpret_cast<const float4*>(src);
      float4* d4 = reinterpret_cast<float4*>(dst);
      for (int64_t c = threadIdx.x; c < dim / 4; c += blockDim.x) d4[c] = s4[c];
    } else {
      for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) dst[c] = src[c];
    }
  }
}

// dtable[ids[i]] += dout[i], deterministic (see the top of this file).
// blockDim.x: whole warps, at most kThreads.
__global__ void embedding_backward_kernel(const int32_t* ids, const float* dout, float* dtable,
                                          int64_t n, int64_t dim) {
  __shared__ int64_t match[kThreads];  // this chunk's tokens with the id, in order
  __shared__ int warp_hits[kThreads / reduce::kWarp];
  const int lane = static_cast<int>(threadIdx.x) % reduce::kWarp;
  const int warp = static_cast<int>(threadIdx.x) / reduce::kWarp;
  const int warps = static_cast<int>(blockDim.x) / reduce::kWarp;
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const int32_t id = ids[i];
    float* row = dtable + static_cast<int64_t>(id) * dim;
    bool first_seen = false;      // block-uniform: every thread reads the same shared values
    float acc[kRegisterColumns];  // the owned row's first columns, summed in registers
    for (int64_t j0 = 0; j0 < n; j0 += blockDim.x) {
      const int64_t j = j0 + threadIdx.x;
      const bool hit = j < n && ids[j] == id;
      const unsigned ballot = __ballot_sync(reduce::kFullMask, hit);
      __syncthreads();  // the previous chunk's readers are done with match[]
      if (lane == 0) warp_hits[warp] = reduce::popcount(ballot);
      __syncthreads();  // every warp's count is in
      int before = 0, total = 0;
      for (int w = 0; w < warps; ++w) {
        before += w < warp ? warp_hits[w] : 0;
        total += warp_hits[w];
      }
      if (hit) match[before + reduce::popcount(ballot & ((1u << lane) - 1u))] = j;
      __syncthreads();  // the chunk's matches are in match[]
      if (total == 0) continue;
      // An earlier token holds the id: its block owns the row.
      if (!first_seen && match[0] != i) break;
      if (!first_seen) {
#pragma unroll
        for (int q = 0; q < kRegisterColumns; ++q) {
          const int64_t c = threadIdx.x + static_cast<int64_t>(q) * blockDim.x;
          acc[q] = c < dim ? row[c] : 0.0f;
        }
        first_seen = true;
      }
      for (int k = 0; k < total; ++k) {
        const float* src = dout + match[k] * dim;
#pragma unroll
        for (int q = 0; q < kRegisterColumns; ++q) {
          const int64_t c = threadIdx.x + static_cast<int64_t>(q) * blockDim.x;
          if (c < dim) acc[q] += src[c];
        }
        for (int64_t c = threadIdx.x + kRegisterColumns * static_cast<int64_t>(blockDim.x); c < dim;
             c += blockDim.x) {
          row[c] += src[c];
        }
      }
    }
    if (first_seen) {
#pragma unroll
      for (int q = 0; q < kRegisterColumns; ++q) {
        const int64_t c = threadIdx.x + static_cast<int64_t>(q) * blockDim.x;
        if (c < dim) row[c] = acc[q];
      }
    }
  }
}

}  // namespace baton::gpu::tokens
