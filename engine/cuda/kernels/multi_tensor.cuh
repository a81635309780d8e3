// Multi-tensor kernels for the optimizer (gpu_backend_optim.cu): a list of
// up to kListTensors tensors and kListChunks chunks of them, passed by value
// as the kernel's argument (under 4 KiB), one block per chunk, as apex's
// multi_tensor_apply does. A step's hundreds of parameters then take a few
// launches per pass instead of a few per parameter. The arithmetic is the
// single-tensor ops' (optim.cuh's AdamOp, SgdOp, SgdMomentumOp).
#pragma once

#include <cstdint>

#include "optim.cuh"

namespace baton::gpu::multi {

constexpr int kListTensors = 24;
constexpr int kListChunks = 320;
constexpr int64_t kChunk = 65536;  // elements of one block's chunk
constexpr unsigned kThreads = 256;

struct TensorList {
  float* value[kListTensors];
  float* grad[kListTensors];
  float* m[kListTensors];
  float* v[kListTensors];
  int64_t n[kListTensors];
  float weight_decay[kListTensors];
  int32_t chunk_tensor[kListChunks];  // chunk c is tensor chunk_tensor[c]'s
  int32_t chunk_index[kListChunks];   // chunk_index[c]-th chunk of kChunk elements
  int32_t chunks;
};

// The element range of block blockIdx.x's chunk.
struct ChunkRange {
  int t;
  int64_t begin, end;
};
__device__ __forceinline__ ChunkRange chunk_range(const TensorList& l) {
  const int c = static_cast<int>(blockIdx.x);
  const int t = l.chunk_tensor[c];
  const int64_t begin = static_cast<int64_t>(l.chunk_index[c]) * kChunk;
  const int64_t end = begin + kChunk < l.n[t] ? begin + kChunk : l.n[t];
  return {t, begin, end};
}

// The sum of v over the block (blockDim.x == kThreads), in thread 0.
__device__ __forceinline__ double block_total(double v) {
  __shared__ double warp_sums[kThreads / 32];
  for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = 0.0;
  if (warp == 0) {
    v = lane < kThreads / 32 ? warp_sums[lane] : 0.0;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
  }
  return v;
}

// partial[first + c] = sum of grad^2 over chunk c (in double; the order of
// the terms is fixed by the list alone, so the sum is the same every run).
__global__ void __launch_bounds__(kThreads)
    grad_squares_kernel(TensorList l, double* partial, int64_t first) {
  const ChunkRange r = chunk_range(l);
  const float* g = l.grad[r.t];
  double s = 0.0;
  for (int64_t i = r.begin + threadIdx.x; i < r.end; i += kThreads)
    s += static_cast<double>(g[i]) * g[i];
  s = block_total(s);
  if (threadIdx.x == 0) partial[first + blockIdx.x] = s;
}

// One block: partial[count] = the sum of partial[0, count) (in a fixed
// order), partial[count + 1] = the clipping factor: max_norm / (norm +
// 1e-6) when max_norm > 0 and the norm exceeds it, else 1.
__global__ void __launch_bounds__(kThreads)
    clip_factor_kernel(double* partial, int64_t count, float max_norm) {
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < count; i += kThreads) s += partial[i];
  s = block_total(s);
  if (threadIdx.x == 0) {
    const double norm = sqrt(s);
    partial[count] = s;
    partial[count + 1] = max_norm > 0.0f && norm > max_norm
                             ? static_cast<double>(static_cast<float>(max_norm / (norm + 1e-6)))
                             : 1.0;
  }
}

// grad *= *factor over every chunk (nothing when the factor is 1).
__global__ void __launch_bounds__(kThreads) scale_grads_kernel(TensorList l, const double* factor) {
  const float f = static_cast<float>(*factor);
  if (f == 1.0f) return;
  const ChunkRange r = chunk_range(l);
  float* g = l.grad[r.t];
  for (int64_t i = r.begin + threadIdx.x; i < r.end; i += kThreads) g[i] *= f;
}

// Adam/AdamW: the step's scalars but the decay from each tensor's weight
// decay (decoupled: p *= 1 - lr wd; else wd p added to the gradient).
struct AdamScalars {
  float lr, step, inv_bc2_sqrt, b1, b2, c1, c2, eps;
  int decoupled;
};
__global__ void __launch_bounds__(kThreads) adam_kernel(TensorList l, AdamScalars a) {
  const ChunkRange r = chunk_range(l);
  const float wd = l.weight_decay[r.t];
  const AdamOp op{l.value[r.t], l.grad[r.t], l.m[r.t], l.v[r.t], a.step, a.inv_bc2_sqrt,
                  a.decoupled ? 1.0f - a.lr * wd : 1.0f, a.b1, a.b2, a.c1, a.c2,
                  a.decoupled ? 0.0f : wd, a.eps};
  for (int64_t i = r.begin + threadIdx.x; i < r.end; i += kThreads) op(i);
}

// SGD, with a momentum buffer (m) when momentum > 0.
__global__ void __launch_bounds__(kThreads)
    sgd_kernel(TensorList l, float lr, float momentum, int nesterov) {
  const ChunkRange r = chunk_range(l);
  const float wd = l.weight_decay[r.t];
  if (momentum > 0.0f) {
    const SgdMomentumOp op{l.value[r.t], l.grad[r.t], l.m[r.t], lr, momentum, wd, nesterov};
    for (int64_t i = r.begin + threadIdx.x; i < r.end; i += kThreads) op(i);
  } else {
    const SgdOp op{l.value[r.t], l.grad[r.t], lr, wd};
    for (int64_t i = r.begin + threadIdx.x; i < r.end; i += kThreads) op(i);
  }
}

}  // namespace baton::gpu::multi
