// Shared by the layer gradient tests: random tensors, central finite
// differences of a scalar objective, and naive references.
#pragma once

#include <baton/core/error.h>
#include <baton/core/rng.h>
#include <baton/core/tensor.h>
#include <baton/nn/layers.h>
#include <baton/nn/loss.h>
#include <baton/nn/model.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace baton {
// Readable names for parameterised test failures.
inline void PrintTo(Activation a, std::ostream* os) { *os << activation_name(a); }
}  // namespace baton

using baton::Activation;
using baton::BatchNorm;
using baton::Dropout;
using baton::ForwardContext;
using baton::Layer;
using baton::LayerNorm;
using baton::Linear;
using baton::Mode;
using baton::Param;
using baton::RMSNorm;
using baton::Rng;
using baton::Tensor;

namespace gradcheck {

const ForwardContext kTrain{Mode::kTrain, 1234};
const ForwardContext kEval{Mode::kEval, 1234};

constexpr double kAbsTol = 2e-3;
constexpr double kRelTol = 2e-2;

inline void fill_uniform(Tensor& t, Rng& rng, float lo, float hi) {
  for (auto& v : t.span()) v = lo + (hi - lo) * rng.uniform();
}

inline Tensor random_tensor(std::vector<int64_t> shape, Rng& rng, float lo = -1.0f,
                            float hi = 1.0f) {
  Tensor t(std::move(shape));
  fill_uniform(t, rng, lo, hi);
  return t;
}

// sum(y * r) in double.
inline double dot(const Tensor& y, const Tensor& r) {
  EXPECT_EQ(y.numel(), r.numel());
  double s = 0.0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y[i]) * r[i];
  return s;
}

inline bool close(double analytic, double numeric) {
  return std::abs(analytic - numeric) <=
         kAbsTol + kRelTol * std::max(std::abs(analytic), std::abs(numeric));
}

// Central difference of `f` w.r.t. t[i], using the float values actually
// stored for the step.
template <typename F>
inline double central_difference(Tensor& t, int64_t i, double eps, F&& f) {
  const float orig = t[i];
  const float up = orig + static_cast<float>(eps);
  const float down = orig - static_cast<float>(eps);
  t[i] = up;
  const double f_up = f();
  t[i] = down;
  const double f_down = f();
  t[i] = orig;
  return (f_up - f_down) / (static_cast<double>(up) - static_cast<double>(down));
}

// Compares `analytic` (a gradient of f w.r.t. `t`) with finite differences.
// Returns the largest |numeric| seen, so callers can make sure the check was
// not trivially comparing zeros.
template <typename F>
inline double check_tensor_gradient(const std::string& what, Tensor& t, const Tensor& analytic,
                                    double eps, F&& f) {
  EXPECT_EQ(analytic.numel(), t.numel()) << what;
  double largest = 0.0;
  int failures = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double numeric = central_difference(t, i, eps, f);
    largest = std::max(largest, std::abs(numeric));
    if (!close(analytic[i], numeric)) {
      ADD_FAILURE() << what << "[" << i << "]: analytic " << analytic[i] << ", numeric " << numeric;
      if (++failures > 5) break;
    }
  }
  return largest;
}

// The standard check for a layer: objective L = sum(layer(x) * r) for a
// fixed random r; backward(dy = r) gives dL/dx and dL/dparams.
inline void gradcheck_layer(Layer& layer, Tensor& x, const ForwardContext& ctx, uint64_t seed,
                            double eps = 2e-3, bool expect_nonzero_input_grad = true) {
  Rng rng(seed);
  const Tensor& y0 = layer.forward(x, ctx);
  Tensor r = random_tensor(y0.shape(), rng);
  const Tensor dx = layer.backward(r, /*need_input_grad=*/true);
  ASSERT_EQ(dx.shape(), x.shape());

  std::vector<Param*> params = layer.params();
  std::vector<Tensor> grads;
  for (Param* p : params) grads.push_back(p->grad);

  // Parameter gradients are overwritten, not accumulated.
  (void)layer.forward(x, ctx);
  (void)layer.backward(r, true);
  for (size_t k = 0; k < params.size(); ++k) {
    for (int64_t i = 0; i < grads[k].numel(); ++i) {
      ASSERT_EQ(params[k]->grad[i], grads[k][i])
          << params[k]->name << ": a second backward must give the same gradient";
    }
  }

  auto objective = [&] { return dot(layer.forward(x, ctx), r); };
  const double largest_dx = check_tensor_gradient("dx", x, dx, eps, objective);
  if (expect_nonzero_input_grad) {
    EXPECT_GT(largest_dx, 1e-3) << "input gradient is all zero";
  }
  for (size_t k = 0; k < params.size(); ++k) {
    const double largest =
        check_tensor_gradient(params[k]->name, params[k]->value, grads[k], eps, objective);
    EXPECT_GT(largest, 1e-3) << params[k]->name << " gradient is all zero";
  }
}

// Sets every parameter to random values so gains/biases are not the
// trivial 1/0 and their gradients matter.
inline void randomize_params(Layer& layer, Rng& rng) {
  for (Param* p : layer.params()) {
    if (p->name == "gain") {
      fill_uniform(p->value, rng, 0.5f, 1.5f);
    } else {
      fill_uniform(p->value, rng, -0.5f, 0.5f);
    }
  }
}

inline double act_ref(double v, Activation a) {
  switch (a) {
    case Activation::kRelu:
      return v > 0.0 ? v : 0.0;
    case Activation::kTanh:
      return std::tanh(v);
    case Activation::kGelu:
      return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    case Activation::kGeluTanh:
      return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    default:
      return v;
  }
}

// Pre-activations x W^T + b of a Linear layer, naively.
inline std::vector<double> linear_pre(Linear& l, const Tensor& x, bool bias) {
  const Tensor& w = l.weight().value;
  const int64_t n = x.rows(), in = w.dim(1), out = w.dim(0);
  std::vector<double> pre(static_cast<size_t>(n * out));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double s = bias ? l.bias().value[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) s += static_cast<double>(x.at(r, i)) * w.at(o, i);
      pre[static_cast<size_t>(r * out + o)] = s;
    }
  }
  return pre;
}

}  // namespace gradcheck

using namespace gradcheck;  // NOLINT: the tests' shared vocabulary
