// Kernels of the normalisations (gpu_backend_norm.cu): LayerNorm and
// RMSNorm a warp per row (f up to kWarpRowMax) or a block per row, with
// float statistics reduced by shuffles; their parameter gradients and the
// batch-norm column sums as deterministic two-pass column reductions
// (per-block partials over a chunk of rows, then one thread per column adds
// the chunks in order: no atomics, the same bits every run); the rest of
// batch norm elementwise.
#pragma once

#include <cstdint>

#include "../kernel_language.cuh"
#include "row_reduce.cuh"

namespace baton::gpu::norm {

// Rows this wide or narrower get a warp each (8 rows per 256-thread block);
// wider rows a block each.
constexpr int64_t kWarpRowMax = 1024;
constexpr unsigned kThreads = 256;

// Which row a thread works on, its rank among the row's threads and their
// count: a warp per row or a block per row.
struct RowThread {
  int64_t row;
  int rank, step;
};
template <bool kWarpPerRow>
__device__ inline RowThread row_thread() {
  if constexpr (kWarpPerRow) {
    const int warps = static_cast<int>(blockDim.x) / reduce::kWarp;
    return {static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / reduce::kWarp,
            static_cast<int>(threadIdx.x) % reduce::kWarp, reduce::kWarp};
  } else {
    return {static_cast<int64_t>(blockIdx.x), static_cast<int>(threadIdx.x),
            static_cast<int>(blockDim.x)};
  }
}

// The row's sums (one or two) on every thread of the row.
template <bool kWarpPerRow>
__device__ inline float row_sum(float v, float* shared) {
  if constexpr (kWarpPerRow) {
    return reduce::warp_sum(v);
  } else {
    return reduce::block_sum(v, shared);
  }
}
template <bool kWarpPerRow>
__device__ inline void row_sum2(float& a, float& b, float* shared_a, float* shared_b) {
  if constexpr (kWarpPerRow) {
    reduce::warp_sum2(a, b);
  } else {
    reduce::block_sum2(a, b, shared_a, shared_b);
  }
}

// y = gain * (x - mean) * rstd + bias; xhat and rstd kept for backward.
// Mean, then the variance around it (two passes: no cancellation).
template <bool kWarpPerRow>
__global__ void layer_norm_forward_kernel(int64_t n_rows, int64_t f, const float* x, const float* g,
                                          const float* b, float* y, float* xhat, float* rstd,
                                          float eps) {
  __shared__ float shared[reduce::kWarp];
  const RowThread t = row_thread<kWarpPerRow>();
  if (t.row >= n_rows) return;  // a whole warp (warp per row) or nothing
  const float* xr = x + t.row * f;
  float s = 0.0f;
  for (int64_t c = t.rank; c < f; c += t.step) s += xr[c];
  const float mean = row_sum<kWarpPerRow>(s, shared) / static_cast<float>(f);
  float v = 0.0f;
  for (int64_t c = t.rank; c < f; c += t.step) {
    const float d = xr[c] - mean;
    v += d * d;
  }
  const float var = row_sum<kWarpPerRow>(v, shared) / static_cast<float>(f);
  const float rs = rsqrtf(var + eps);
  if (t.rank == 0) rstd[t.row] = rs;
  float* xh = xhat + t.row * f;
  float* yr = y + t.row * f;
  for (int64_t c = t.rank; c < f; c += t.step) {
    const float h = (xr[c] - mean) * rs;
    xh[c] = h;
    yr[c] = h * g[c] + b[c];
  }
}

// dx = rstd * (dy*g - mean(dy*g) - xhat * mean(dy*g*xhat)).
template <bool kWarpPerRow>
__global__ void layer_norm_dx_kernel(int64_t n_rows, int64_t f, const float* dy, const float* xhat,
                                     const float* rstd, const float* g, float* dx) {
  __shared__ float shared_a[reduce::kWarp];
  __shared__ float shared_b[reduce::kWarp];
  const RowThread t = row_thread<kWarpPerRow>();
  if (t.row >= n_rows) return;
  const float* dyr = dy + t.row * f;
  const float* xh = xhat + t.row * f;
  float sum_d = 0.0f, sum_dx = 0.0f;
  for (int64_t c = t.rank; c < f; c += t.step) {
    const float d = dyr[c] * g[c];
    sum_d += d;
    sum_dx += d * xh[c];
  }
  row_sum2<kWarpPerRow>(sum_d, sum_dx, shared_a, shared_b);
  const float mean_d = sum_d / static_cast<float>(f), mean_dx = sum_dx / static_cast<float>(f);
  const float rs = rstd[t.row];
  float* dxr = dx + t.row * f;
  for (int64_t c = t.rank; c < f; c += t.step) {
    dxr[c] = rs * (dyr[c] * g[c] - mean_d - xh[c] * mean_dx);
  }
}

// y = x * rstd * g, rstd = 1 / sqrt(mean(x^2) + eps).
template <bool kWarpPerRow>
__global__ void rms_norm_forward_kernel(int64_t n_rows, int64_t f, const float* x, const float* g,
                                        float* y, float* rstd, float eps) {
  __shared__ float shared[reduce::kWarp];
  const RowThread t = row_thread<kWarpPerRow>();
  if (t.row >= n_rows) return;
  const float* xr = x + t.row * f;
  float s = 0.0f;
  for (int64_t c = t.rank; c < f; c += t.step) s += xr[c] * xr[c];
  const float rs = rsqrtf(row_sum<kWarpPerRow>(s, shared) / static_cast<float>(f) + eps);
  if (t.rank == 0) rstd[t.row] = rs;
  float* yr = y + t.row * f;
  for (int64_t c = t.rank; c < f; c += t.step) yr[c] = xr[c] * rs * g[c];
}

// dx = rstd * (dy*g - x * mean(dy*g*x) * rstd^2).
template <bool kWarpPerRow>
__global__ void rms_norm_dx_kernel(int64_t n_rows, int64_t f, const float* dy, const float* x,
                                   const float* rstd, const float* g, float* dx) {
  __shared__ float shared[reduce::kWarp];
  const RowThread t = row_thread<kWarpPerRow>();
  if (t.row >= n_rows) return;
  const float* dyr = dy + t.row * f;
  const float* xr = x + t.row * f;
  float dot = 0.0f;
  for (int64_t c = t.rank; c < f; c += t.step) dot += dyr[c] * g[c] * xr[c];
  const float rs = rstd[t.row];
  const float k = row_sum<kWarpPerRow>(dot, shared) / static_cast<float>(f) * rs * rs;
  float* dxr = dx + t.row * f;
  for (int64_t c = t.rank; c < f; c += t.step) dxr[c] = rs * (dyr[c] * g[c] - xr[c] * k);
}

// ---- column reductions: out0[c] = sum over rows of term's first value,
// out1[c] of its second. Pass 1: a block of 32 columns x 8 row lanes sums a
// chunk of rows (each warp reads 32 adjacent columns of a row: coalesced)
// and writes its chunk's partial sums; pass 2: a thread per column adds the
// chunks in chunk order. The same grid for the same shape: the same bits.
constexpr int kColTile = 32, kRowLanes = 8;

// The terms summed, one functor per op. Each adds row r, column c's
// contribution to s0 (and s1).
struct LayerNormGradTerm {  // dgain += dy * xhat, dbias += dy
  const float *dy, *xhat;
  int64_t ld;
  __device__ void operator()(int64_t r, int64_t c, float& s0, float& s1) const {
    const float d = dy[r * ld + c];
    s0 += d * xhat[r * ld + c];
    s1 += d;
  }
};
struct RmsNormGradTerm {  // dgain += dy * x * rstd[r]
  const float *dy, *x, *rstd;
  int64_t ld;
  __device__ void operator()(int64_t r, int64_t c, float& s0, float&) const {
    s0 += dy[r * ld + c] * x[r * ld + c] * rstd[r];
  }
};
struct CenteredSquaresTerm {  // out += (x - mean)^2
  const float *x, *mean;
  int64_t ld;
  __device__ void operator()(int64_t r, int64_t c, float& s0, float&) const {
    const float d = x[r * ld + c] - mean[c];
    s0 += d * d;
  }
};
struct BatchNormGradTerm {  // dgain += dy' * xhat, dbias += dy' (dy' = dy where relu_y > 0)
  const float *dy, *relu_y, *xhat;
  int64_t ld;
  __device__ void operator()(int64_t r, int64_t c, float& s0, float& s1) const {
    const int64_t i = r * ld + c;
    const float d = relu_y == nullptr || relu_y[i] > 0.0f ? dy[i] : 0.0f;
    s0 += d * xhat[i];
    s1 += d;
  }
};

// partials: (chunks, 2, cols) doubles; block (kColTile, kRowLanes), grid
// (column tiles, chunks).
template <class Term>
__global__ void column_partials_kernel(Term term, int64_t n_rows, int64_t cols,
                                       int64_t rows_per_chunk, double* partials) {
  __shared__ float shared0[kRowLanes][kColTile];
  __shared__ float shared1[kRowLanes][kColTile];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColTile + tx;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < n_rows ? r0 + rows_per_chunk : n_rows;
  float s0 = 0.0f, s1 = 0.0f;
  if (c < cols) {
    for (int64_t r = r0 + ty; r < r1; r += kRowLanes) term(r, c, s0, s1);
  }
  shared0[ty][tx] = s0;
  shared1[ty][tx] = s1;
  __syncthreads();  // every row lane's sums are in shared memory
  if (ty == 0 && c < cols) {
    float t0 = 0.0f, t1 = 0.0f;
#pragma unroll
    for (int i = 0; i < kRowLanes; ++i) {
      t0 += shared0[i][tx];
      t1 += shared1[i][tx];
    }
    double* out = partials + static_cast<int64_t>(blockIdx.y) * 2 * cols;
    out[c] = t0;
    out[cols + c] = t1;
  }
}

// out0[c] (and out1[c], either may be null) = the chunks' partials added in
// chunk order; overwrites.
__global__ void column_finish_kernel(const double* partials, int64_t chunks, int64_t cols,
                                     float* out0, float* out1) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  double t0 = 0.0, t1 = 0.0;
  for (int64_t k = 0; k < chunks; ++k) {
    t0 += partials[k * 2 * cols + c];
    t1 += partials[k * 2 * cols + cols + c];
  }
  if (out0 != nullptr) out0[c] = static_cast<float>(t0);
  if (out1 != nullptr) out1[c] = static_cast<float>(t1);
}

// ---- batch norm, elementwise (grid-stride over rows * f or f)
__global__ void batch_norm_statistics_kernel(const float* sum, const float* m2, float n,
                                             float momentum, float eps, float* mean, float* rstd,
                                             float* running_mean, float* running_var, int64_t f) {
  // Biased variance for normalising (as PyTorch), the unbiased one
  // (N / (N-1)) for the running statistics: the CPU's contract.
  const float unbias = n > 1.0f ? n / (n - 1.0f) : 1.0f;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < f;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float m = sum[c] / n;
    const float var = m2[c] / n;
    mean[c] = m;
    running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * m;
    running_var[c] = (1.0f - momentum) * running_var[c] + momentum * var * unbias;
    rstd[c] = 1.0f / sqrtf(var + eps);
  }
}

__global__ void batch_norm_running_kernel(const float* running_mean, const float* running_var,
                                          float eps, float* mean, float* rstd, int64_t f) {
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < f;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    mean[c] = running_mean[c];
    rstd[c] = 1.0f / sqrtf(running_var[c] + eps);
  }
}

__global__ void batch_norm_apply_kernel(const float* x, const float* mean, const float* rstd,
                                        const float* g, const float* b, float* xhat, float* y,
                                        int64_t n, int64_t f, bool relu) {
  const float floor = relu ? 0.0f : -INFINITY;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % f;
    const float h = (x[i] - mean[c]) * rstd[c];
    xhat[i] = h;
    const float v = h * g[c] + b[c];
    y[i] = v > floor ? v : floor;
  }
}

__global__ void batch_norm_input_grad_kernel(const float* dy, const float* relu_y,
                                             const float* xhat, const float* g, const float* rstd,
                                             const float* sum_dy, const float* sum_dy_xhat,
                                             float inv_n, float* dx, int64_t n, int64_t f) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = i % f;
    const float d = relu_y == nullptr || relu_y[i] > 0.0f ? dy[i] : 0.0f;
    dx[i] = sum_dy == nullptr
                ? g[c] * rstd[c] * d
                : g[c] * rstd[c] * (d - inv_n * sum_dy[c] - xhat[i] * inv_n * sum_dy_xhat[c]);
  }
}

}  // namespace baton::gpu::norm
