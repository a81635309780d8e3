// Memory on a device the host cannot read (a GPU's, or the GPU emulator's):
// what a Tensor needs to keep its values there. A DeviceBackend (nn) is
// one; the CPU has none (a Tensor without a DeviceMemory is host memory).
// Copies are in the device's stream order; upload and download return
// when the host buffer may be reused or read.
#pragma once

#include <cstddef>
#include <cstdint>

namespace baton {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // At least 256-byte aligned; RuntimeError naming the size when there is
  // no room.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p) = 0;  // never throws
  virtual void upload(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual void download(void* host_dst, const void* device_src, size_t bytes) = 0;
  virtual void copy_on_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill_floats(float* y, int64_t n, float value) = 0;
  virtual void fill_zero_bytes(void* y, size_t bytes) = 0;
};

}  // namespace baton
