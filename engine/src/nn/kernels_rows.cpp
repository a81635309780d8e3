// The per-row and per-column loops of kernels_rows.h.
#include "kernels_rows.h"

#include <cmath>

#include "fast_math.h"
#include "multiversion.h"

namespace baton::cpu {

BATON_CLONES
void layer_norm_rows(const float* x, const float* g, const float* b, float* y, float* xhat,
                     float* rstd, int64_t rows, int64_t f, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * f;
    double mean = 0.0, var = 0.0;
#pragma omp simd reduction(+ : mean)
    for (int64_t c = 0; c < f; ++c) mean += xr[c];
    mean /= static_cast<double>(f);
#pragma omp simd reduction(+ : var)
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

BATON_CLONES
void layer_norm_dx_rows(const float* dy, const float* xhat, const float* rstd, const float* g,
                        float* dx, int64_t rows, int64_t f) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* dyr = dy + r * f;
    const float* xh = xhat + r * f;
    double sum_d = 0.0, sum_dx = 0.0;
#pragma omp simd reduction(+ : sum_d, sum_dx)
    for (int64_t c = 0; c < f; ++c) {
      const float d = dyr[c] * g[c];
      sum_d += d;
      sum_dx += d * xh[c];
    }
    const float mean_d = static_cast<float>(sum_d / f), mean_dx = static_cast<float>(sum_dx / f);
    const float rs = rstd[r];
    float* dxr = dx + r * f;
    for (int64_t c = 0; c < f; ++c) dxr[c] = rs * (dyr[c] * g[c] - mean_d - xh[c] * mean_dx);
  }
}

BATON_CLONES
void rms_norm_rows(const float* x, const float* g, float* y, float* rstd, int64_t rows, int64_t f,
                   float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * f;
    double ms = 0.0;
#pragma omp simd reduction(+ : ms)
    for (int64_t c = 0; c < f; ++c) ms += static_cast<double>(xr[c]) * xr[c];
    const float rs = static_cast<float>(1.0 / std::sqrt(ms / f + eps));
    rstd[r] = rs;
    float* yr = y + r * f;
    for (int64_t c = 0; c < f; ++c) yr[c] = xr[c] * rs * g[c];
  }
}

BATON_CLONES
void rms_norm_dx_rows(const float* dy, const float* x, const float* rstd, const float* g, float* dx,
                      int64_t rows, int64_t f) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* dyr = dy + r * f;
    const float* xr = x + r * f;
    const float rs = rstd[r];
    double dot = 0.0;
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < f; ++c) dot += static_cast<double>(dyr[c]) * g[c] * xr[c];
    const float k = static_cast<float>(dot / f) * rs * rs;
    float* dxr = dx + r * f;
    for (int64_t c = 0; c < f; ++c) dxr[c] = rs * (dyr[c] * g[c] - xr[c] * k);
  }
}

BATON_CLONES
void column_sums_into(const float* a, const float* b, const float* s, int64_t rows, int64_t ld,
                      int64_t cols, float* sum_ab, float* sum_a) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* ar = a + r * ld;
    if (sum_ab != nullptr) {
      const float* br = b + r * ld;
      const float sr = s != nullptr ? s[r] : 1.0f;
      for (int64_t c = 0; c < cols; ++c) sum_ab[c] += ar[c] * br[c] * sr;
    }
    if (sum_a != nullptr) {
      for (int64_t c = 0; c < cols; ++c) sum_a[c] += ar[c];
    }
  }
}

BATON_CLONES
void column_centered_squares_into(const float* a, const float* mean, int64_t rows, int64_t ld,
                                  int64_t cols, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* ar = a + r * ld;
    for (int64_t c = 0; c < cols; ++c) out[c] += (ar[c] - mean[c]) * (ar[c] - mean[c]);
  }
}

BATON_CLONES
void batch_norm_apply_rows(const float* x, const float* mean, const float* rstd, const float* g,
                           const float* b, float* xhat, float* y, int64_t rows, int64_t f,
                           bool relu) {
  const float floor = relu ? 0.0f : -INFINITY;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * f;
    float* xh = xhat + r * f;
    float* yr = y + r * f;
    for (int64_t c = 0; c < f; ++c) {
      xh[c] = (xr[c] - mean[c]) * rstd[c];
      const float v = xh[c] * g[c] + b[c];
      yr[c] = v > floor ? v : floor;
    }
  }
}

BATON_CLONES
void batch_norm_grad_sums_into(const float* dy, const float* relu_y, const float* xhat,
                               int64_t rows, int64_t ld, int64_t cols, float* sum_dy_xhat,
                               float* sum_dy) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* dyr = dy + r * ld;
    const float* xh = xhat + r * ld;
    const float* yr = relu_y != nullptr ? relu_y + r * ld : nullptr;
    for (int64_t c = 0; c < cols; ++c) {
      const float d = yr == nullptr || yr[c] > 0.0f ? dyr[c] : 0.0f;
      sum_dy_xhat[c] += d * xh[c];
      sum_dy[c] += d;
    }
  }
}

BATON_CLONES
void batch_norm_input_grad_rows(const float* dy, const float* relu_y, const float* xhat,
                                const float* g, const float* rstd, const float* sum_dy,
                                const float* sum_dy_xhat, float inv_n, float* dx, int64_t rows,
                                int64_t f) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* dyr = dy + r * f;
    const float* xh = xhat + r * f;
    const float* yr = relu_y != nullptr ? relu_y + r * f : nullptr;
    float* dxr = dx + r * f;
    if (sum_dy == nullptr) {
      for (int64_t c = 0; c < f; ++c) {
        const float d = yr == nullptr || yr[c] > 0.0f ? dyr[c] : 0.0f;
        dxr[c] = g[c] * rstd[c] * d;
      }
      continue;
    }
    for (int64_t c = 0; c < f; ++c) {
      const float d = yr == nullptr || yr[c] > 0.0f ? dyr[c] : 0.0f;
      dxr[c] = g[c] * rstd[c] * (d - inv_n * sum_dy[c] - xh[c] * inv_n * sum_dy_xhat[c]);
    }
  }
}

namespace {

inline void softmax_inplace(float* row, int64_t n) {
  float mx = row[0];
  for (int64_t j = 1; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
  for (int64_t j = 0; j < n; ++j) row[j] = fast_exp(row[j] - mx);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) sum += row[j];
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
}

}  // namespace

BATON_CLONES
void causal_softmax_rows(float* p, int64_t seq, int64_t first, int64_t end) {
  for (int64_t t = first; t < end; ++t) {
    float* row = p + t * seq;
    softmax_inplace(row, t + 1);
    for (int64_t j = t + 1; j < seq; ++j) row[j] = 0.0f;
  }
}

BATON_CLONES
void softmax_row(float* row, int64_t n) { softmax_inplace(row, n); }

BATON_CLONES
void causal_softmax_backward(const float* p, float* dp, int64_t seq, float scale, int64_t first,
                             int64_t end) {
  for (int64_t t = first; t < end; ++t) {
    const float* pr = p + t * seq;
    float* dr = dp + t * seq;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j <= t; ++j) dot += pr[j] * dr[j];
    for (int64_t j = 0; j <= t; ++j) dr[j] = pr[j] * (dr[j] - dot) * scale;
    for (int64_t j = t + 1; j < seq; ++j) dr[j] = 0.0f;
  }
}

}  // namespace baton::cpu
