// Layers: forward against naive reference loops, and every analytic
// gradient (input and parameters) against central finite differences of a
// scalar objective. Linear, activations, Dropout, LayerNorm, RMSNorm.
#include "gradcheck_util.h"

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
                                                          Activation::kTanh, Activation::kGelu,
                                                          Activation::kGeluTanh),
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
                         testing::Values(Activation::kRelu, Activation::kGelu, Activation::kTanh,
                                         Activation::kGeluTanh),
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

// Linear reports its parameter gradients final before its input-gradient
// product, so their allreduce need not wait for it: at the hook, dW is the
// new one and dx still the previous call's.
TEST(Linear, ParamsAreReportedFinalBeforeTheInputGradient) {
  baton::Sequential model;
  model.add(std::make_unique<Linear>(3, 2, Activation::kNone, true));
  model.add(std::make_unique<Linear>(2, 2, Activation::kNone, true));
  model.plan(4, 3);
  Rng rng(5);
  model.init(rng);
  Tensor x = random_tensor({4, 3}, rng);
  Tensor dy1 = random_tensor({4, 2}, rng), dy2 = random_tensor({4, 2}, rng);
  auto& second = dynamic_cast<Linear&>(model.layer(1));
  model.forward(x, kTrain);
  model.backward(dy1);
  const Tensor& dx = second.backward(dy1, true);  // the layer's own dx buffer
  const std::vector<float> dx_before(dx.data(), dx.data() + dx.numel());
  std::vector<size_t> order;
  std::vector<float> dx_at_hook, dw_at_hook;
  model.forward(x, kTrain);
  model.backward(dy2, [&](size_t layer) {
    order.push_back(layer);
    if (layer != 1) return;
    dx_at_hook.assign(dx.data(), dx.data() + dx.numel());
    const Tensor& dw = second.weight().grad;
    dw_at_hook.assign(dw.data(), dw.data() + dw.numel());
  });
  EXPECT_EQ(order, (std::vector<size_t>{1, 0}));
  EXPECT_EQ(dx_at_hook, dx_before) << "dx was computed before the hook";
  const Tensor& dw_after = second.weight().grad;
  EXPECT_EQ(dw_at_hook, std::vector<float>(dw_after.data(), dw_after.data() + dw_after.numel()))
      << "dW changed after the hook: it was not final";
  EXPECT_NE(std::vector<float>(dx.data(), dx.data() + dx.numel()), dx_before);
}
