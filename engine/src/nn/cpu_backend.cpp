// The CPU backend's products, activations, elementwise ops, losses and
// optimizer updates: the fused kernels of kernels.h.
#include "cpu_backend.h"

#include <baton/core/error.h>

#include <cstring>

namespace baton {

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
  cpu::bias_activation(y, bias, rows, cols, act);
}

void CpuBackend::activation_backward_bias(const float* y, const float* pre, const float* dy,
                                          float* dpre, float* dbias, int64_t rows, int64_t cols,
                                          Activation act) const {
  cpu::activation_backward_bias(y, pre, dy, dpre, dbias, rows, cols, act);
}

void CpuBackend::activation_forward(const float* x, float* y, int64_t n, Activation act) const {
  cpu::activation_forward(x, y, n, act);
}

void CpuBackend::activation_backward(const float* x, const float* y, const float* dy, float* dx,
                                     int64_t n, Activation act) const {
  cpu::activation_backward(x, y, dy, dx, n, act);
}

void CpuBackend::copy(const float* x, float* y, int64_t n) const {
  if (n > 0 && x != y) std::memcpy(y, x, sizeof(float) * static_cast<size_t>(n));
}

void CpuBackend::fill(float* y, int64_t n, float value) const {
  for (int64_t i = 0; i < n; ++i) y[i] = value;
}

void CpuBackend::add(const float* a, const float* b, float* y, int64_t n) const {
  cpu::add(a, b, y, n);
}

void CpuBackend::add_inplace(float* y, const float* x, int64_t n) const {
  cpu::add_inplace(y, x, n);
}

void CpuBackend::multiply(const float* a, const float* b, float* y, int64_t n) const {
  cpu::multiply(a, b, y, n);
}

void CpuBackend::scale(float* x, int64_t n, float s) const { cpu::scale(x, n, s); }

double CpuBackend::sum_squares(const float* x, int64_t n) const { return cpu::sum_squares(x, n); }

void CpuBackend::add_repeated(float* y, const float* x, int64_t repeats, int64_t n) const {
  for (int64_t r = 0; r < repeats; ++r) cpu::add_inplace(y + r * n, x, n);
}

void CpuBackend::column_sums(const float* x, int64_t rows, int64_t cols, float* out) const {
  fill(out, cols, 0.0f);
  for (int64_t r = 0; r < rows; ++r) cpu::add_inplace(out, x + r * cols, cols);
}

double CpuBackend::softmax_xent(const float* logits, const int32_t* labels, float* dlogits,
                                int64_t rows, int64_t classes, float grad_scale,
                                int64_t* correct) const {
  return cpu::softmax_xent(logits, labels, dlogits, rows, classes, grad_scale, correct);
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
  cpu::adam_update(p, g, m, v, n, a);
}

void CpuBackend::sgd_update(float* p, const float* g, float* buf, int64_t n, float lr,
                            float momentum, float weight_decay, bool nesterov) const {
  cpu::sgd_update(p, g, buf, n, lr, momentum, weight_decay, nesterov);
}

}  // namespace baton
