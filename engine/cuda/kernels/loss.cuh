// Kernels of the losses (gpu_backend_loss.cu). Softmax cross-entropy is a
// block per row: one pass over the classes keeps a running maximum, the sum
// of exponentials rescaled to it (the online softmax) and the first argmax;
// a second pass, only when the gradient is wanted, writes it. The logits are
// read once for the loss alone and twice with the gradient, whatever the
// vocabulary. Per-block partial sums (loss, counts) go to the backend's
// partials scratch, summed on the host in block order: deterministic.
#pragma once

#include <cstdint>

#include "../kernel_language.cuh"
#include "row_reduce.cuh"

namespace baton::gpu::loss {

constexpr unsigned kThreads = 256;
// At most this many blocks (each one's loss and counts are two partials):
// 2 x 2048 fits the backend's first partials scratch, and 2048 blocks of
// 256 threads are two waves on an H100/H200.
constexpr unsigned kMaxXentBlocks = 2048;
constexpr int kNoIndex = 0x7fffffff;

// Running softmax statistics of a set of logits: their maximum m, the sum
// of exp(z - m), and the first index holding the maximum.
struct OnlineMax {
  float m, s;
  int arg;
};

// (a) and (b) merged: the larger maximum wins (the lower index on a tie),
// each sum rescaled to it. Symmetric, so both lanes of a butterfly get the
// same bits.
__device__ inline OnlineMax merge(OnlineMax a, OnlineMax b) {
  OnlineMax o;
  o.m = fmaxf(a.m, b.m);
  const float sa = a.s == 0.0f ? 0.0f : a.s * expf(a.m - o.m);
  const float sb = b.s == 0.0f ? 0.0f : b.s * expf(b.m - o.m);
  o.s = sa + sb;
  o.arg = b.m > a.m || (b.m == a.m && b.arg < a.arg) ? b.arg : a.arg;
  return o;
}

__device__ inline OnlineMax warp_merge(OnlineMax v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    OnlineMax other;
    other.m = __shfl_xor_sync(reduce::kFullMask, v.m, o);
    other.s = __shfl_xor_sync(reduce::kFullMask, v.s, o);
    other.arg = __shfl_xor_sync(reduce::kFullMask, v.arg, o);
    v = merge(v, other);
  }
  return v;
}

// The block's statistics on every thread; the shared slots are reused by
// the next row (the barrier in front orders the reuse).
__device__ inline OnlineMax block_merge(OnlineMax v, OnlineMax* shared) {
  const int lane = static_cast<int>(threadIdx.x) % reduce::kWarp;
  const int warp = static_cast<int>(threadIdx.x) / reduce::kWarp;
  const int warps = static_cast<int>(blockDim.x) / reduce::kWarp;
  v = warp_merge(v);
  __syncthreads();  // the previous row's readers are done with `shared`
  if (lane == 0) shared[warp] = v;
  __syncthreads();  // every warp's statistics are in `shared`
  OnlineMax all = shared[0];
  for (int w = 1; w < warps; ++w) all = merge(all, shared[w]);  // warp order: every thread alike
  return all;
}

// Rows r = blockIdx.x, + gridDim.x, ...: loss += log(sum exp(z - m)) - (z[label] - m);
// dlogits (may be null) = softmax * grad_scale - onehot * grad_scale.
// loss_part[block] = its rows' loss; count_part[block] = its correct argmaxes
// + (rows + 1) * its labels outside [0, classes): both counts exact in one
// double (for rows < 2^26), taken apart on the host.
__global__ void softmax_xent_kernel(const float* logits, const int32_t* labels, float* dlogits,
                                    int64_t n_rows, int64_t classes, float grad_scale,
                                    double* loss_part, double* count_part) {
  __shared__ OnlineMax shared[reduce::kWarp];
  double loss = 0.0;
  int64_t hits = 0, bad = 0;
  for (int64_t r = blockIdx.x; r < n_rows; r += gridDim.x) {
    const int32_t label = labels[r];
    if (label < 0 || label >= classes) {  // the same for the whole block
      ++bad;
      continue;
    }
    const float* z = logits + r * classes;
    OnlineMax t{-INFINITY, 0.0f, kNoIndex};
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      const float v = z[c];
      if (v > t.m) {
        t.s = t.s * expf(t.m - v) + 1.0f;  // exp(-inf) = 0 for the first
        t.m = v;
        t.arg = static_cast<int>(c);
      } else {
        t.s += expf(v - t.m);
      }
    }
    const OnlineMax all = block_merge(t, shared);
    loss += static_cast<double>(logf(all.s) - (z[label] - all.m));
    hits += all.arg == label;
    if (dlogits != nullptr) {
      float* d = dlogits + r * classes;
      const float inv = grad_scale / all.s;
      for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
        const float p = expf(z[c] - all.m) * inv;
        d[c] = c == label ? p - grad_scale : p;
      }
    }
  }
  if (threadIdx.x == 0) {
    loss_part[blockIdx.x] = loss;
    count_part[blockIdx.x] =
        static_cast<double>(hits) + static_cast<double>(bad) * static_cast<double>(n_rows + 1);
  }
}

// Mean squared error: dout = 2 (out - target) / k * grad_scale;
// part[block] = the block's sum of (out - target)^2 in double.
__global__ void mse_kernel(const float* out, const float* target, float* dout, int64_t n,
                           float inv_k, float grad_scale, double* part) {
  __shared__ double shared[reduce::kWarp];
  double sum = 0.0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float d = out[i] - target[i];
    sum += static_cast<double>(d) * d;
    dout[i] = 2.0f * d * inv_k * grad_scale;
  }
  sum = reduce::block_sum(sum, shared);
  if (threadIdx.x == 0) part[blockIdx.x] = sum;
}

}  // namespace baton::gpu::loss
