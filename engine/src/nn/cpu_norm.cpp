// The CPU backend's normalisation (per row, and batch normalisation over
// rows), dropout masks and token ops.
#include <baton/core/error.h>
#include <baton/core/rng.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu_backend.h"
#include "cpu_parallel.h"
#include "kernels_rows.h"

namespace baton {

void CpuBackend::column_products(const float* a, const float* b, const float* s, int64_t rows,
                                 int64_t cols, float* sum_ab, float* sum_a) const {
  if (sum_ab != nullptr) fill(sum_ab, cols, 0.0f);
  if (sum_a != nullptr) fill(sum_a, cols, 0.0f);
  cpu::column_sums(rows, cols, sum_ab, sum_a,
                   [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* ab, float* sa) {
                     const int64_t at = r0 * cols + c0;
                     cpu::column_sums_into(a + at, b != nullptr ? b + at : nullptr,
                                           s != nullptr ? s + r0 : nullptr, r1 - r0, cols,
                                           c1 - c0, ab != nullptr ? ab + c0 : nullptr,
                                           sa != nullptr ? sa + c0 : nullptr);
                   });
}

void CpuBackend::layer_norm_forward(const float* x, const float* g, const float* b, float* y,
                                    float* xhat, float* rstd, int64_t rows, int64_t f,
                                    float eps) const {
  cpu::parallel_range(rows, cpu::items_per_thread(f), [&](int64_t r0, int64_t r1) {
    cpu::layer_norm_rows(x + r0 * f, g, b, y + r0 * f, xhat + r0 * f, rstd + r0, r1 - r0, f, eps);
  });
}

void CpuBackend::layer_norm_backward(const float* dy, const float* xhat, const float* rstd,
                                     const float* g, float* dx, float* dg, float* db, int64_t rows,
                                     int64_t f) const {
  column_products(dy, xhat, nullptr, rows, f, dg, db);
  if (dx == nullptr) return;
  cpu::parallel_range(rows, cpu::items_per_thread(f), [&](int64_t r0, int64_t r1) {
    cpu::layer_norm_dx_rows(dy + r0 * f, xhat + r0 * f, rstd + r0, g, dx + r0 * f, r1 - r0, f);
  });
}

void CpuBackend::rms_norm_forward(const float* x, const float* g, float* y, float* rstd,
                                  int64_t rows, int64_t f, float eps) const {
  cpu::parallel_range(rows, cpu::items_per_thread(f), [&](int64_t r0, int64_t r1) {
    cpu::rms_norm_rows(x + r0 * f, g, y + r0 * f, rstd + r0, r1 - r0, f, eps);
  });
}

void CpuBackend::rms_norm_backward(const float* dy, const float* x, const float* rstd,
                                   const float* g, float* dx, float* dg, int64_t rows,
                                   int64_t f) const {
  column_products(dy, x, rstd, rows, f, dg, nullptr);
  if (dx == nullptr) return;
  cpu::parallel_range(rows, cpu::items_per_thread(f), [&](int64_t r0, int64_t r1) {
    cpu::rms_norm_dx_rows(dy + r0 * f, x + r0 * f, rstd + r0, g, dx + r0 * f, r1 - r0, f);
  });
}

void CpuBackend::column_centered_squares(const float* x, const float* mean, int64_t rows,
                                         int64_t cols, float* out) const {
  fill(out, cols, 0.0f);
  cpu::column_sums(rows, cols, out, nullptr,
                   [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* sq, float*) {
                     cpu::column_centered_squares_into(x + r0 * cols + c0, mean + c0, r1 - r0,
                                                       cols, c1 - c0, sq + c0);
                   });
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
                                  int64_t rows, int64_t f, bool relu) const {
  cpu::parallel_range(rows, cpu::items_per_thread(f), [&](int64_t r0, int64_t r1) {
    cpu::batch_norm_apply_rows(x + r0 * f, mean, rstd, g, b, xhat + r0 * f, y + r0 * f, r1 - r0, f,
                               relu);
  });
}

void CpuBackend::batch_norm_param_grads(const float* dy, const float* relu_y, const float* xhat,
                                        float* dg, float* db, int64_t rows, int64_t f) const {
  fill(dg, f, 0.0f);
  fill(db, f, 0.0f);
  cpu::column_sums(rows, f, dg, db,
                   [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* sg, float* sb) {
                     const int64_t at = r0 * f + c0;
                     cpu::batch_norm_grad_sums_into(dy + at,
                                                    relu_y != nullptr ? relu_y + at : nullptr,
                                                    xhat + at, r1 - r0, f, c1 - c0, sg + c0,
                                                    sb + c0);
                   });
}

void CpuBackend::batch_norm_input_grad(const float* dy, const float* relu_y, const float* xhat,
                                       const float* g, const float* rstd, const float* sum_dy,
                                       const float* sum_dy_xhat, float inv_n, float* dx,
                                       int64_t rows, int64_t f) const {
  cpu::parallel_range(rows, cpu::items_per_thread(f), [&](int64_t r0, int64_t r1) {
    cpu::batch_norm_input_grad_rows(dy + r0 * f, relu_y != nullptr ? relu_y + r0 * f : nullptr,
                                    xhat + r0 * f, g, rstd, sum_dy, sum_dy_xhat, inv_n,
                                    dx + r0 * f, r1 - r0, f);
  });
}

void CpuBackend::dropout_mask(float* mask, int64_t rows, int64_t cols, float p, uint64_t seed,
                              int64_t first_row) const {
  // Each row's mask comes from its own stream (keyed on its global row):
  // the same whichever thread draws it.
  const float keep_scale = 1.0f / (1.0f - p);
  cpu::parallel_range(rows, cpu::items_per_thread(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      Rng rng(Rng::derive(seed, static_cast<uint64_t>(first_row + r)));
      float* m = mask + r * cols;
      for (int64_t c = 0; c < cols; ++c) m[c] = rng.uniform() >= p ? keep_scale : 0.0f;
    }
  });
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
  // Tokens repeat, so rows of the table collide: split the embedding's
  // columns instead (each added in token order by one thread).
  cpu::parallel_columns(dim, n, [&](int64_t c0, int64_t c1) {
    for (int64_t i = 0; i < n; ++i) {
      cpu::add_inplace(dtable + static_cast<int64_t>(ids[i]) * dim + c0, dout + i * dim + c0,
                       c1 - c0);
    }
  });
}

}  // namespace baton
