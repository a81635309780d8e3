// BatchNorm, the losses and a whole Sequential model: forward against naive
// references, and every analytic gradient against central finite
// differences of a scalar objective.
#include "gradcheck_util.h"

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

// A ReLU after a BatchNorm is computed in the BatchNorm's own passes
// (Layer::fuse_next): the pair gives the bits of a BatchNorm followed by a
// separate ReLU, forward and backward, in training and evaluation, for
// narrow and wide rows.
TEST(BatchNormLayer, AFusedReluGivesTheSameBitsAsASeparateOne) {
  for (const int64_t f : {5, 16, 300}) {
    for (const ForwardContext& ctx : {kTrain, kEval}) {
      const int64_t batch = 700;
      Rng rng(static_cast<uint64_t>(900 + f));
      BatchNorm fused, alone;
      baton::ActivationLayer relu(Activation::kRelu);
      ASSERT_TRUE(fused.fuse_next(relu));
      EXPECT_EQ(fused.describe(), "BatchNorm + ReLU");
      EXPECT_EQ(relu.describe(), "relu (in the layer before)");
      baton::ActivationLayer tanh(Activation::kTanh);
      EXPECT_FALSE(alone.fuse_next(tanh)) << "only a ReLU is fused";
      fused.plan(batch, f);
      relu.plan(batch, f);
      alone.plan(batch, f);
      randomize_params(fused, rng);
      for (size_t k = 0; k < 2; ++k) alone.params()[k]->value = fused.params()[k]->value;
      const Tensor x = random_tensor({batch, f}, rng, -2.0f, 2.0f);
      const Tensor dy = random_tensor({batch, f}, rng);

      const Tensor& y = relu.forward(fused.forward(x, ctx), ctx);
      Tensor want = alone.forward(x, ctx);
      Tensor dy_masked = dy;
      int64_t zeroed = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        if (!(want[i] > 0.0f)) {
          want[i] = 0.0f;
          dy_masked[i] = 0.0f;
          ++zeroed;
        }
      }
      ASSERT_GT(zeroed, 0);
      ASSERT_LT(zeroed, want.numel());
      ASSERT_EQ(y.numel(), want.numel());
      for (int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(y[i], want[i]) << f << " at " << i;

      const Tensor& dx = fused.backward(relu.backward(dy, true), true);
      const Tensor& dx_want = alone.backward(dy_masked, true);
      for (int64_t i = 0; i < dx.numel(); ++i) ASSERT_EQ(dx[i], dx_want[i]) << f << " at " << i;
      for (size_t k = 0; k < 2; ++k) {
        EXPECT_EQ(fused.params()[k]->grad.span().size(), alone.params()[k]->grad.span().size());
        for (int64_t c = 0; c < f; ++c) {
          ASSERT_EQ(fused.params()[k]->grad[c], alone.params()[k]->grad[c]) << f << " param " << k;
        }
      }
    }
  }
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
  const baton::LossResult res =
      loss.compute(out, labels.data(), nullptr, dout, scale, baton::cpu_backend());
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
    return loss.compute(out, labels.data(), nullptr, scratch, scale, baton::cpu_backend())
               .loss_sum /
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
  const baton::LossResult res =
      loss.compute(out, nullptr, &target, dout, scale, baton::cpu_backend());
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
    return loss.compute(out, nullptr, &target, scratch, scale, baton::cpu_backend()).loss_sum /
           static_cast<double>(rows);
  };
  const double largest = check_tensor_gradient("doutput", out, dout, 1e-2, mean_loss);
  EXPECT_GT(largest, 1e-3);

  Tensor wrong({rows, k + 1});
  EXPECT_THROW(loss.compute(out, nullptr, &wrong, dout, scale, baton::cpu_backend()),
               baton::InputError);
  EXPECT_THROW(loss.compute(out, nullptr, nullptr, dout, scale, baton::cpu_backend()),
               baton::InputError);
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
  (void)loss.compute(out, labels.data(), nullptr, dout, scale, baton::cpu_backend());
  std::vector<size_t> done;
  model.backward(dout, [&](size_t i) { done.push_back(i); });
  EXPECT_EQ(done, (std::vector<size_t>{2, 1, 0})) << "layers finish last first";
  std::vector<Tensor> grads;
  for (Param* p : params) grads.push_back(p->grad);

  Tensor scratch({batch, classes});
  auto mean_loss = [&] {
    const Tensor& o = model.forward(x, kTrain);
    return loss.compute(o, labels.data(), nullptr, scratch, scale, baton::cpu_backend()).loss_sum /
           static_cast<double>(batch);
  };
  for (size_t k = 0; k < params.size(); ++k) {
    const double largest =
        check_tensor_gradient("param " + std::to_string(k) + " " + params[k]->name,
                              params[k]->value, grads[k], 1e-3, mean_loss);
    EXPECT_GT(largest, 1e-4) << "param " << k;
  }
}
