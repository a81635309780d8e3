// The CUDA runtime API's memory calls on the SIMT emulator (the real
// header's signatures): device allocations behind mprotect
// (simt_memory.cpp), pinned host memory, and copies and sets in stream
// order, each checked against its direction as the runtime checks it.
#include <cstring>
#include <memory>
#include <vector>

#include "simt_host.h"
#include "simt_internal.h"
#include "simt_streams.h"

using namespace baton::simt;

extern "C" {

// ---- memory

cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = nullptr;
  if (cudaError_t s = sticky_error(); s != cudaSuccess) return record(s);
  const int dev = current_device();
  if (device_bytes_in_use(dev) + bytes > device_properties().totalGlobalMem)
    return record(cudaErrorMemoryAllocation);
  *p = device_alloc(bytes, dev);
  return *p ? cudaSuccess : record(cudaErrorMemoryAllocation);
}
cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  // cudaFree synchronises the allocation's device.
  const int dev = device_of_range(p, 1);
  synchronize_device(dev < 0 ? current_device() : dev);
  return device_free(p) ? cudaSuccess : record(cudaErrorInvalidValue);
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
  *p = pinned_alloc(bytes);
  return *p ? cudaSuccess : record(cudaErrorMemoryAllocation);
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int) { return cudaMallocHost(p, bytes); }
cudaError_t cudaFreeHost(void* p) {
  if (!p) return cudaSuccess;
  return pinned_free(p) ? cudaSuccess : record(cudaErrorInvalidValue);
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  *total = device_properties().totalGlobalMem;
  const size_t used = device_bytes_in_use(current_device());
  *free_bytes = used < *total ? *total - used : 0;
  return cudaSuccess;
}

namespace {

// Checks a copy's pointers against its direction, as the runtime does.
cudaError_t check_copy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  const bool dst_dev = is_device_range(dst, n), src_dev = is_device_range(src, n);
  switch (kind) {
    case cudaMemcpyHostToDevice:
      return dst_dev && !is_device_pointer(src) ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToHost:
      return src_dev && !is_device_pointer(dst) ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyDeviceToDevice:
      return dst_dev && src_dev ? cudaSuccess : cudaErrorInvalidValue;
    case cudaMemcpyHostToHost:
      return !is_device_pointer(dst) && !is_device_pointer(src) ? cudaSuccess
                                                                : cudaErrorInvalidValue;
    case cudaMemcpyDefault:
      if (is_device_pointer(dst) && !dst_dev) return cudaErrorInvalidValue;
      if (is_device_pointer(src) && !src_dev) return cudaErrorInvalidValue;
      return cudaSuccess;
  }
  return cudaErrorInvalidMemcpyDirection;
}

}  // namespace

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (cudaError_t s = sticky_error(); s != cudaSuccess) return record(s);
  if (n == 0) return cudaSuccess;
  if (cudaError_t e = check_copy(dst, src, n, kind); e != cudaSuccess) return record(e);
  const bool to_host = !is_device_pointer(dst), from_host = !is_device_pointer(src);
  if (from_host && !is_pinned(src, n)) {
    // Pageable source: staged at the call, as the runtime does, so the
    // caller may reuse it at once.
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                      static_cast<const char*>(src) + n);
    return record(stream_enqueue(stream, [dst, staged] {
      DeviceWindow open;
      std::memcpy(dst, staged->data(), staged->size());
    }));
  }
  cudaError_t st = stream_enqueue(stream, [dst, src, n] {
    DeviceWindow open;
    std::memcpy(dst, src, n);
  });
  // Pageable destination: the call returns when the bytes are there.
  if (st == cudaSuccess && to_host && !is_pinned(dst, n)) st = stream_synchronize(stream);
  return record(st);
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  cudaError_t st = cudaMemcpyAsync(dst, src, n, kind, nullptr);
  if (st == cudaSuccess) st = stream_synchronize(nullptr);
  return record(st);
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t stream) {
  if (cudaError_t s = sticky_error(); s != cudaSuccess) return record(s);
  if (n == 0) return cudaSuccess;
  if (!is_device_range(p, n)) return record(cudaErrorInvalidValue);
  return record(stream_enqueue(stream, [p, value, n] {
    DeviceWindow open;
    std::memset(p, value, n);
  }));
}
cudaError_t cudaMemset(void* p, int value, size_t n) {
  cudaError_t st = cudaMemsetAsync(p, value, n, nullptr);
  if (st == cudaSuccess) st = stream_synchronize(nullptr);
  return record(st);
}

}  // extern "C"
