// The CPU backend's normalisation (per row, and batch normalisation over
// rows), dropout masks and token ops.
#include <baton/core/error.h>
#include <baton/core/rng.h>

#include <cmath>
#include <cstring>

#include "cpu_backend.h"

namespace baton {

void CpuBackend::layer_norm_forward(const float* x, const float* g, const float* b, float* y,
                                    float* xhat, float* rstd, int64_t rows, int64_t f,
                                    float eps) const {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * f;
    double mean = 0.0, var = 0.0;
    for (int64_t c = 0; c < f; ++c) mean += xr[c];
    mean /= static_cast<double>(f);
    for (int64_t c = 0; c < f; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    var /= static_cast<double>(f);
    const float rs = static_cast<float>(1.0 / std::sqrt(var + eps));
    rstd[r] = rs;
    float* xh = xhat + r * f;
    float* yr = y + r * f;
    const float m = static_cast<float>(mean);
    for (int64_t c = 0; c < f; ++c) {
      xh[c] = (xr[c] - m) * rs;
      yr[c] = xh[c] * g[c] + b[c];
    }
  }
}

void CpuBackend::layer_norm_backward(const float* dy, const float* xhat, const float* rstd,
                                     const float* g, float* dx, float* dg, float* db, int64_t rows,
                                     int64_t f) const {
  fill(dg, f, 0.0f);
  fill(db, f, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* dyr = dy + r * f;
    const float* xh = xhat + r * f;
    double sum_d = 0.0, sum_dx = 0.0;
    for (int64_t c = 0; c < f; ++c) {
      dg[c] += dyr[c] * xh[c];
      db[c] += dyr[c];
      const float d = dyr[c] * g[c];
      sum_d += d;
      sum_dx += d * xh[c];
    }
    if (dx == nullptr) continue;
    const float mean_d = static_cast<float>(sum_d / f), mean_dx = static_cast<float>(sum_dx / f);
    float* dxr = dx + r * f;
    for (int64_t c = 0; c < f; ++c) dxr[c] = rstd[r] * (dyr[c] * g[c] - mean_d - xh[c] * mean_dx);
  }
}

void CpuBackend::rms_norm_forward(const float* x, const float* g, float* y, float* rstd,
                                  int64_t rows, int64_t f, float eps) const {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * f;
    double ms = 0.0;
    for (int64_t c = 0; c < f; ++c) ms += static_cast<double>(xr[c]) * xr[c];
    const float rs = static_cast<float>(1.0 / std::sqrt(ms / f + eps));
    rstd[r] = rs;
    float* yr = y + r * f;
    for (int64_t c = 0; c < f; ++c) yr[c] = xr[c] * rs * g[c];
  }
}

void CpuBackend::rms_norm_backward(const float* dy, const float* x, const float* rstd,
                                   const float* g, float* dx, float* dg, int64_t rows,
                                   int64_t f) const {
  fill(dg, f, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* dyr = dy + r * f;
    const float* xr = x + r * f;
    const float rs = rstd[r];
    double dot = 0.0;
    for (int64_t c = 0; c < f; ++c) {
      dg[c] += dyr[c] * xr[c] * rs;
      dot += static_cast<double>(dyr[c]) * g[c] * xr[c];
    }
    if (dx == nullptr) continue;
    const float k = static_cast<float>(dot / f) * rs * rs;
    float* dxr = dx + r * f;
    for (int64_t c = 0; c < f; ++c) dxr[c] = rs * (dyr[c] * g[c] - xr[c] * k);
  }
}

void CpuBackend::column_centered_squares(const float* x, const float* mean, int64_t rows,
                                         int64_t cols, float* out) const {
  fill(out, cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    for (int64_t c = 0; c < cols; ++c) out[c] += (xr[c] - mean[c]) * (xr[c] - mean[c]);
  }
}

void CpuBackend::batch_norm_statistics(const float* sum, const float* m2, float rows,
                                       float momentum, float eps, float* mean, float* rstd,
                                       float* running_mean, float* running_var, int64_t f) const {
  // Biased variance for normalising (as PyTorch), the unbiased one
  // (N / (N-1)) for the running statistics.
  const float unbias = rows > 1.0f ? rows / (rows - 1.0f) : 1.0f;
  for (int64_t c = 0; c < f; ++c) {
    mean[c] = sum[c] / rows;
    const float var = m2[c] / rows;
    running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mean[c];
    running_var[c] = (1.0f - momentum) * running_var[c] + momentum * var * unbias;
    rstd[c] = 1.0f / std::sqrt(var + eps);
  }
}

void CpuBackend::batch_norm_running(const float* running_mean, const float* running_var, float eps,
                                    float* mean, float* rstd, int64_t f) const {
  for (int64_t c = 0; c < f; ++c) {
    mean[c] = running_mean[c];
    rstd[c] = 1.0f / std::sqrt(running_var[c] + eps);
  }
}

void CpuBackend::batch_norm_apply(const float* x, const float* mean, const float* rstd,
                                  const float* g, const float* b, float* xhat, float* y,
                                  int64_t rows, int64_t f) const {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * f;
    float* xh = xhat + r * f;
    float* yr = y + r * f;
    for (int64_t c = 0; c < f; ++c) {
      xh[c] = (xr[c] - mean[c]) * rstd[c];
      yr[c] = xh[c] * g[c] + b[c];
    }
  }
}

void CpuBackend::batch_norm_param_grads(const float* dy, const float* xhat, float* dg, float* db,
                                        int64_t rows, int64_t f) const {
  fill(dg, f, 0.0f);
  fill(db, f, 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const float* dyr = dy + r * f;
    const float* xh = xhat + r * f;
    for (int64_t c = 0; c < f; ++c) {
      dg[c] += dyr[c] * xh[c];
      db[c] += dyr[c];
    }
  }
}

void CpuBackend::batch_norm_input_grad(const float* dy, const float* xhat, const float* g,
                                       const float* rstd, const float* sum_dy,
                                       const float* sum_dy_xhat, float inv_n, float* dx,
                                       int64_t rows, int64_t f) const {
  for (int64_t r = 0; r < rows; ++r) {
    const float* dyr = dy + r * f;
    const float* xh = xhat + r * f;
    float* dxr = dx + r * f;
    if (sum_dy == nullptr) {
      for (int64_t c = 0; c < f; ++c) dxr[c] = g[c] * rstd[c] * dyr[c];
      continue;
    }
    for (int64_t c = 0; c < f; ++c) {
      dxr[c] = g[c] * rstd[c] * (dyr[c] - inv_n * sum_dy[c] - xh[c] * inv_n * sum_dy_xhat[c]);
    }
  }
}

void CpuBackend::dropout_mask(float* mask, int64_t rows, int64_t cols, float p, uint64_t seed,
                              int64_t first_row) const {
  const float keep_scale = 1.0f / (1.0f - p);
  for (int64_t r = 0; r < rows; ++r) {
    Rng rng(Rng::derive(seed, static_cast<uint64_t>(first_row + r)));
    float* m = mask + r * cols;
    for (int64_t c = 0; c < cols; ++c) m[c] = rng.uniform() >= p ? keep_scale : 0.0f;
  }
}

void CpuBackend::token_ids(const float* x, int32_t* ids, int64_t n, int64_t vocab) const {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (!(v >= 0.0f && v < static_cast<float>(vocab)) || v != std::floor(v)) {
      throw InputError("token " + std::to_string(v) + " at position " + std::to_string(i) +
                       " of the batch is not an id in [0, " + std::to_string(vocab) + ")");
    }
    ids[i] = static_cast<int32_t>(v);
  }
}

void CpuBackend::embedding_forward(const int32_t* ids, const float* table, float* out, int64_t n,
                                   int64_t dim) const {
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(out + i * dim, table + static_cast<int64_t>(ids[i]) * dim, sizeof(float) * dim);
  }
}

void CpuBackend::embedding_backward(const int32_t* ids, const float* dout, float* dtable, int64_t n,
                                    int64_t dim) const {
  for (int64_t i = 0; i < n; ++i) {
    cpu::add_inplace(dtable + static_cast<int64_t>(ids[i]) * dim, dout + i * dim, dim);
  }
}

}  // namespace baton
