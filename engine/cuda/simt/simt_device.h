// The SIMT emulator, device side: what a kernel compiled by the host
// compiler calls for its coordinates, barriers, warp intrinsics and
// atomics. kernel_language.cuh maps the CUDA spellings onto these.
//
// Every thread of a block is a fiber on the OS thread that runs the block.
// A fiber runs until it reaches a barrier or a warp intrinsic, then hands
// over; the scheduler (simt_scheduler.cpp) releases a barrier only when
// every thread of the block has reached it, and a warp intrinsic only when
// every lane its mask names has reached its own matching call. A barrier
// that part of the block never reaches (exited threads, or threads waiting
// at another barrier), a lane named in a mask that has exited, a mask that
// omits its caller and a read from a lane outside the mask are reported
// (the launch then fails with cudaErrorLaunchFailure, and
// baton_simt_last_diagnostic() says where), as compute-sanitizer's
// synccheck reports them on a GPU.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace baton::simt {

const uint3& thread_index();
const uint3& block_index();
const dim3& block_dim();
const dim3& grid_dim();
void* dynamic_shared();
unsigned lane_id();

void syncthreads(const char* file, int line);
void syncwarp(const char* file, int line, unsigned mask = 0xffffffffu);

// Deposits this lane's 64-bit value, waits until every lane in `mask` has
// made its matching call, and fills all[lane] for the lanes in `mask`.
// `what` names the intrinsic in diagnostics.
void warp_exchange(unsigned mask, uint64_t mine, uint64_t all[32], const char* what);
// Reports a kernel-side contract violation (the launch fails).
void report(const char* what);

template <class T>
uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T>
T from_bits(uint64_t b) {
  T v;
  std::memcpy(&v, &b, sizeof(T));
  return v;
}

// Source lane of a shuffle, or -1 when the lane keeps its own value.
template <class T>
T shuffle(unsigned mask, T v, int width, const char* what, int (*source)(int lane, int arg, int w),
          int arg) {
  uint64_t all[32];
  warp_exchange(mask, to_bits(v), all, what);
  const int src = source(static_cast<int>(lane_id()), arg, width);
  if (src < 0) return v;
  if (!(mask >> src & 1u)) report("a shuffle read a lane that its mask does not name");
  return from_bits<T>(all[src]);
}

inline int shfl_src(int lane, int src, int w) { return (lane / w) * w + (src % w); }
inline int shfl_xor_src(int lane, int m, int w) {
  const int s = lane ^ m;
  return s / w == lane / w ? s : -1;
}
inline int shfl_down_src(int lane, int d, int w) {
  const int s = lane + d;
  return s / w == lane / w ? s : -1;
}
inline int shfl_up_src(int lane, int d, int w) {
  const int s = lane - d;
  return s >= 0 && s / w == lane / w ? s : -1;
}

}  // namespace baton::simt

template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return baton::simt::shuffle(mask, v, width, "__shfl_sync", baton::simt::shfl_src, src);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return baton::simt::shuffle(mask, v, width, "__shfl_xor_sync", baton::simt::shfl_xor_src,
                              lane_mask);
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return baton::simt::shuffle(mask, v, width, "__shfl_down_sync", baton::simt::shfl_down_src,
                              static_cast<int>(delta));
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return baton::simt::shuffle(mask, v, width, "__shfl_up_sync", baton::simt::shfl_up_src,
                              static_cast<int>(delta));
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
  uint64_t all[32];
  baton::simt::warp_exchange(mask, predicate != 0, all, "__ballot_sync");
  unsigned out = 0;
  for (int l = 0; l < 32; ++l)
    if ((mask >> l & 1u) && all[l]) out |= 1u << l;
  return out;
}
inline int __all_sync(unsigned mask, int predicate) {
  return __ballot_sync(mask, predicate) == mask;
}
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }

// ---- atomics (other streams' kernels may run at the same time)
template <class T>
T baton_simt_atomic_add(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_add(v, std::memory_order_relaxed);
}
inline float atomicAdd(float* p, float v) { return baton_simt_atomic_add(p, v); }
inline double atomicAdd(double* p, double v) { return baton_simt_atomic_add(p, v); }
inline int atomicAdd(int* p, int v) { return baton_simt_atomic_add(p, v); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return baton_simt_atomic_add(p, v); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return baton_simt_atomic_add(p, v);
}
template <class T>
T baton_simt_atomic_cas(T* p, T expected, T desired) {
  std::atomic_ref<T>(*p).compare_exchange_strong(expected, desired);
  return expected;
}
inline int atomicCAS(int* p, int c, int v) { return baton_simt_atomic_cas(p, c, v); }
inline unsigned atomicCAS(unsigned* p, unsigned c, unsigned v) {
  return baton_simt_atomic_cas(p, c, v);
}
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long c,
                                    unsigned long long v) {
  return baton_simt_atomic_cas(p, c, v);
}
inline int atomicExch(int* p, int v) { return std::atomic_ref<int>(*p).exchange(v); }
inline float atomicExch(float* p, float v) { return std::atomic_ref<float>(*p).exchange(v); }
inline int atomicMax(int* p, int v) {
  std::atomic_ref<int> a(*p);
  int old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}
inline int atomicMin(int* p, int v) {
  std::atomic_ref<int> a(*p);
  int old = a.load();
  while (old > v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}

// ---- the device math the kernels use that the C library lacks
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz(static_cast<unsigned>(v)); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
template <class T>
T __ldg(const T* p) {
  return *p;
}
