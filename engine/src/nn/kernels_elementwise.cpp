// Fused elementwise loops, each compiled for AVX-512, AVX2 (with FMA) and
// generic x86-64 (multiversion.h).
#include <baton/core/error.h>
#include <baton/nn/kernels.h>

#include <cmath>
#include <string>

#include "fast_math.h"
#include "multiversion.h"

namespace baton::cpu {

// The loops, once per ISA (multiversion.h); the entry points below pick one.
namespace isa_generic {
#include "kernels_elementwise_loops.inc"
}  // namespace isa_generic
#if defined(__x86_64__)
BATON_TARGET_AVX2_BEGIN
namespace isa_avx2 {
#include "kernels_elementwise_loops.inc"
}  // namespace isa_avx2
BATON_TARGET_END
BATON_TARGET_AVX512_BEGIN
namespace isa_avx512 {
#include "kernels_elementwise_loops.inc"
}  // namespace isa_avx512
BATON_TARGET_END
#endif

const char* elementwise_isa() { return cpu_level_name(cpu_level()); }

void bias_activation(float* y, const float* bias, int64_t rows, int64_t cols, Activation act) {
  return BATON_ISA_CALL(bias_activation)(y, bias, rows, cols, act);
}

void activation_backward_bias(const float* y, const float* pre, const float* dy, float* dpre,
                              float* dbias, int64_t rows, int64_t cols, Activation act) {
  return BATON_ISA_CALL(activation_backward_bias)(y, pre, dy, dpre, dbias, rows, cols, act);
}

void activation_forward(const float* x, float* y, int64_t n, Activation act) {
  return BATON_ISA_CALL(activation_forward)(x, y, n, act);
}

void activation_backward(const float* x, const float* y, const float* dy, float* dx, int64_t n,
                         Activation act) {
  return BATON_ISA_CALL(activation_backward)(x, y, dy, dx, n, act);
}

double softmax_xent(const float* logits, const int32_t* labels, float* dlogits, int64_t rows,
                    int64_t classes, float grad_scale, int64_t* correct) {
  return BATON_ISA_CALL(softmax_xent)(logits, labels, dlogits, rows, classes, grad_scale, correct);
}

void adam_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamArgs& a) {
  return BATON_ISA_CALL(adam_update)(p, g, m, v, n, a);
}

void sgd_update(float* p, const float* g, float* buf, int64_t n, float lr, float momentum,
                float weight_decay, bool nesterov) {
  return BATON_ISA_CALL(sgd_update)(p, g, buf, n, lr, momentum, weight_decay, nesterov);
}

double sum_squares(const float* x, int64_t n) { return BATON_ISA_CALL(sum_squares)(x, n); }

void scale(float* x, int64_t n, float s) { return BATON_ISA_CALL(scale)(x, n, s); }

void add_inplace(float* y, const float* x, int64_t n) {
  return BATON_ISA_CALL(add_inplace)(y, x, n);
}

void add(const float* a, const float* b, float* y, int64_t n) {
  return BATON_ISA_CALL(add)(a, b, y, n);
}

void add_relu(const float* a, const float* b, float* y, int64_t n) {
  return BATON_ISA_CALL(add_relu)(a, b, y, n);
}

void multiply(const float* a, const float* b, float* y, int64_t n) {
  return BATON_ISA_CALL(multiply)(a, b, y, n);
}

}  // namespace baton::cpu
