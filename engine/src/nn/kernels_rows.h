// The CPU backend's per-row and per-column loops (normalisation, column
// sums, the causal softmax), compiled for each ISA (multiversion.h). The
// backend splits rows or columns over threads and calls these on a range;
// pointers are to the range's first row or column.
#pragma once

#include <cstdint>

namespace baton::cpu {

void layer_norm_rows(const float* x, const float* g, const float* b, float* y, float* xhat,
                     float* rstd, int64_t rows, int64_t f, float eps);
// dx of a layer norm from its saved xhat and rstd (the parameter gradients
// are column sums: column_sums_into).
void layer_norm_dx_rows(const float* dy, const float* xhat, const float* rstd, const float* g,
                        float* dx, int64_t rows, int64_t f);
void rms_norm_rows(const float* x, const float* g, float* y, float* rstd, int64_t rows, int64_t f,
                   float eps);
void rms_norm_dx_rows(const float* dy, const float* x, const float* rstd, const float* g, float* dx,
                      int64_t rows, int64_t f);

// For the first `cols` columns of row-major (rows, ld) matrices a and b:
//   sum_ab[c] += sum over r of a[r][c] * b[r][c] * (s ? s[r] : 1)
//   sum_a[c]  += sum over r of a[r][c]
// Either output may be null (and b with sum_ab).
void column_sums_into(const float* a, const float* b, const float* s, int64_t rows, int64_t ld,
                      int64_t cols, float* sum_ab, float* sum_a);

// out[c] += sum over r of (a[r][c] - mean[c])^2, for the first `cols`
// columns of a row-major (rows, ld) matrix.
void column_centered_squares_into(const float* a, const float* mean, int64_t rows, int64_t ld,
                                  int64_t cols, float* out);

void batch_norm_apply_rows(const float* x, const float* mean, const float* rstd, const float* g,
                           const float* b, float* xhat, float* y, int64_t rows, int64_t f,
                           bool relu);
// BatchNorm's gradient sums for the first `cols` columns of (rows, ld)
// matrices: sum_dy_xhat[c] += dy' * xhat, sum_dy[c] += dy', with
// dy' = dy masked by relu_y > 0 when relu_y is given (Backend's contract).
void batch_norm_grad_sums_into(const float* dy, const float* relu_y, const float* xhat,
                               int64_t rows, int64_t ld, int64_t cols, float* sum_dy_xhat,
                               float* sum_dy);
void batch_norm_input_grad_rows(const float* dy, const float* relu_y, const float* xhat,
                                const float* g, const float* rstd, const float* sum_dy,
                                const float* sum_dy_xhat, float inv_n, float* dx, int64_t rows,
                                int64_t f);

// The causal softmax of a (seq, seq) score matrix, in place: row t keeps
// columns 0..t (softmax over them), zeros after. Rows [first, end) only.
void causal_softmax_rows(float* p, int64_t seq, int64_t first, int64_t end);
// Softmax over row[0, n) in place.
void softmax_row(float* row, int64_t n);
// The causal softmax's backward, in place on dp (seq, seq): from the
// probabilities p and the gradient of the probabilities, the gradient of
// the scores times `scale` (the 1/sqrt(d) the scores were scaled by);
// zeros above the diagonal. Rows [first, end) only; each reads its own
// row's entries up to the diagonal.
void causal_softmax_backward(const float* p, float* dp, int64_t seq, float scale, int64_t first,
                             int64_t end);

}  // namespace baton::cpu
