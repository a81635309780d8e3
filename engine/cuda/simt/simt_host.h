// The SIMT emulator, host side: what the launch helper (launch.cuh) and the
// vendor-library stand-ins (cuBLASLt, cuDNN, NCCL by reference code) call.
// The CUDA runtime API itself (cudaMalloc, cudaMemcpyAsync, streams,
// events, ...) is implemented with the real header's signatures in
// cuda_runtime_emu.cpp, so the backend's host code is the same in both
// builds.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace baton::simt {

// Queues a kernel on `stream`: validates the configuration as the CUDA
// runtime does (threads per block, block and grid limits, dynamic shared
// memory against the kernel's opted-in maximum) and returns the runtime's
// error for a launch the GPU would refuse; otherwise returns cudaSuccess
// and runs `body` later, on the stream's thread, once per thread of the
// grid, with device memory open. `kernel` identifies the function (its
// address: for attributes and the name in diagnostics).
//
// `pointer_args` are the kernel's pointer arguments: one that is not null
// and lies in neither a live device allocation nor pinned host memory (a
// host vector's data, say) is what a GPU faults on when the kernel runs, so
// the launch succeeds and the device's sticky error becomes
// cudaErrorIllegalAddress, the diagnostic naming the kernel and the
// argument.
cudaError_t launch(const void* kernel, dim3 grid, dim3 block, size_t dynamic_smem,
                   cudaStream_t stream, std::function<void()> body,
                   const std::vector<std::pair<int, const void*>>& pointer_args = {});

// Queues host work that stands in for a device library call (a cuBLASLt
// product, a cuDNN convolution, an NCCL collective) on `stream`. It runs on
// the stream's thread in order with the stream's other work, with device
// memory open; an error it returns becomes the device's sticky error, with
// `what` and the message in the diagnostic.
cudaError_t enqueue(cudaStream_t stream, const char* what, std::function<cudaError_t()> op);

// Whether [p, p + bytes) lies inside one live device allocation.
bool is_device_range(const void* p, size_t bytes);
// The device of the live allocation [p, p + bytes) lies in, or -1 when it
// lies in none.
int device_of_range(const void* p, size_t bytes);
// The device current on the calling thread (cudaSetDevice's).
int current_device_index();

// The last kernel or library diagnostic (empty when none).
std::string last_diagnostic();
// Sets the sticky error with a diagnostic (a stand-in found its contract
// broken while running).
void fail(cudaError_t error, const std::string& diagnostic);

}  // namespace baton::simt

// Plain C, for tests that load the emulation library with dlopen.
extern "C" {
// The last diagnostic, NUL-terminated, truncated to len - 1. Returns its
// full length.
__attribute__((visibility("default"))) int baton_simt_last_diagnostic(char* out, int len);
// Every queued operation waits a random 0..max_us microseconds first (0:
// off), from a generator seeded with `seed`: a missing stream wait then
// shows up as a wrong result. BATON_SIMT_DELAY_US sets it at load.
__attribute__((visibility("default"))) void baton_simt_set_random_delays(int max_us, unsigned seed);
// 1 when device memory is closed by a protection key (open only to the
// thread of a stream at work), 0 when by mprotect (open to every thread
// while any stream works): simt_memory.cpp.
__attribute__((visibility("default"))) int baton_simt_protected_by_key(void);
}

// cuda_runtime.h gives nvcc a template taking the kernel itself; the same
// for the host compiler.
template <class T>
cudaError_t cudaFuncSetAttribute(T* entry, cudaFuncAttribute attr, int value) {
  return ::cudaFuncSetAttribute(reinterpret_cast<const void*>(entry), attr, value);
}
