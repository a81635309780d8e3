// The CPU reference backend (baton/nn/backend.h). Its methods are spread
// over cpu_backend.cpp (products, activations, elementwise, losses,
// optimizer: the kernels of kernels.h), cpu_norm.cpp (row and batch
// normalisation, dropout masks, tokens) and cpu_attention.cpp.
#pragma once

#include <baton/nn/backend.h>

namespace baton {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::kCpu; }
  std::string describe() const override;

  void matmul(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
              int64_t lda, const float* b, int64_t ldb, float beta, float* c,
              int64_t ldc) const override;

  void bias_activation(float* y, const float* bias, int64_t rows, int64_t cols,
                       Activation act) const override;
  void activation_backward_bias(const float* y, const float* pre, const float* dy, float* dpre,
                                float* dbias, int64_t rows, int64_t cols,
                                Activation act) const override;
  void activation_forward(const float* x, float* y, int64_t n, Activation act) const override;
  void activation_backward(const float* x, const float* y, const float* dy, float* dx, int64_t n,
                           Activation act) const override;

  void copy(const float* x, float* y, int64_t n) const override;
  void fill(float* y, int64_t n, float value) const override;
  void add(const float* a, const float* b, float* y, int64_t n) const override;
  void add_relu(const float* a, const float* b, float* y, int64_t n) const override;
  void add_inplace(float* y, const float* x, int64_t n) const override;
  void multiply(const float* a, const float* b, float* y, int64_t n) const override;
  void scale(float* x, int64_t n, float s) const override;
  double sum_squares(const float* x, int64_t n) const override;
  void add_repeated(float* y, const float* x, int64_t repeats, int64_t n) const override;
  void column_sums(const float* x, int64_t rows, int64_t cols, float* out) const override;
  void dropout_mask(float* mask, int64_t rows, int64_t cols, float p, uint64_t seed,
                    int64_t first_row) const override;

  void layer_norm_forward(const float* x, const float* gain, const float* bias, float* y,
                          float* xhat, float* rstd, int64_t rows, int64_t f,
                          float eps) const override;
  void layer_norm_backward(const float* dy, const float* xhat, const float* rstd, const float* gain,
                           float* dx, float* dgain, float* dbias, int64_t rows,
                           int64_t f) const override;
  void rms_norm_forward(const float* x, const float* gain, float* y, float* rstd, int64_t rows,
                        int64_t f, float eps) const override;
  void rms_norm_backward(const float* dy, const float* x, const float* rstd, const float* gain,
                         float* dx, float* dgain, int64_t rows, int64_t f) const override;

  void column_centered_squares(const float* x, const float* mean, int64_t rows, int64_t cols,
                               float* out) const override;
  void batch_norm_statistics(const float* sum, const float* m2, float rows, float momentum,
                             float eps, float* mean, float* rstd, float* running_mean,
                             float* running_var, int64_t f) const override;
  void batch_norm_running(const float* running_mean, const float* running_var, float eps,
                          float* mean, float* rstd, int64_t f) const override;
  void batch_norm_apply(const float* x, const float* mean, const float* rstd, const float* gain,
                        const float* bias, float* xhat, float* y, int64_t rows, int64_t f,
                        bool relu) const override;
  void batch_norm_param_grads(const float* dy, const float* relu_y, const float* xhat,
                              float* dgain, float* dbias, int64_t rows, int64_t f) const override;
  void batch_norm_input_grad(const float* dy, const float* relu_y, const float* xhat,
                             const float* gain, const float* rstd, const float* sum_dy,
                             const float* sum_dy_xhat, float inv_rows, float* dx, int64_t rows,
                             int64_t f) const override;

  double softmax_xent(const float* logits, const int32_t* labels, float* dlogits, int64_t rows,
                      int64_t classes, float grad_scale, int64_t* correct) const override;
  double mse(const float* out, const float* target, float* dout, int64_t rows, int64_t k,
             float grad_scale) const override;

  void token_ids(const float* x, int32_t* ids, int64_t n, int64_t vocab) const override;
  void embedding_forward(const int32_t* ids, const float* table, float* out, int64_t n,
                         int64_t dim) const override;
  void embedding_backward(const int32_t* ids, const float* dout, float* dtable, int64_t n,
                          int64_t dim) const override;

  void attention_forward(const float* qkv, float* out, float* probs, const float* mask,
                         float* dropped, const AttentionShape& s) const override;
  void attention_decode(const float* q, const float* k, const float* v, int64_t len, int64_t heads,
                        int64_t head_dim, float* scores, float* out) const override;
  void attention_backward(const float* qkv, const float* probs, const float* mask,
                          const float* dropped, const float* dout, float* dqkv, float* dprobs,
                          const AttentionShape& s) const override;

  void chw_to_rows(const float* x, float* y, int64_t n, int64_t c, int64_t h,
                   int64_t w) const override;
  std::unique_ptr<ConvKernel> plan_conv(const ConvShape& s) const override;
  void max_pool_forward(const float* x, float* y, int32_t* argmax,
                        const PoolShape& s) const override;
  void max_pool_backward(const float* dy, const int32_t* argmax, float* dx,
                         const PoolShape& s) const override;
  void avg_pool_forward(const float* x, float* y, const PoolShape& s) const override;
  void avg_pool_backward(const float* dy, float* dx, const PoolShape& s) const override;

  void adam_update(float* p, const float* g, float* m, float* v, int64_t n,
                   const cpu::AdamArgs& a) const override;
  void sgd_update(float* p, const float* g, float* buf, int64_t n, float lr, float momentum,
                  float weight_decay, bool nesterov) const override;

 private:
  // sum_ab[c] = sum over rows of a[r][c] * b[r][c] * (s ? s[r] : 1),
  // sum_a[c] = sum over rows of a[r][c] (either may be null): the
  // parameter gradients of the norms and biases, split over columns.
  void column_products(const float* a, const float* b, const float* s, int64_t rows, int64_t cols,
                       float* sum_ab, float* sum_a) const;
};

}  // namespace baton
