// The CUDA backend library, loaded by the engine with dlopen. It answers how
// many devices there are and what they are (for discovery), runs the fused
// bias + activation kernel, the first of the kernels checked against the CPU
// reference, and (nccl_backend.cu, when NCCL is found) holds the NCCL
// communicator.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace {

__global__ void bias_relu_kernel(float* y, const float* bias, int64_t rows, int64_t cols) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const float v = y[i] + bias[i % cols];
  y[i] = v > 0.0f ? v : 0.0f;
}

}  // namespace

extern "C" {

// Devices visible to the runtime; 0 (not an error) when there is no driver.
__attribute__((visibility("default"))) int baton_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

// Like baton_cuda_device_count, but says why there are none: returns the
// CUDA error code (0 on success) and stores the count (0 on error) in *count.
__attribute__((visibility("default"))) int baton_cuda_device_count_status(int* count) {
  int n = 0;
  const cudaError_t st = cudaGetDeviceCount(&n);
  *count = st == cudaSuccess ? n : 0;
  return static_cast<int>(st);
}

// 1 when this library contains the NCCL communicator (nccl_abi.h), 0 when
// it was built without NCCL.
__attribute__((visibility("default"))) int baton_cuda_has_nccl(void) {
#ifdef BATON_CUDA_WITH_NCCL
  return 1;
#else
  return 0;
#endif
}

// The runtime's text for an error code returned by this library.
__attribute__((visibility("default"))) const char* baton_cuda_error_string(int code) {
  return cudaGetErrorString(static_cast<cudaError_t>(code));
}

// Describes device `device`: its name (NUL-terminated, truncated to
// name_len - 1), total memory in bytes, multiprocessor count, compute
// capability and PCI bus id ("0000:3B:00.0"; bus_id_len >= 13).
// Returns 0 on success, the CUDA error code otherwise.
__attribute__((visibility("default"))) int baton_cuda_describe_device(
    int device, char* name, int name_len, unsigned long long* memory_bytes, int* sm_count,
    int* cc_major, int* cc_minor, char* bus_id, int bus_id_len) {
  cudaDeviceProp prop;
  cudaError_t st = cudaGetDeviceProperties(&prop, device);
  if (st != cudaSuccess) return static_cast<int>(st);
  if (name_len > 0) {
    std::strncpy(name, prop.name, static_cast<size_t>(name_len) - 1);
    name[name_len - 1] = '\0';
  }
  *memory_bytes = static_cast<unsigned long long>(prop.totalGlobalMem);
  *sm_count = prop.multiProcessorCount;
  *cc_major = prop.major;
  *cc_minor = prop.minor;
  if (bus_id_len > 0) {
    bus_id[0] = '\0';
    st = cudaDeviceGetPCIBusId(bus_id, bus_id_len, device);
  }
  return static_cast<int>(st);
}

// Whether `device` can map `peer`'s memory (cudaDeviceCanAccessPeer) into
// *can (0 or 1). Returns 0 on success, the CUDA error code otherwise.
__attribute__((visibility("default"))) int baton_cuda_can_access_peer(int device, int peer,
                                                                      int* can) {
  int c = 0;
  const cudaError_t st = cudaDeviceCanAccessPeer(&c, device, peer);
  *can = st == cudaSuccess && c != 0 ? 1 : 0;
  return static_cast<int>(st);
}

// y(rows, cols) = relu(y + bias) on the device; host pointers in and out.
// Returns 0 on success, the CUDA error code otherwise.
__attribute__((visibility("default"))) int baton_cuda_bias_relu(float* y, const float* bias,
                                                                int64_t rows, int64_t cols) {
  float *dy = nullptr, *db = nullptr;
  const size_t ny = sizeof(float) * rows * cols, nb = sizeof(float) * cols;
  cudaError_t st = cudaMalloc(&dy, ny);
  if (st == cudaSuccess) st = cudaMalloc(&db, nb);
  if (st == cudaSuccess) st = cudaMemcpy(dy, y, ny, cudaMemcpyHostToDevice);
  if (st == cudaSuccess) st = cudaMemcpy(db, bias, nb, cudaMemcpyHostToDevice);
  if (st == cudaSuccess) {
    const int64_t n = rows * cols;
    const int threads = 256;
    bias_relu_kernel<<<static_cast<unsigned>((n + threads - 1) / threads), threads>>>(dy, db, rows, cols);
    st = cudaGetLastError();
  }
  if (st == cudaSuccess) st = cudaMemcpy(y, dy, ny, cudaMemcpyDeviceToHost);
  cudaFree(dy);
  cudaFree(db);
  return static_cast<int>(st);
}

}  // extern "C"
