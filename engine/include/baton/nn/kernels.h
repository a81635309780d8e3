// CPU kernels. Matrix products go to oneDNN's sgemm (which picks the best ISA
// for the CPU it runs on, with no environment variable); elementwise work is
// fused into single loops, compiled for AVX-512, AVX2 and a generic target
// and dispatched at load time. These loops are the reference for any other
// backend's kernels.
#pragma once

#include <cstdint>
#include <string>

namespace baton {

enum class Trans : int { kNo = 1, kYes = 2 };

// kGelu is the exact (erf) form; kGeluTanh GPT-2's tanh approximation.
enum class Activation : int {
  kUnset = 0,
  kNone = 1,
  kRelu = 2,
  kGelu = 3,
  kTanh = 4,
  kGeluTanh = 5
};
// Whether the backward pass needs the pre-activation (the GELUs).
inline bool needs_pre_activation(Activation a) {
  return a == Activation::kGelu || a == Activation::kGeluTanh;
}

Activation parse_activation(const std::string& name);  // throws InputError
const char* activation_name(Activation a);

namespace cpu {

// Row-major C(m,n) = alpha * op(A)(m,k) * op(B)(k,n) + beta * C.
void gemm(Trans ta, Trans tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// While alive, the calling thread flushes denormal floats to zero (FTZ and
// DAZ), as TensorFlow does in its compute threads: Adam's second moments
// decay into the denormal range, where some CPUs divide 100x slower.
class ScopedFlushDenormals {
 public:
  ScopedFlushDenormals();
  ~ScopedFlushDenormals();
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
  unsigned saved_ = 0;
};

// Threads the calling thread's kernels use (oneDNN runs on OpenMP).
void set_num_threads(int threads);
int num_threads();
// Which kernel path is in use, e.g. "oneDNN 2.6.3 sgemm (avx512_core), elementwise avx512f".
std::string kernel_path();

// y(rows, cols) = act(y + bias) in place; bias has `cols` entries.
void bias_activation(float* y, const float* bias, int64_t rows, int64_t cols, Activation act);
// Given y = act(pre) (the forward output) and dy, writes dpre = dy * act'(pre)
// into `dpre` (may alias dy) and adds the column sums of dpre into `dbias`
// (which the caller zeroes). GELU needs the pre-activation, passed as `pre`
// (unused for the others; may be null).
void activation_backward_bias(const float* y, const float* pre, const float* dy, float* dpre,
                              float* dbias, int64_t rows, int64_t cols, Activation act);
// Standalone activation, forward and backward (dx = dy * act'(x)).
void activation_forward(const float* x, float* y, int64_t n, Activation act);
void activation_backward(const float* x, const float* y, const float* dy, float* dx, int64_t n,
                         Activation act);

// Sparse softmax cross-entropy over `rows`. Writes dlogits =
// (softmax - onehot) * grad_scale (dlogits may be null), returns the summed
// loss and counts correct argmax predictions into *correct. Labels outside
// [0, classes) throw InputError.
double softmax_xent(const float* logits, const int32_t* labels, float* dlogits, int64_t rows,
                    int64_t classes, float grad_scale, int64_t* correct);

// Adam / AdamW update, fused: m, v, p updated in one pass.
// `decoupled_wd` is applied as p -= lr * wd * p (AdamW); `l2_wd` is added to
// the gradient (Adam with L2).
struct AdamArgs {
  float lr, beta1, beta2, eps, l2_wd, decoupled_wd;
  float bias_correction1, bias_correction2;  // 1 - beta^t
};
void adam_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamArgs& a);
// SGD with momentum buffer `buf` (null when momentum == 0).
void sgd_update(float* p, const float* g, float* buf, int64_t n, float lr, float momentum,
                float weight_decay, bool nesterov);
double sum_squares(const float* x, int64_t n);
void scale(float* x, int64_t n, float s);
// y += x
void add_inplace(float* y, const float* x, int64_t n);
// y = a + b, y = a * b (y may alias either)
void add(const float* a, const float* b, float* y, int64_t n);
// y = max(a + b, 0).
void add_relu(const float* a, const float* b, float* y, int64_t n);
void multiply(const float* a, const float* b, float* y, int64_t n);

}  // namespace cpu
}  // namespace baton
