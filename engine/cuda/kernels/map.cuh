// Elementwise maps: one grid-stride kernel for every op that computes each
// element on its own (y = a + b, Adam's update, an activation). An op is a
// functor with
//   __device__ void operator()(int64_t i) const;   // element i
//   __device__ void vec4(int64_t j) const;         // elements 4j .. 4j+3
// map_kernel runs vec4 over the float4 body and operator() over the tail
// when every pointer the op touches is 16-byte aligned (checked at run time
// by the caller, see aligned16), and operator() everywhere otherwise.
#pragma once

#include <cstdint>

#include "../kernel_language.cuh"
#include "../launch.cuh"

namespace baton::gpu {

constexpr unsigned kThreads = 256;
// Grid-stride kernels stop growing the grid here (a few waves of an H200's
// 132 SMs); each thread then takes several elements.
constexpr unsigned kMaxMapBlocks = 8192;

inline bool aligned16(const void* p) {
  return p == nullptr || (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

template <class Op>
__global__ void __launch_bounds__(256) map_kernel(Op op, int64_t n, int vectorized) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t tail = 0;
  if (vectorized) {
    const int64_t n4 = n / 4;
    for (int64_t j = first; j < n4; j += stride) op.vec4(j);
    tail = n4 * 4;
  }
  for (int64_t i = tail + first; i < n; i += stride) op(i);
}

// Queues op over n elements on `stream`; `vectorized`: every pointer of
// op is 16-byte aligned. Returns the launch's error.
template <class Op>
cudaError_t launch_map(const Op& op, int64_t n, bool vectorized, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int64_t units = vectorized ? (n + 3) / 4 : n;
  unsigned blocks = blocks_for(units, kThreads);
  if (blocks > kMaxMapBlocks) blocks = kMaxMapBlocks;
  return launch(map_kernel<Op>, dim3(blocks), dim3(kThreads), 0, stream, op, n, vectorized ? 1 : 0);
}

__device__ __forceinline__ float4 load4(const float* p, int64_t j) {
  return reinterpret_cast<const float4*>(p)[j];
}
__device__ __forceinline__ void store4(float* p, int64_t j, float4 v) {
  reinterpret_cast<float4*>(p)[j] = v;
}

}  // namespace baton::gpu
