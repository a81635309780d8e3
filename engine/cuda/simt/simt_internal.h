// The SIMT emulator's internals shared by its files: the per-OS-thread block
// runner (simt_scheduler.cpp), the device memory registry
// (simt_memory.cpp), the streams (simt_streams.cpp) and the sticky error.
// The emulated device is process-wide state, as a GPU driver's is: one
// Runtime, made on first use.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace baton::simt {

// Runs every block of a grid on the calling thread, each block's threads
// as fibers. Returns cudaSuccess, or cudaErrorLaunchFailure with the
// diagnostic in *error (a barrier or warp intrinsic misused, a deadlock).
cudaError_t run_grid(const std::function<void()>& body, dim3 grid, dim3 block, size_t dynamic_smem,
                     const char* kernel_name, std::string* error);

// Device memory. Allocations are page-backed with a guard page after each
// and are not accessible from the host except inside a DeviceWindow (held
// while a kernel, a copy or a library stand-in runs).
void* device_alloc(size_t bytes, int device);
bool device_free(void* p);  // false when p is not a live allocation
bool is_device_pointer(const void* p);
size_t device_bytes_in_use(int device);
// Whether device memory is closed by a protection key (a window opens it
// for its own thread) rather than by mprotect (a window opens it for all).
bool protected_by_key();
class DeviceWindow {
 public:
  DeviceWindow();
  ~DeviceWindow();
  DeviceWindow(const DeviceWindow&) = delete;
  DeviceWindow& operator=(const DeviceWindow&) = delete;
};

// Pinned host memory (cudaMallocHost): plain host memory that copies treat
// as asynchronous.
void* pinned_alloc(size_t bytes);
bool pinned_free(void* p);
bool is_pinned(const void* p, size_t bytes);

// Records e as this host thread's last error (cudaGetLastError) unless it
// is cudaSuccess; returns e.
cudaError_t record(cudaError_t e);

// The device-wide sticky error (after a failed kernel every call returns
// it until cudaDeviceReset) and the last diagnostic.
cudaError_t sticky_error();
void set_sticky(cudaError_t e, const std::string& diagnostic);
void clear_sticky();
void set_diagnostic(const std::string& diagnostic);

// Streams (simt_streams.cpp).
cudaStream_t resolve_stream(cudaStream_t s);  // 0 / legacy -> the legacy stream
cudaError_t stream_enqueue(cudaStream_t s, std::function<void()> op);
// The device a stream was made on (-1: the legacy stream, every device's).
int stream_device(cudaStream_t s);
cudaError_t stream_synchronize(cudaStream_t s);
void synchronize_all();
// Waits for the work queued so far on `device`'s streams and the legacy
// stream (the emulator's, shared by its devices): what cudaFree and
// cudaDeviceSynchronize wait for on a GPU, so one device's NCCL call
// waiting for a peer does not hold up another device's cudaFree.
void synchronize_device(int device);
// Random delays before each queued operation (0: none).
void set_random_delays(int max_us, unsigned seed);

// The emulated device's properties and the current device of this thread.
int device_count();
int& current_device();
const cudaDeviceProp& device_properties();
// The opted-in dynamic shared memory of a kernel (0: the default 48 KiB).
int kernel_max_dynamic_smem(const void* kernel);
void set_kernel_max_dynamic_smem(const void* kernel, int bytes);

}  // namespace baton::simt
