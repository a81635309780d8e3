// The CPU backend's products, activations, elementwise ops, losses and
// optimizer updates: the fused kernels of kernels.h.
#include "cpu_backend.h"

#include <baton/core/error.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "cpu_parallel.h"

namespace baton {

namespace {

constexpr int64_t kGrain = cpu::kMinFloatsPerThread;

}  // namespace

const Backend& cpu_backend() {
  static const CpuBackend kCpu;  // stateless: nothing in it changes
  return kCpu;
}

std::string CpuBackend::describe() const { return "cpu: " + cpu::kernel_path(); }

void CpuBackend::matmul(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha,
                        const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                        float* c, int64_t ldc) const {
  cpu::gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void CpuBackend::bias_activation(float* y, const float* bias, int64_t rows, int64_t cols,
                                 Activation act) const {
  cpu::parallel_range(rows, cpu::items_per_thread(cols), [&](int64_t r0, int64_t r1) {
    cpu::bias_activation(y + r0 * cols, bias, r1 - r0, cols, act);
  });
}

void CpuBackend::activation_backward_bias(const float* y, const float* pre, const float* dy,
                                          float* dpre, float* dbias, int64_t rows, int64_t cols,
                                          Activation act) const {
  // Rows split for the elementwise part, then the bias gradient's column
  // sums split by columns (each summed by one thread in row order).
  cpu::parallel_range(rows, cpu::items_per_thread(cols), [&](int64_t r0, int64_t r1) {
    const int64_t at = r0 * cols;
    cpu::activation_backward_bias(y + at, pre != nullptr ? pre + at : nullptr, dy + at, dpre + at,
                                  nullptr, r1 - r0, cols, act);
  });
  if (dbias == nullptr) return;
  cpu::column_sums(rows, cols, dbias, nullptr,
                   [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* db, float*) {
                     for (int64_t r = r0; r < r1; ++r) {
                       cpu::add_inplace(db + c0, dpre + r * cols + c0, c1 - c0);
                     }
                   });
}

void CpuBackend::activation_forward(const float* x, float* y, int64_t n, Activation act) const {
  cpu::parallel_range(n, kGrain, [&](int64_t i0, int64_t i1) {
    cpu::activation_forward(x + i0, y + i0, i1 - i0, act);
  });
}

void CpuBackend::activation_backward(const float* x, const float* y, const float* dy, float* dx,
                                     int64_t n, Activation act) const {
  cpu::parallel_range(n, kGrain, [&](int64_t i0, int64_t i1) {
    cpu::activation_backward(x != nullptr ? x + i0 : nullptr, y != nullptr ? y + i0 : nullptr,
                             dy + i0, dx + i0, i1 - i0, act);
  });
}

void CpuBackend::copy(const float* x, float* y, int64_t n) const {
  if (n > 0 && x != y) std::memcpy(y, x, sizeof(float) * static_cast<size_t>(n));
}

void CpuBackend::fill(float* y, int64_t n, float value) const {
  for (int64_t i = 0; i < n; ++i) y[i] = value;
}

void CpuBackend::add(const float* a, const float* b, float* y, int64_t n) const {
  cpu::parallel_range(n, kGrain,
                      [&](int64_t i0, int64_t i1) { cpu::add(a + i0, b + i0, y + i0, i1 - i0); });
}

void CpuBackend::add_relu(const float* a, const float* b, float* y, int64_t n) const {
  cpu::parallel_range(
      n, kGrain, [&](int64_t i0, int64_t i1) { cpu::add_relu(a + i0, b + i0, y + i0, i1 - i0); });
}

void CpuBackend::add_inplace(float* y, const float* x, int64_t n) const {
  cpu::parallel_range(n, kGrain,
                      [&](int64_t i0, int64_t i1) { cpu::add_inplace(y + i0, x + i0, i1 - i0); });
}

void CpuBackend::multiply(const float* a, const float* b, float* y, int64_t n) const {
  cpu::parallel_range(
      n, kGrain, [&](int64_t i0, int64_t i1) { cpu::multiply(a + i0, b + i0, y + i0, i1 - i0); });
}

void CpuBackend::scale(float* x, int64_t n, float s) const { cpu::scale(x, n, s); }

double CpuBackend::sum_squares(const float* x, int64_t n) const {
  return cpu::chunked_sum<double>(
      n, 64 * 1024, 1, [&](int64_t i0, int64_t i1) { return cpu::sum_squares(x + i0, i1 - i0); });
}

void CpuBackend::add_repeated(float* y, const float* x, int64_t repeats, int64_t n) const {
  cpu::parallel_range(repeats, cpu::items_per_thread(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) cpu::add_inplace(y + r * n, x, n);
  });
}

void CpuBackend::column_sums(const float* x, int64_t rows, int64_t cols, float* out) const {
  column_products(x, nullptr, nullptr, rows, cols, nullptr, out);
}

double CpuBackend::softmax_xent(const float* logits, const int32_t* labels, float* dlogits,
                                int64_t rows, int64_t classes, float grad_scale,
                                int64_t* correct) const {
  // Labels checked first, so the error names the row in the whole batch.
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] < 0 || labels[r] >= classes) {
      throw InputError("label " + std::to_string(labels[r]) + " at batch row " + std::to_string(r) +
                       " is outside [0, " + std::to_string(classes) + ")");
    }
  }
  // Rows in fixed chunks: the loss and the hits add up in chunk order, the
  // same on any number of threads.
  struct Part {
    double loss = 0;
    int64_t hits = 0;
    Part& operator+=(const Part& o) {
      loss += o.loss;
      hits += o.hits;
      return *this;
    }
  };
  const Part total = cpu::chunked_sum<Part>(rows, 64, classes, [&](int64_t r0, int64_t r1) {
    Part p;
    p.loss = cpu::softmax_xent(logits + r0 * classes, labels + r0,
                               dlogits != nullptr ? dlogits + r0 * classes : nullptr, r1 - r0,
                               classes, grad_scale, &p.hits);
    return p;
  });
  if (correct != nullptr) *correct = total.hits;
  return total.loss;
}

double CpuBackend::mse(const float* out, const float* target, float* dout, int64_t rows, int64_t k,
                       float grad_scale) const {
  const float inv_k = 1.0f / static_cast<float>(k);
  double sum = 0.0;
  for (int64_t i = 0; i < rows * k; ++i) {
    const float d = out[i] - target[i];
    sum += static_cast<double>(d) * d;
    dout[i] = 2.0f * d * inv_k * grad_scale;
  }
  return sum * inv_k;
}

void CpuBackend::adam_update(float* p, const float* g, float* m, float* v, int64_t n,
                             const cpu::AdamArgs& a) const {
  cpu::parallel_range(n, kGrain, [&](int64_t i0, int64_t i1) {
    cpu::adam_update(p + i0, g + i0, m + i0, v + i0, i1 - i0, a);
  });
}

void CpuBackend::sgd_update(float* p, const float* g, float* buf, int64_t n, float lr,
                            float momentum, float weight_decay, bool nesterov) const {
  cpu::parallel_range(n, kGrain, [&](int64_t i0, int64_t i1) {
    cpu::sgd_update(p + i0, g + i0, buf == nullptr ? nullptr : buf + i0, i1 - i0, lr, momentum,
                    weight_decay, nesterov);
  });
}

}  // namespace baton
