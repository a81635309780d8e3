// Reductions shared by the row and column kernels of norm.cuh, loss.cuh,
// tokens.cuh and images.cuh: sums over a warp (shuffles) and over a block
// (shuffles, then one value per warp through shared memory). Every one
// combines in a fixed order, and the butterfly (xor) shuffles leave the
// same bits on every lane, so a result is the same run to run and on every
// thread that asks for it. Blocks are whole warps (blockDim.x a multiple of
// 32) wherever these are called.
#pragma once

#include <cstdint>

#include "../kernel_language.cuh"

namespace baton::gpu::reduce {

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;

// Set bits of a 32-bit mask (the kernel language has __popc only under nvcc).
__device__ inline int popcount(unsigned v) {
#if defined(__CUDACC__)
  return __popc(v);
#else
  return __builtin_popcount(v);
#endif
}

// The sum over the warp, on every lane. T: float, double, int.
template <class T>
__device__ inline T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFullMask, v, o);
  return v;
}

// Two sums at once (a pass that needs both pays one round of barriers).
__device__ inline void warp_sum2(float& a, float& b) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    a += __shfl_xor_sync(kFullMask, a, o);
    b += __shfl_xor_sync(kFullMask, b, o);
  }
}

// The sum over the block, on every thread. `shared` holds 32 values; it may
// be reused by the next call (the barrier in front orders the reuse).
template <class T>
__device__ inline T block_sum(T v, T* shared) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int warps = static_cast<int>(blockDim.x) / kWarp;
  v = warp_sum(v);
  __syncthreads();  // an earlier call's readers are done with `shared`
  if (lane == 0) shared[warp] = v;
  __syncthreads();  // every warp's sum is in `shared`
  return warp_sum(lane < warps ? shared[lane] : T(0));
}

__device__ inline void block_sum2(float& a, float& b, float* shared_a, float* shared_b) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int warps = static_cast<int>(blockDim.x) / kWarp;
  warp_sum2(a, b);
  __syncthreads();  // an earlier call's readers are done with the shared slots
  if (lane == 0) {
    shared_a[warp] = a;
    shared_b[warp] = b;
  }
  __syncthreads();  // every warp's sums are in shared memory
  a = lane < warps ? shared_a[lane] : 0.0f;
  b = lane < warps ? shared_b[lane] : 0.0f;
  warp_sum2(a, b);
}

// Threads per block for a loop over `items` per block: whole warps, at
// most `cap` (small rows do not launch idle fibers, which the emulator
// would still run).
inline unsigned threads_for(long long items, unsigned cap) {
  long long t = (items + kWarp - 1) / kWarp * kWarp;
  if (t < kWarp) t = kWarp;
  return static_cast<unsigned>(t < static_cast<long long>(cap) ? t : cap);
}

}  // namespace baton::gpu::reduce
