// Kernels around the cuBLASLt products (gpu_backend_matmul.cu): packing
// float operands into bfloat16 for the bf16 products, and the product with
// k = 0 (no cuBLASLt call: C = act(beta C + bias)).
#pragma once

#include <cstdint>

#include "../kernel_language.cuh"

namespace baton::gpu::kernels {

// y[b][r][c] = bf16(x[b * stride + r * ld + c]) for `batch` row-major
// (rows x cols) views, packed (row after row, batch after batch). One
// thread per element, grid-stride: consecutive threads read consecutive
// columns of a row (coalesced) and write consecutive bf16s.
__global__ void pack_bf16_kernel(const float* __restrict__ x, int64_t rows, int64_t cols,
                                 int64_t ld, int64_t stride, int64_t batch,
                                 __nv_bfloat16* __restrict__ y) {
  const int64_t per = rows * cols, total = per * batch;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = i / per, rc = i - b * per, r = rc / cols, c = rc - r * cols;
    y[i] = __float2bfloat16(x[b * stride + r * ld + c]);
  }
}

// GPT-2's tanh GELU, the form of cuBLASLt's GELU epilogue.
__device__ inline float gelu_tanh_fwd(float x) {
  const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(u));
}

// act: 0 none, 1 ReLU, 2 tanh GELU (the epilogues a product fuses).
// A product with k = 0: C = act(beta C + bias) (beta = 0 writes zeros
// whatever C held, as BLAS does), `pre` the value before act.
__global__ void empty_product_kernel(float* __restrict__ c, int64_t m, int64_t n, int64_t ldc,
                                     int64_t stride_c, int64_t batch, float beta,
                                     const float* __restrict__ bias, int act,
                                     float* __restrict__ pre) {
  const int64_t per = m * n, total = per * batch;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = i / per, rc = i - b * per, r = rc / n, col = rc - r * n;
    const int64_t at = b * stride_c + r * ldc + col;
    float v = beta == 0.0f ? 0.0f : beta * c[at];
    if (bias != nullptr) v += bias[col];
    if (pre != nullptr) pre[at] = v;
    if (act == 1) v = v > 0.0f ? v : 0.0f;
    if (act == 2) v = gelu_tanh_fwd(v);
    c[at] = v;
  }
}

}  // namespace baton::gpu::kernels
