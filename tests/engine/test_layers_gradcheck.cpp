// Layers and losses: forward against naive reference loops, and every
// analytic gradient (input and parameters) against central finite
// differences of a scalar objective.
#include <baton/error.h>
#include <baton/layers.h>
#include <baton/loss.h>
#include <baton/model.h>
#include <baton/rng.h>
#include <baton/tensor.h>
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
void PrintTo(Activation a, std::ostream* os) { *os << activation_name(a); }
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

namespace {

const ForwardContext kTrain{Mode::kTrain, 1234};
const ForwardContext kEval{Mode::kEval, 1234};

constexpr double kAbsTol = 2e-3;
constexpr double kRelTol = 2e-2;

void fill_uniform(Tensor& t, Rng& rng, float lo, float hi) {
  for (auto& v : t.span()) v = lo + (hi - lo) * rng.uniform();
}

Tensor random_tensor(std::vector<int64_t> shape, Rng& rng, float lo = -1.0f, float hi = 1.0f) {
  Tensor t(std::move(shape));
  fill_uniform(t, rng, lo, hi);
  return t;
}

// sum(y * r) in double.
double dot(const Tensor& y, const Tensor& r) {
  EXPECT_EQ(y.numel(), r.numel());
  double s = 0.0;
  for (int64_t i = 0; i < y.numel(); ++i) s += static_cast<double>(y[i]) * r[i];
  return s;
}

bool close(double analytic, double numeric) {
  return std::abs(analytic - numeric) <=
         kAbsTol + kRelTol * std::max(std::abs(analytic), std::abs(numeric));
}

// Central difference of `f` w.r.t. t[i], using the float values actually
// stored for the step.
template <typename F>
double central_difference(Tensor& t, int64_t i, double eps, F&& f) {
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
double check_tensor_gradient(const std::string& what, Tensor& t, const Tensor& analytic, double eps,
                             F&& f) {
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
void gradcheck_layer(Layer& layer, Tensor& x, const ForwardContext& ctx, uint64_t seed,
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
void randomize_params(Layer& layer, Rng& rng) {
  for (Param* p : layer.params()) {
    if (p->name == "gain") {
      fill_uniform(p->value, rng, 0.5f, 1.5f);
    } else {
      fill_uniform(p->value, rng, -0.5f, 0.5f);
    }
  }
}

double act_ref(double v, Activation a) {
  switch (a) {
    case Activation::kRelu:
      return v > 0.0 ? v : 0.0;
    case Activation::kTanh:
      return std::tanh(v);
    case Activation::kGelu:
      return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    default:
      return v;
  }
}

// Pre-activations x W^T + b of a Linear layer, naively.
std::vector<double> linear_pre(Linear& l, const Tensor& x, bool bias) {
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

}  // namespace

// ---------------------------------------------------------------- Linear

class LinearGrad : public testing::TestWithParam<std::tuple<Activation, bool>> {};

TEST_P(LinearGrad, ForwardAndFiniteDifferences) {
  const auto [act, bias] = GetParam();
  const int64_t batch = 5, in = 6, out = 7;
  Rng rng(100 + static_cast<uint64_t>(act) * 2 + bias);
  Linear layer(in, out, act, bias);
  EXPECT_EQ(layer.plan(batch, in), out);
  layer.init(rng);
  EXPECT_EQ(layer.params().size(), bias ? 2u : 1u);
  if (bias) fill_uniform(layer.bias().value, rng, -0.5f, 0.5f);

  // For ReLU, draw inputs until every pre-activation is clear of the kink
  // by more than a finite-difference step can move it.
  Tensor x;
  for (int attempt = 0;; ++attempt) {
    ASSERT_LT(attempt, 1000) << "could not draw inputs away from the ReLU kink";
    x = random_tensor({batch, in}, rng);
    if (act != Activation::kRelu) break;
    const auto pre = linear_pre(layer, x, bias);
    if (std::all_of(pre.begin(), pre.end(), [](double v) { return std::abs(v) > 0.03; })) break;
  }

  // Forward against a naive loop.
  const auto pre = linear_pre(layer, x, bias);
  const Tensor& y = layer.forward(x, kTrain);
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{batch, out}));
  for (int64_t i = 0; i < y.numel(); ++i) {
    const double expected = act_ref(pre[static_cast<size_t>(i)], act);
    ASSERT_NEAR(y[i], expected, 1e-5 + 1e-5 * std::abs(expected)) << i;
  }

  gradcheck_layer(layer, x, kTrain, 7, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Layers, LinearGrad,
                         testing::Combine(testing::Values(Activation::kNone, Activation::kRelu,
                                                          Activation::kTanh, Activation::kGelu),
                                          testing::Bool()),
                         [](const testing::TestParamInfo<LinearGrad::ParamType>& info) {
                           return std::string(baton::activation_name(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_bias" : "_nobias");
                         });

TEST(Linear, PlanRefusesWrongWidth) {
  Linear layer(4, 3);
  EXPECT_THROW(layer.plan(8, 5), baton::InputError);
  EXPECT_THROW(Linear(0, 3), baton::InputError);
}

TEST(Linear, ShortAndEmptyBatches) {
  const int64_t max_batch = 6, in = 5, out = 4;
  Rng rng(55);
  Linear layer(in, out, Activation::kTanh);
  layer.plan(max_batch, in);
  layer.init(rng);
  fill_uniform(layer.bias().value, rng, -0.5f, 0.5f);

  // A short batch: a planned input with set_rows, the unused rows garbage.
  Tensor x = random_tensor({max_batch, in}, rng);
  for (int64_t c = 0; c < in; ++c) x.at(max_batch - 1, c) = 1e6f;
  x.set_rows(3);
  const Tensor& y = layer.forward(x, kTrain);
  EXPECT_EQ(y.rows(), 3);
  const auto pre = linear_pre(layer, x, true);
  for (int64_t i = 0; i < y.numel(); ++i) {
    ASSERT_NEAR(y[i], std::tanh(pre[static_cast<size_t>(i)]), 1e-5);
  }
  gradcheck_layer(layer, x, kTrain, 56, 1e-3);

  // A batch with no rows (a replica whose shard of the last batch is empty)
  // contributes zero parameter gradients, not the previous batch's.
  Tensor empty = random_tensor({max_batch, in}, rng);
  empty.set_rows(0);
  (void)layer.forward(empty, kTrain);
  Tensor dy({max_batch, out});
  dy.set_rows(0);
  const Tensor& dx = layer.backward(dy, true);
  EXPECT_EQ(dx.rows(), 0);
  for (Param* p : layer.params()) {
    for (int64_t i = 0; i < p->grad.numel(); ++i) {
      ASSERT_EQ(p->grad[i], 0.0f) << p->name << "[" << i << "] after an empty batch";
    }
  }
}

// ---------------------------------------------------------------- ActivationLayer

class ActivationGrad : public testing::TestWithParam<Activation> {};

TEST_P(ActivationGrad, ForwardAndFiniteDifferences) {
  const Activation act = GetParam();
  const int64_t batch = 4, f = 7;
  Rng rng(200 + static_cast<uint64_t>(act));
  baton::ActivationLayer layer(act);
  EXPECT_EQ(layer.plan(batch, f), f);
  EXPECT_TRUE(layer.params().empty());
  Tensor x = random_tensor({batch, f}, rng, -3.0f, 3.0f);
  for (auto& v : x.span()) {
    if (std::abs(v) < 0.05f) v = v < 0.0f ? -0.5f : 0.5f;  // away from the ReLU kink
  }
  const Tensor& y = layer.forward(x, kTrain);
  for (int64_t i = 0; i < x.numel(); ++i) {
    ASSERT_NEAR(y[i], act_ref(x[i], act), 1e-5) << i;
  }
  gradcheck_layer(layer, x, kTrain, 9, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Layers, ActivationGrad,
                         testing::Values(Activation::kRelu, Activation::kGelu, Activation::kTanh),
                         [](const testing::TestParamInfo<Activation>& info) {
                           return std::string(baton::activation_name(info.param));
                         });

// ---------------------------------------------------------------- Dropout

TEST(DropoutLayer, TrainMaskIsFixedByStepSeedAndGradientsMatch) {
  const int64_t batch = 6, f = 5;
  const float p = 0.4f;
  Rng rng(300);
  Dropout layer(p);
  layer.plan(batch, f);
  Tensor x = random_tensor({batch, f}, rng, 0.5f, 1.5f);  // never 0, so the mask shows

  const Tensor y1 = layer.forward(x, kTrain);
  const Tensor y2 = layer.forward(x, kTrain);
  int dropped = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    ASSERT_EQ(y1[i], y2[i]) << "same step seed, same mask";
    const bool kept = y1[i] != 0.0f;
    dropped += !kept;
    if (kept) {
      ASSERT_NEAR(y1[i], x[i] / (1.0f - p), 1e-6) << "kept units are scaled by 1/(1-p)";
    }
  }
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, x.numel());

  // A different step seed draws a different mask.
  const Tensor y3 = layer.forward(x, ForwardContext{Mode::kTrain, 999});
  int differ = 0;
  for (int64_t i = 0; i < x.numel(); ++i) differ += (y3[i] == 0.0f) != (y1[i] == 0.0f);
  EXPECT_GT(differ, 0);

  gradcheck_layer(layer, x, kTrain, 301, 1e-2);
}

TEST(DropoutLayer, LayerIndexSelectsTheStream) {
  const int64_t batch = 8, f = 8;
  Rng rng(310);
  Tensor x = random_tensor({batch, f}, rng, 0.5f, 1.5f);
  Dropout a(0.5f), b(0.5f);
  a.plan(batch, f);
  b.plan(batch, f);
  b.set_index(3);
  const Tensor& ya = a.forward(x, kTrain);
  const Tensor& yb = b.forward(x, kTrain);
  int differ = 0;
  for (int64_t i = 0; i < x.numel(); ++i) differ += (ya[i] == 0.0f) != (yb[i] == 0.0f);
  EXPECT_GT(differ, 0);
}

TEST(DropoutLayer, RateIsRoughlyP) {
  const int64_t batch = 200, f = 50;
  Dropout layer(0.3f);
  layer.plan(batch, f);
  Tensor x({batch, f}, 1.0f);
  const Tensor& y = layer.forward(x, kTrain);
  int64_t dropped = 0;
  for (int64_t i = 0; i < y.numel(); ++i) dropped += y[i] == 0.0f;
  EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(y.numel()), 0.3, 0.03);
}

TEST(DropoutLayer, EvalIsIdentity) {
  const int64_t batch = 4, f = 6;
  Rng rng(320);
  Dropout layer(0.5f);
  layer.plan(batch, f);
  Tensor x = random_tensor({batch, f}, rng);
  const Tensor& y = layer.forward(x, kEval);
  ASSERT_EQ(y.numel(), x.numel());
  for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(y[i], x[i]);
  Tensor dy = random_tensor({batch, f}, rng);
  const Tensor& dx = layer.backward(dy, true);
  for (int64_t i = 0; i < dy.numel(); ++i) ASSERT_EQ(dx[i], dy[i]);
  gradcheck_layer(layer, x, kEval, 321, 1e-2);

  EXPECT_THROW(Dropout(1.0f), baton::InputError);
  EXPECT_THROW(Dropout(-0.1f), baton::InputError);
}

// ---------------------------------------------------------------- LayerNorm / RMSNorm

TEST(LayerNormLayer, ForwardAndFiniteDifferences) {
  const int64_t batch = 5, f = 6;
  const float eps = 1e-5f;
  Rng rng(400);
  LayerNorm layer(eps);
  EXPECT_EQ(layer.plan(batch, f), f);
  layer.init(rng);
  randomize_params(layer, rng);
  Tensor x = random_tensor({batch, f}, rng, -2.0f, 2.0f);

  const Tensor& y = layer.forward(x, kTrain);
  const auto params = layer.params();
  ASSERT_EQ(params.size(), 2u);
  const Tensor& g = params[0]->value;
  const Tensor& b = params[1]->value;
  for (int64_t r = 0; r < batch; ++r) {
    double mean = 0.0, var = 0.0;
    for (int64_t c = 0; c < f; ++c) mean += x.at(r, c);
    mean /= f;
    for (int64_t c = 0; c < f; ++c) var += (x.at(r, c) - mean) * (x.at(r, c) - mean);
    var /= f;
    for (int64_t c = 0; c < f; ++c) {
      const double expected = (x.at(r, c) - mean) / std::sqrt(var + eps) * g[c] + b[c];
      ASSERT_NEAR(y.at(r, c), expected, 1e-5) << r << "," << c;
    }
  }
  gradcheck_layer(layer, x, kTrain, 401, 2e-3);
}

TEST(RMSNormLayer, ForwardAndFiniteDifferences) {
  const int64_t batch = 6, f = 5;
  const float eps = 1e-6f;
  Rng rng(500);
  RMSNorm layer(eps);
  EXPECT_EQ(layer.plan(batch, f), f);
  layer.init(rng);
  randomize_params(layer, rng);
  Tensor x = random_tensor({batch, f}, rng, -2.0f, 2.0f);

  const Tensor& y = layer.forward(x, kTrain);
  ASSERT_EQ(layer.params().size(), 1u);
  const Tensor& g = layer.params()[0]->value;
  for (int64_t r = 0; r < batch; ++r) {
    double ms = 0.0;
    for (int64_t c = 0; c < f; ++c) ms += static_cast<double>(x.at(r, c)) * x.at(r, c);
    ms /= f;
    for (int64_t c = 0; c < f; ++c) {
      ASSERT_NEAR(y.at(r, c), x.at(r, c) / std::sqrt(ms + eps) * g[c], 1e-5) << r << "," << c;
    }
  }
  gradcheck_layer(layer, x, kTrain, 501, 2e-3);
}

// ---------------------------------------------------------------- BatchNorm

namespace {

Tensor* buffer(Layer& layer, const std::string& name) {
  for (auto& [n, t] : layer.buffers()) {
    if (n == name) return t;
  }
  ADD_FAILURE() << "no buffer " << name;
  return nullptr;
}

}  // namespace

TEST(BatchNormLayer, TrainForwardAndFiniteDifferences) {
  const int64_t batch = 6, f = 5;
  const float eps = 1e-5f;
  Rng rng(600);
  BatchNorm layer(0.1f, eps);
  EXPECT_EQ(layer.plan(batch, f), f);
  layer.init(rng);
  randomize_params(layer, rng);
  Tensor x = random_tensor({batch, f}, rng, -2.0f, 2.0f);

  const Tensor& y = layer.forward(x, kTrain);
  const Tensor& g = layer.params()[0]->value;
  const Tensor& b = layer.params()[1]->value;
  for (int64_t c = 0; c < f; ++c) {
    double mean = 0.0, var = 0.0;
    for (int64_t r = 0; r < batch; ++r) mean += x.at(r, c);
    mean /= batch;
    for (int64_t r = 0; r < batch; ++r) var += (x.at(r, c) - mean) * (x.at(r, c) - mean);
    var /= batch;  // biased, as PyTorch normalises
    for (int64_t r = 0; r < batch; ++r) {
      const double expected = (x.at(r, c) - mean) / std::sqrt(var + eps) * g[c] + b[c];
      ASSERT_NEAR(y.at(r, c), expected, 1e-5) << r << "," << c;
    }
  }
  gradcheck_layer(layer, x, kTrain, 601, 2e-3);
}

TEST(BatchNormLayer, EvalUsesRunningStatistics) {
  const int64_t batch = 5, f = 6;
  const float eps = 1e-5f;
  Rng rng(700);
  BatchNorm layer(0.1f, eps);
  layer.plan(batch, f);
  randomize_params(layer, rng);
  Tensor* rm = buffer(layer, "running_mean");
  Tensor* rv = buffer(layer, "running_var");
  ASSERT_NE(rm, nullptr);
  ASSERT_NE(rv, nullptr);
  fill_uniform(*rm, rng, -0.5f, 0.5f);
  fill_uniform(*rv, rng, 0.5f, 2.0f);
  const Tensor rm0 = *rm, rv0 = *rv;

  Tensor x = random_tensor({batch, f}, rng, -2.0f, 2.0f);
  const Tensor& y = layer.forward(x, kEval);
  const Tensor& g = layer.params()[0]->value;
  const Tensor& b = layer.params()[1]->value;
  for (int64_t r = 0; r < batch; ++r) {
    for (int64_t c = 0; c < f; ++c) {
      const double expected = (x.at(r, c) - rm0[c]) / std::sqrt(rv0[c] + eps) * g[c] + b[c];
      ASSERT_NEAR(y.at(r, c), expected, 1e-5) << r << "," << c;
    }
  }
  for (int64_t c = 0; c < f; ++c) {
    EXPECT_EQ((*rm)[c], rm0[c]) << "evaluation leaves the running mean alone";
    EXPECT_EQ((*rv)[c], rv0[c]) << "evaluation leaves the running variance alone";
  }
  gradcheck_layer(layer, x, kEval, 701, 2e-3);
}

TEST(BatchNormLayer, RunningStatisticsFollowMomentumWithUnbiasedVariance) {
  const int64_t batch = 6, f = 4;
  const double momentum = 0.25;
  Rng rng(800);
  BatchNorm layer(static_cast<float>(momentum));
  layer.plan(batch, f);
  Tensor* rm = buffer(layer, "running_mean");
  Tensor* rv = buffer(layer, "running_var");
  ASSERT_NE(rm, nullptr);
  ASSERT_NE(rv, nullptr);
  std::vector<double> exp_mean(f, 0.0), exp_var(f, 1.0);  // PyTorch's initial values
  for (int64_t c = 0; c < f; ++c) {
    EXPECT_EQ((*rm)[c], 0.0f);
    EXPECT_EQ((*rv)[c], 1.0f);
  }

  for (int step = 0; step < 3; ++step) {
    Tensor x = random_tensor({batch, f}, rng, -1.0f + step, 2.0f + step);
    (void)layer.forward(x, kTrain);
    for (int64_t c = 0; c < f; ++c) {
      double mean = 0.0, ss = 0.0;
      for (int64_t r = 0; r < batch; ++r) mean += x.at(r, c);
      mean /= batch;
      for (int64_t r = 0; r < batch; ++r) ss += (x.at(r, c) - mean) * (x.at(r, c) - mean);
      const double unbiased = ss / (batch - 1);
      exp_mean[c] = (1.0 - momentum) * exp_mean[c] + momentum * mean;
      exp_var[c] = (1.0 - momentum) * exp_var[c] + momentum * unbiased;
      EXPECT_NEAR((*rm)[c], exp_mean[c], 1e-5) << "step " << step << " feature " << c;
      EXPECT_NEAR((*rv)[c], exp_var[c], 1e-5) << "step " << step << " feature " << c;
    }
  }
}

TEST(BatchNormLayer, ShortBatchUsesOnlyItsRows) {
  const int64_t max_batch = 8, rows = 5, f = 5;
  const float eps = 1e-5f;
  Rng rng(900);
  BatchNorm layer(0.1f, eps);
  layer.plan(max_batch, f);
  randomize_params(layer, rng);
  Tensor x = random_tensor({max_batch, f}, rng, -2.0f, 2.0f);
  for (int64_t r = rows; r < max_batch; ++r) {
    for (int64_t c = 0; c < f; ++c) x.at(r, c) = 1e4f;  // must not leak into the statistics
  }
  x.set_rows(rows);
  const Tensor& y = layer.forward(x, kTrain);
  ASSERT_EQ(y.rows(), rows);
  const Tensor& g = layer.params()[0]->value;
  const Tensor& b = layer.params()[1]->value;
  for (int64_t c = 0; c < f; ++c) {
    double mean = 0.0, var = 0.0;
    for (int64_t r = 0; r < rows; ++r) mean += x.at(r, c);
    mean /= rows;
    for (int64_t r = 0; r < rows; ++r) var += (x.at(r, c) - mean) * (x.at(r, c) - mean);
    var /= rows;
    for (int64_t r = 0; r < rows; ++r) {
      const double expected = (x.at(r, c) - mean) / std::sqrt(var + eps) * g[c] + b[c];
      ASSERT_NEAR(y.at(r, c), expected, 1e-5) << r << "," << c;
    }
  }
  gradcheck_layer(layer, x, kTrain, 901, 2e-3);
}

// ---------------------------------------------------------------- losses

TEST(Losses, SoftmaxCrossEntropyGradient) {
  const int64_t rows = 5, classes = 6;
  Rng rng(1000);
  baton::SoftmaxCrossEntropy loss;
  EXPECT_TRUE(loss.is_classification());
  Tensor out = random_tensor({rows, classes}, rng, -2.0f, 2.0f);
  std::vector<int32_t> labels(rows);
  for (auto& l : labels) l = static_cast<int32_t>(rng.below(classes));
  Tensor dout({rows, classes});
  const float scale = 1.0f / static_cast<float>(rows);
  const baton::LossResult res = loss.compute(out, labels.data(), nullptr, dout, scale);
  EXPECT_EQ(res.count, rows);

  // Naive loss and accuracy.
  double ref = 0.0;
  int64_t correct = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    int64_t arg = 0;
    for (int64_t c = 0; c < classes; ++c) {
      sum += std::exp(static_cast<double>(out.at(r, c)));
      if (out.at(r, c) > out.at(r, arg)) arg = c;
    }
    ref += std::log(sum) - out.at(r, labels[r]);
    correct += arg == labels[r];
  }
  EXPECT_NEAR(res.loss_sum, ref, 1e-5);
  EXPECT_EQ(res.correct, correct);

  // d(mean loss)/d(output) against finite differences.
  Tensor scratch({rows, classes});
  auto mean_loss = [&] {
    return loss.compute(out, labels.data(), nullptr, scratch, scale).loss_sum /
           static_cast<double>(rows);
  };
  const double largest = check_tensor_gradient("doutput", out, dout, 1e-2, mean_loss);
  EXPECT_GT(largest, 1e-3);
}

TEST(Losses, MeanSquaredErrorGradient) {
  const int64_t rows = 4, k = 3;
  Rng rng(1100);
  baton::MeanSquaredError loss;
  EXPECT_FALSE(loss.is_classification());
  Tensor out = random_tensor({rows, k}, rng, -2.0f, 2.0f);
  Tensor target = random_tensor({rows, k}, rng, -2.0f, 2.0f);
  Tensor dout({rows, k});
  const float scale = 1.0f / static_cast<float>(rows);
  const baton::LossResult res = loss.compute(out, nullptr, &target, dout, scale);
  EXPECT_EQ(res.count, rows);

  // Mean over outputs per row, summed over rows.
  double ref = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    double row = 0.0;
    for (int64_t c = 0; c < k; ++c) {
      const double d = static_cast<double>(out.at(r, c)) - target.at(r, c);
      row += d * d;
    }
    ref += row / k;
  }
  EXPECT_NEAR(res.loss_sum, ref, 1e-5);

  Tensor scratch({rows, k});
  auto mean_loss = [&] {
    return loss.compute(out, nullptr, &target, scratch, scale).loss_sum / static_cast<double>(rows);
  };
  const double largest = check_tensor_gradient("doutput", out, dout, 1e-2, mean_loss);
  EXPECT_GT(largest, 1e-3);

  Tensor wrong({rows, k + 1});
  EXPECT_THROW(loss.compute(out, nullptr, &wrong, dout, scale), baton::InputError);
  EXPECT_THROW(loss.compute(out, nullptr, nullptr, dout, scale), baton::InputError);
}

TEST(Losses, MakeLoss) {
  EXPECT_EQ(baton::make_loss("mse")->name(), "mse");
  EXPECT_EQ(baton::make_loss("softmax_cross_entropy")->name(), "softmax_cross_entropy");
  EXPECT_THROW(baton::make_loss("hinge"), baton::InputError);
}

// ---------------------------------------------------------------- whole model

TEST(SequentialModel, LinearReluLayerNormLinearWithCrossEntropy) {
  const int64_t batch = 5, in = 6, hidden = 7, classes = 4;
  Rng rng(1200);
  baton::Sequential model;
  model.add(std::make_unique<Linear>(in, hidden, Activation::kRelu));
  model.add(std::make_unique<LayerNorm>());
  model.add(std::make_unique<Linear>(hidden, classes));
  EXPECT_EQ(model.plan(batch, in), classes);
  EXPECT_EQ(model.in_features(), in);
  EXPECT_EQ(model.out_features(), classes);
  model.init(rng);
  for (Param* p : model.params()) {
    if (p->name != "weight") {
      fill_uniform(p->value, rng, p->name == "gain" ? 0.5f : -0.3f,
                   p->name == "gain" ? 1.5f : 0.3f);
    }
  }
  const auto params = model.params();
  ASSERT_EQ(params.size(), 6u);  // W1 b1 gain bias W2 b2
  EXPECT_EQ(model.num_parameters(), in * hidden + hidden + 2 * hidden + hidden * classes + classes);
  EXPECT_EQ(model.describe(), "Linear(6 -> 7, relu) -> LayerNorm -> Linear(7 -> 4)");

  // Inputs with every first-layer pre-activation clear of the ReLU kink.
  auto& first = static_cast<Linear&>(model.layer(0));
  Tensor x;
  for (int attempt = 0;; ++attempt) {
    ASSERT_LT(attempt, 1000);
    x = random_tensor({batch, in}, rng);
    const auto pre = linear_pre(first, x, true);
    if (std::all_of(pre.begin(), pre.end(), [](double v) { return std::abs(v) > 0.03; })) break;
  }
  std::vector<int32_t> labels(batch);
  for (auto& l : labels) l = static_cast<int32_t>(rng.below(classes));

  baton::SoftmaxCrossEntropy loss;
  const float scale = 1.0f / static_cast<float>(batch);
  Tensor dout({batch, classes});
  const Tensor& out = model.forward(x, kTrain);
  (void)loss.compute(out, labels.data(), nullptr, dout, scale);
  std::vector<size_t> done;
  model.backward(dout, [&](size_t i) { done.push_back(i); });
  EXPECT_EQ(done, (std::vector<size_t>{2, 1, 0})) << "layers finish last first";
  std::vector<Tensor> grads;
  for (Param* p : params) grads.push_back(p->grad);

  Tensor scratch({batch, classes});
  auto mean_loss = [&] {
    const Tensor& o = model.forward(x, kTrain);
    return loss.compute(o, labels.data(), nullptr, scratch, scale).loss_sum /
           static_cast<double>(batch);
  };
  for (size_t k = 0; k < params.size(); ++k) {
    const double largest =
        check_tensor_gradient("param " + std::to_string(k) + " " + params[k]->name,
                              params[k]->value, grads[k], 1e-3, mean_loss);
    EXPECT_GT(largest, 1e-4) << "param " << k;
  }
}
