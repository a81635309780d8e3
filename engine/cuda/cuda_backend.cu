// The CUDA backend library, loaded by the engine with dlopen. For now it
// answers how many devices there are and runs the fused bias + activation
// kernel, the first of the kernels checked against the CPU reference.
#include <cuda_runtime.h>

#include <cstdint>

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
