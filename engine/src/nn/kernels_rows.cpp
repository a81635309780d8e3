// The per-row and per-column loops of kernels_rows.h.
#include "kernels_rows.h"

#include <cmath>

#include "fast_math.h"
#include "multiversion.h"

namespace baton::cpu {

// The loops, once per ISA (multiversion.h); the entry points below pick one.
namespace isa_generic {
#include "kernels_rows_loops.inc"
}  // namespace isa_generic
#if defined(__x86_64__)
BATON_TARGET_AVX2_BEGIN
namespace isa_avx2 {
#include "kernels_rows_loops.inc"
}  // namespace isa_avx2
BATON_TARGET_END
BATON_TARGET_AVX512_BEGIN
namespace isa_avx512 {
#include "kernels_rows_loops.inc"
}  // namespace isa_avx512
BATON_TARGET_END
#endif

void layer_norm_rows(const float* x, const float* g, const float* b, float* y, float* xhat,
                     float* rstd, int64_t rows, int64_t f, float eps) {
  return BATON_ISA_CALL(layer_norm_rows)(x, g, b, y, xhat, rstd, rows, f, eps);
}

void layer_norm_dx_rows(const float* dy, const float* xhat, const float* rstd, const float* g,
                        float* dx, int64_t rows, int64_t f) {
  return BATON_ISA_CALL(layer_norm_dx_rows)(dy, xhat, rstd, g, dx, rows, f);
}

void rms_norm_rows(const float* x, const float* g, float* y, float* rstd, int64_t rows, int64_t f,
                   float eps) {
  return BATON_ISA_CALL(rms_norm_rows)(x, g, y, rstd, rows, f, eps);
}

void rms_norm_dx_rows(const float* dy, const float* x, const float* rstd, const float* g, float* dx,
                      int64_t rows, int64_t f) {
  return BATON_ISA_CALL(rms_norm_dx_rows)(dy, x, rstd, g, dx, rows, f);
}

void column_sums_into(const float* a, const float* b, const float* s, int64_t rows, int64_t ld,
                      int64_t cols, float* sum_ab, float* sum_a) {
  return BATON_ISA_CALL(column_sums_into)(a, b, s, rows, ld, cols, sum_ab, sum_a);
}

void column_centered_squares_into(const float* a, const float* mean, int64_t rows, int64_t ld,
                                  int64_t cols, float* out) {
  return BATON_ISA_CALL(column_centered_squares_into)(a, mean, rows, ld, cols, out);
}

void batch_norm_apply_rows(const float* x, const float* mean, const float* rstd, const float* g,
                           const float* b, float* xhat, float* y, int64_t rows, int64_t f,
                           bool relu) {
  return BATON_ISA_CALL(batch_norm_apply_rows)(x, mean, rstd, g, b, xhat, y, rows, f, relu);
}

void batch_norm_grad_sums_into(const float* dy, const float* relu_y, const float* xhat,
                               int64_t rows, int64_t ld, int64_t cols, float* sum_dy_xhat,
                               float* sum_dy) {
  return BATON_ISA_CALL(batch_norm_grad_sums_into)(dy, relu_y, xhat, rows, ld, cols, sum_dy_xhat,
                                                   sum_dy);
}

void batch_norm_input_grad_rows(const float* dy, const float* relu_y, const float* xhat,
                                const float* g, const float* rstd, const float* sum_dy,
                                const float* sum_dy_xhat, float inv_n, float* dx, int64_t rows,
                                int64_t f) {
  return BATON_ISA_CALL(batch_norm_input_grad_rows)(dy, relu_y, xhat, g, rstd, sum_dy, sum_dy_xhat,
                                                    inv_n, dx, rows, f);
}

void causal_softmax_rows(float* p, int64_t seq, int64_t first, int64_t end) {
  return BATON_ISA_CALL(causal_softmax_rows)(p, seq, first, end);
}

void softmax_row(float* row, int64_t n) { return BATON_ISA_CALL(softmax_row)(row, n); }

void causal_softmax_backward(const float* p, float* dp, int64_t seq, float scale, int64_t first,
                             int64_t end) {
  return BATON_ISA_CALL(causal_softmax_backward)(p, dp, seq, scale, first, end);
}

}  // namespace baton::cpu
