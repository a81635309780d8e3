// Fused elementwise loops, each compiled for AVX-512, AVX2 and generic
// x86-64 (multiversion.h).
#include <baton/core/error.h>
#include <baton/nn/kernels.h>

#include <cmath>
#include <string>

#include "fast_math.h"
#include "multiversion.h"

namespace baton::cpu {
namespace {

constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

constexpr float kSqrt2OverPi = 0.79788456080286535588f;

inline float gelu(float x) { return 0.5f * x * (1.0f + std::erf(x * kInvSqrt2)); }
// GPT-2's tanh approximation: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
// computed as x * sigmoid(2u): 1 + tanh(u) = 2 / (1 + e^-2u) has no
// cancellation where tanh(u) is near -1 (large negative x).
inline float gelu_tanh(float x) {
  const float u = kSqrt2OverPi * (x + 0.044715f * x * x * x);
  return x / (1.0f + fast_exp(-2.0f * u));
}
// d/dx: s + 2 x s (1 - s) du/dx with s = sigmoid(2u), 1 - s = e s.
inline float gelu_tanh_grad(float x) {
  const float u = kSqrt2OverPi * (x + 0.044715f * x * x * x);
  const float e = fast_exp(-2.0f * u);
  const float s = 1.0f / (1.0f + e);
  const float du = kSqrt2OverPi * (1.0f + 3.0f * 0.044715f * x * x);
  return s + 2.0f * x * s * (e * s) * du;
}
inline float gelu_grad(float x) {
  return 0.5f * (1.0f + std::erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * std::exp(-0.5f * x * x);
}

}  // namespace

const char* elementwise_isa() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) return "avx512f";
  if (__builtin_cpu_supports("avx2")) return "avx2";
#endif
  return "generic";
}

BATON_CLONES
void bias_activation(float* y, const float* bias, int64_t rows, int64_t cols, Activation act) {
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * cols;
    switch (act) {
      case Activation::kRelu:
        for (int64_t c = 0; c < cols; ++c) {
          float v = row[c] + (bias ? bias[c] : 0.0f);
          row[c] = v > 0.0f ? v : 0.0f;
        }
        break;
      case Activation::kTanh:
        for (int64_t c = 0; c < cols; ++c) row[c] = fast_tanh(row[c] + (bias ? bias[c] : 0.0f));
        break;
      case Activation::kGelu:
        for (int64_t c = 0; c < cols; ++c) row[c] = gelu(row[c] + (bias ? bias[c] : 0.0f));
        break;
      case Activation::kGeluTanh:
        for (int64_t c = 0; c < cols; ++c) row[c] = gelu_tanh(row[c] + (bias ? bias[c] : 0.0f));
        break;
      default:
        if (bias) {
          for (int64_t c = 0; c < cols; ++c) row[c] += bias[c];
        }
        break;
    }
  }
}

BATON_CLONES
void activation_backward_bias(const float* y, const float* pre, const float* dy, float* dpre,
                              float* dbias, int64_t rows, int64_t cols, Activation act) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * cols;
    const float* dyr = dy + r * cols;
    float* dr = dpre + r * cols;
    switch (act) {
      case Activation::kRelu:
        for (int64_t c = 0; c < cols; ++c) dr[c] = yr[c] > 0.0f ? dyr[c] : 0.0f;
        break;
      case Activation::kTanh:
        for (int64_t c = 0; c < cols; ++c) dr[c] = dyr[c] * (1.0f - yr[c] * yr[c]);
        break;
      case Activation::kGelu: {
        const float* pr = pre + r * cols;
        for (int64_t c = 0; c < cols; ++c) dr[c] = dyr[c] * gelu_grad(pr[c]);
        break;
      }
      case Activation::kGeluTanh: {
        const float* pr = pre + r * cols;
        for (int64_t c = 0; c < cols; ++c) dr[c] = dyr[c] * gelu_tanh_grad(pr[c]);
        break;
      }
      default:
        if (dr != dyr) {
          for (int64_t c = 0; c < cols; ++c) dr[c] = dyr[c];
        }
        break;
    }
    if (dbias) {
      for (int64_t c = 0; c < cols; ++c) dbias[c] += dr[c];
    }
  }
}

BATON_CLONES
void activation_forward(const float* x, float* y, int64_t n, Activation act) {
  switch (act) {
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
      break;
    case Activation::kTanh:
      for (int64_t i = 0; i < n; ++i) y[i] = fast_tanh(x[i]);
      break;
    case Activation::kGelu:
      for (int64_t i = 0; i < n; ++i) y[i] = gelu(x[i]);
      break;
    case Activation::kGeluTanh:
      for (int64_t i = 0; i < n; ++i) y[i] = gelu_tanh(x[i]);
      break;
    default:
      for (int64_t i = 0; i < n; ++i) y[i] = x[i];
      break;
  }
}

BATON_CLONES
void activation_backward(const float* x, const float* y, const float* dy, float* dx, int64_t n,
                         Activation act) {
  switch (act) {
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
      break;
    case Activation::kTanh:
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
      break;
    case Activation::kGelu:
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * gelu_grad(x[i]);
      break;
    case Activation::kGeluTanh:
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * gelu_tanh_grad(x[i]);
      break;
    default:
      for (int64_t i = 0; i < n; ++i) dx[i] = dy[i];
      break;
  }
}

double softmax_xent(const float* logits, const int32_t* labels, float* dlogits, int64_t rows,
                    int64_t classes, float grad_scale, int64_t* correct) {
  double loss = 0.0;
  int64_t hits = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * classes;
    const int32_t label = labels[r];
    if (label < 0 || label >= classes) {
      throw InputError("label " + std::to_string(label) + " at batch row " + std::to_string(r) +
                       " is outside [0, " + std::to_string(classes) + ")");
    }
    float mx = z[0];
    int64_t arg = 0;
    for (int64_t c = 1; c < classes; ++c) {
      if (z[c] > mx) {
        mx = z[c];
        arg = c;
      }
    }
    hits += arg == label;
    float sum = 0.0f;
    if (dlogits) {
      // Each exponential once: kept in the gradient row, then scaled.
      float* d = dlogits + r * classes;
      for (int64_t c = 0; c < classes; ++c) d[c] = fast_exp(z[c] - mx);
#pragma omp simd reduction(+ : sum)
      for (int64_t c = 0; c < classes; ++c) sum += d[c];
      const float inv = grad_scale / sum;
      for (int64_t c = 0; c < classes; ++c) d[c] *= inv;
      d[label] -= grad_scale;
    } else {
#pragma omp simd reduction(+ : sum)
      for (int64_t c = 0; c < classes; ++c) sum += fast_exp(z[c] - mx);
    }
    const float log_sum = std::log(sum);
    loss += static_cast<double>(log_sum - (z[label] - mx));
  }
  if (correct) *correct = hits;
  return loss;
}

BATON_CLONES
void adam_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamArgs& a) {
  const float step = a.lr / a.bias_correction1;
  const float inv_bc2_sqrt = 1.0f / std::sqrt(a.bias_correction2);
  const float decay = 1.0f - a.lr * a.decoupled_wd;
  const float b1 = a.beta1, b2 = a.beta2, c1 = 1.0f - a.beta1, c2 = 1.0f - a.beta2;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + a.l2_wd * p[i];
    const float mi = b1 * m[i] + c1 * gi;
    const float vi = b2 * v[i] + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step * mi / (std::sqrt(vi) * inv_bc2_sqrt + a.eps);
  }
}

BATON_CLONES
void sgd_update(float* p, const float* g, float* buf, int64_t n, float lr, float momentum,
                float weight_decay, bool nesterov) {
  if (buf == nullptr) {
    for (int64_t i = 0; i < n; ++i) p[i] -= lr * (g[i] + weight_decay * p[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] + weight_decay * p[i];
    const float b = momentum * buf[i] + gi;
    buf[i] = b;
    p[i] -= lr * (nesterov ? gi + momentum * b : b);
  }
}

BATON_CLONES
double sum_squares(const float* x, int64_t n) {
  // Blocked float partial sums, accumulated in double: vectorises and stays accurate.
  double total = 0.0;
  constexpr int64_t kBlock = 1024;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = start + kBlock < n ? start + kBlock : n;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = start; i < end; ++i) s += x[i] * x[i];
    total += s;
  }
  return total;
}

BATON_CLONES
void scale(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

BATON_CLONES
void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

BATON_CLONES
void add(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

BATON_CLONES
void add_relu(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = a[i] + b[i];
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

BATON_CLONES
void multiply(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * b[i];
}

}  // namespace baton::cpu
