// Optimizers against PyTorch's update rules written out in double, global
// norm clipping, learning-rate schedules from their formulas, and the
// strict parsing of the "optimizer" and "schedule" config objects.
#include <baton/core/config.h>
#include <baton/core/error.h>
#include <baton/nn/layers.h>
#include <baton/optim/optimizer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "input_error_util.h"

using baton_test::input_error;

using baton::ConfigNode;
using baton::Optimizer;
using baton::OptimizerKind;
using baton::OptimizerOptions;
using baton::Param;
using baton::ScheduleKind;
using baton::ScheduleOptions;
using baton::Tensor;

namespace {

constexpr double kPi = 3.14159265358979323846;

Param make_param(const std::vector<float>& values) {
  Param p;
  p.name = "w";
  p.value = Tensor({static_cast<int64_t>(values.size())});
  p.grad = Tensor({static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) p.value[static_cast<int64_t>(i)] = values[i];
  return p;
}

void set_grad(Param& p, const std::vector<float>& g) {
  for (size_t i = 0; i < g.size(); ++i) p.grad[static_cast<int64_t>(i)] = g[i];
}

// Gradients for step t (1-based) of element i: varied signs and sizes.
float grad_at(int t, size_t i) {
  const float base[] = {0.5f, -1.25f, 2.0f, -0.03f};
  return base[i % 4] * (1.0f + 0.3f * static_cast<float>(t)) * (t % 2 == 0 ? -1.0f : 1.0f);
}

// torch.optim.SGD, dampening 0, one element.
struct SgdRef {
  double lr, momentum, wd;
  bool nesterov;
  double buf = 0.0;
  bool has_buf = false;
  void step(double& p, double g) {
    double d = g + wd * p;
    if (momentum != 0.0) {
      buf = has_buf ? momentum * buf + d : d;
      has_buf = true;
      d = nesterov ? d + momentum * buf : buf;
    }
    p -= lr * d;
  }
};

// torch.optim.Adam (L2 in the gradient) and torch.optim.AdamW (decoupled).
struct AdamRef {
  double lr, b1, b2, eps, wd;
  bool decoupled;
  double m = 0.0, v = 0.0;
  int t = 0;
  void step(double& p, double g) {
    ++t;
    if (decoupled) {
      p *= 1.0 - lr * wd;
    } else {
      g += wd * p;
    }
    m = b1 * m + (1.0 - b1) * g;
    v = b2 * v + (1.0 - b2) * g * g;
    const double mhat = m / (1.0 - std::pow(b1, t));
    const double vhat = v / (1.0 - std::pow(b2, t));
    p -= lr * mhat / (std::sqrt(vhat) + eps);
  }
};

void expect_params_near(const Param& p, const std::vector<double>& expected, double rel,
                        const std::string& what) {
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(p.value[static_cast<int64_t>(i)], expected[i], 1e-6 + rel * std::abs(expected[i]))
        << what << " element " << i;
  }
}

}  // namespace

// ---------------------------------------------------------------- SGD

TEST(Sgd, OnePlainStepIsPMinusLrG) {
  Param p = make_param({1.0f, -2.0f, 0.5f});
  set_grad(p, {0.1f, -0.4f, 2.0f});
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  o.lr = 0.5f;
  Optimizer opt(o, {&p});
  EXPECT_TRUE(opt.state().empty()) << "plain SGD keeps no state";
  opt.step(0.5f);
  EXPECT_EQ(opt.steps_taken(), 1);
  // 1 - 0.5*0.1, -2 - 0.5*(-0.4), 0.5 - 0.5*2
  EXPECT_FLOAT_EQ(p.value[0], 0.95f);
  EXPECT_FLOAT_EQ(p.value[1], -1.8f);
  EXPECT_FLOAT_EQ(p.value[2], -0.5f);
}

TEST(Sgd, MomentumByHand) {
  // Two steps with momentum 0.9, lr 0.1, g = 1 then g = 1:
  //   b1 = 1, p1 = 1 - 0.1 = 0.9; b2 = 0.9 + 1 = 1.9, p2 = 0.9 - 0.19 = 0.71.
  Param p = make_param({1.0f});
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  o.momentum = 0.9f;
  Optimizer opt(o, {&p});
  ASSERT_EQ(opt.state().size(), 1u);
  set_grad(p, {1.0f});
  opt.step(0.1f);
  EXPECT_NEAR(p.value[0], 0.9, 1e-6);
  opt.step(0.1f);
  EXPECT_NEAR(p.value[0], 0.71, 1e-6);
  EXPECT_NEAR((*opt.state()[0].second)[0], 1.9, 1e-6) << "momentum buffer";
}

TEST(Sgd, NesterovByHand) {
  // Nesterov, momentum 0.9, lr 0.1, g = 1 twice:
  //   b1 = 1, step = 1 + 0.9*1 = 1.9, p1 = 1 - 0.19 = 0.81;
  //   b2 = 1.9, step = 1 + 0.9*1.9 = 2.71, p2 = 0.81 - 0.271 = 0.539.
  Param p = make_param({1.0f});
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  o.momentum = 0.9f;
  o.nesterov = true;
  Optimizer opt(o, {&p});
  set_grad(p, {1.0f});
  opt.step(0.1f);
  EXPECT_NEAR(p.value[0], 0.81, 1e-6);
  opt.step(0.1f);
  EXPECT_NEAR(p.value[0], 0.539, 1e-6);
}

TEST(Sgd, WeightDecayByHand) {
  // g' = g + wd p = 0 + 0.1 * 2 = 0.2; p1 = 2 - 0.5 * 0.2 = 1.9.
  Param p = make_param({2.0f});
  set_grad(p, {0.0f});
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  o.weight_decay = 0.1f;
  Optimizer opt(o, {&p});
  opt.step(0.5f);
  EXPECT_NEAR(p.value[0], 1.9, 1e-6);
  opt.step(0.5f);
  EXPECT_NEAR(p.value[0], 1.9 - 0.5 * 0.19, 1e-6);
}

// Weight decay reaches the weights only: a parameter marked as not decayed
// (a bias, a norm's gain or shift) keeps its value under a zero gradient,
// with SGD's L2 and AdamW's decoupled decay alike.
TEST(WeightDecay, SkipsParametersMarkedNotDecayed) {
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdamW}) {
    Param w = make_param({2.0f});
    Param b = make_param({2.0f});
    b.weight_decay = false;
    set_grad(w, {0.0f});
    set_grad(b, {0.0f});
    OptimizerOptions o;
    o.kind = kind;
    o.weight_decay = 0.1f;
    Optimizer opt(o, {&w, &b});
    opt.step(0.5f);
    EXPECT_LT(w.value[0], 2.0f) << static_cast<int>(kind);
    EXPECT_EQ(b.value[0], 2.0f) << static_cast<int>(kind);
  }
}

TEST(Sgd, SeveralStepsAllVariantsMatchPyTorchFormulas) {
  struct V {
    float momentum, wd;
    bool nesterov;
  };
  for (V var : {V{0.0f, 0.0f, false}, V{0.0f, 0.01f, false}, V{0.9f, 0.0f, false},
                V{0.5f, 0.05f, false}, V{0.9f, 0.0f, true}, V{0.8f, 0.02f, true}}) {
    SCOPED_TRACE(testing::Message() << "momentum " << var.momentum << " wd " << var.wd
                                    << " nesterov " << var.nesterov);
    const std::vector<float> init = {1.0f, -0.5f, 0.25f, 3.0f};
    Param p = make_param(init);
    OptimizerOptions o;
    o.kind = OptimizerKind::kSgd;
    o.momentum = var.momentum;
    o.weight_decay = var.wd;
    o.nesterov = var.nesterov;
    Optimizer opt(o, {&p});
    std::vector<double> ref(init.begin(), init.end());
    std::vector<SgdRef> refs(init.size(), SgdRef{0.0, var.momentum, var.wd, var.nesterov});
    for (int t = 1; t <= 6; ++t) {
      const double lr = 0.05 * t;  // a changing learning rate, as a schedule gives
      std::vector<float> g(init.size());
      for (size_t i = 0; i < g.size(); ++i) g[i] = grad_at(t, i);
      set_grad(p, g);
      opt.step(static_cast<float>(lr));
      for (size_t i = 0; i < g.size(); ++i) {
        refs[i].lr = lr;
        refs[i].step(ref[i], g[i]);
      }
      expect_params_near(p, ref, 1e-5, "step " + std::to_string(t));
    }
    EXPECT_EQ(opt.steps_taken(), 6);
  }
}

// ---------------------------------------------------------------- Adam / AdamW

TEST(Adam, FirstStepMovesByLrTimesSign) {
  // After one step mhat = g and vhat = g^2, so p -= lr * g / (|g| + eps).
  Param p = make_param({1.0f, 1.0f, 1.0f});
  set_grad(p, {0.3f, -5.0f, 1e-3f});
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdam;
  Optimizer opt(o, {&p});
  EXPECT_EQ(opt.state().size(), 2u) << "m and v";
  opt.step(0.01f);
  EXPECT_NEAR(p.value[0], 1.0 - 0.01, 1e-6);
  EXPECT_NEAR(p.value[1], 1.0 + 0.01, 1e-6);
  EXPECT_NEAR(p.value[2], 1.0 - 0.01 * 1e-3 / (1e-3 + 1e-8), 1e-6);
}

TEST(Adam, SeveralStepsMatchPyTorchFormulas) {
  for (float wd : {0.0f, 0.1f}) {
    SCOPED_TRACE(wd);
    const std::vector<float> init = {0.5f, -1.0f, 2.0f, 0.0f};
    Param p = make_param(init);
    OptimizerOptions o;
    o.kind = OptimizerKind::kAdam;
    o.beta1 = 0.8f;
    o.beta2 = 0.95f;
    o.eps = 1e-6f;
    o.weight_decay = wd;
    Optimizer opt(o, {&p});
    std::vector<double> ref(init.begin(), init.end());
    std::vector<AdamRef> refs(init.size(), AdamRef{0.0, 0.8, 0.95, 1e-6, wd, false});
    for (int t = 1; t <= 8; ++t) {
      const double lr = 0.02;
      std::vector<float> g(init.size());
      for (size_t i = 0; i < g.size(); ++i) g[i] = grad_at(t, i);
      set_grad(p, g);
      opt.step(static_cast<float>(lr));
      for (size_t i = 0; i < g.size(); ++i) {
        refs[i].lr = lr;
        refs[i].step(ref[i], g[i]);
      }
      expect_params_near(p, ref, 1e-5, "step " + std::to_string(t));
    }
  }
}

TEST(AdamW, DecoupledDecayByHand) {
  // With g = 0 the moments stay 0, so only the decay acts: p *= 1 - lr wd.
  Param p = make_param({2.0f});
  set_grad(p, {0.0f});
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdamW;
  o.weight_decay = 0.1f;
  Optimizer opt(o, {&p});
  opt.step(0.5f);
  EXPECT_NEAR(p.value[0], 2.0 * (1.0 - 0.05), 1e-6);
  opt.step(0.5f);
  EXPECT_NEAR(p.value[0], 2.0 * 0.95 * 0.95, 1e-6);

  // Adam with the same weight decay puts it in the gradient instead: after
  // one step p moves by lr * sign(wd p), not by lr wd p.
  Param q = make_param({2.0f});
  set_grad(q, {0.0f});
  o.kind = OptimizerKind::kAdam;
  Optimizer adam(o, {&q});
  adam.step(0.5f);
  EXPECT_NEAR(q.value[0], 2.0 - 0.5 * 0.2 / (0.2 + 1e-8), 1e-6);
}

TEST(AdamW, SeveralStepsMatchPyTorchFormulas) {
  const std::vector<float> init = {0.5f, -1.0f, 2.0f, 0.1f};
  Param p = make_param(init);
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdamW;
  o.weight_decay = 0.05f;
  Optimizer opt(o, {&p});
  std::vector<double> ref(init.begin(), init.end());
  std::vector<AdamRef> refs(init.size(), AdamRef{0.0, 0.9, 0.999, 1e-8, 0.05, true});
  for (int t = 1; t <= 8; ++t) {
    const double lr = 0.01 / t;
    std::vector<float> g(init.size());
    for (size_t i = 0; i < g.size(); ++i) g[i] = grad_at(t, i);
    set_grad(p, g);
    opt.step(static_cast<float>(lr));
    for (size_t i = 0; i < g.size(); ++i) {
      refs[i].lr = lr;
      refs[i].step(ref[i], g[i]);
    }
    expect_params_near(p, ref, 1e-5, "step " + std::to_string(t));
  }
  EXPECT_EQ(opt.steps_taken(), 8);
}

TEST(Optimizer, UpdatesEveryParam) {
  Param a = make_param({1.0f, 2.0f});
  Param b = make_param({-1.0f});
  set_grad(a, {1.0f, 1.0f});
  set_grad(b, {-2.0f});
  OptimizerOptions o;
  o.kind = OptimizerKind::kSgd;
  Optimizer opt(o, {&a, &b});
  opt.step(0.25f);
  EXPECT_FLOAT_EQ(a.value[0], 0.75f);
  EXPECT_FLOAT_EQ(a.value[1], 1.75f);
  EXPECT_FLOAT_EQ(b.value[0], -0.5f);
}

// ---------------------------------------------------------------- clipping

TEST(ClipGlobalNorm, ScalesToMaxNormAndReturnsTheNorm) {
  Param a = make_param({0.0f, 0.0f});
  Param b = make_param({0.0f});
  set_grad(a, {3.0f, 4.0f});
  set_grad(b, {12.0f});  // global norm sqrt(9 + 16 + 144) = 13
  const double norm = baton::clip_global_norm({&a, &b}, 6.5f);
  EXPECT_NEAR(norm, 13.0, 1e-9);
  EXPECT_NEAR(a.grad[0], 1.5, 1e-5);
  EXPECT_NEAR(a.grad[1], 2.0, 1e-5);
  EXPECT_NEAR(b.grad[0], 6.0, 1e-5);
  const double after = std::sqrt(static_cast<double>(a.grad[0]) * a.grad[0] +
                                 static_cast<double>(a.grad[1]) * a.grad[1] +
                                 static_cast<double>(b.grad[0]) * b.grad[0]);
  EXPECT_NEAR(after, 6.5, 1e-5);
  EXPECT_LE(after, 6.5 + 1e-6);
}

TEST(ClipGlobalNorm, UntouchedBelowTheLimitOrWhenDisabled) {
  Param a = make_param({0.0f, 0.0f});
  set_grad(a, {3.0f, 4.0f});
  EXPECT_NEAR(baton::clip_global_norm({&a}, 10.0f), 5.0, 1e-9);
  EXPECT_EQ(a.grad[0], 3.0f);
  EXPECT_EQ(a.grad[1], 4.0f);
  EXPECT_NEAR(baton::clip_global_norm({&a}, 0.0f), 5.0, 1e-9) << "0 disables clipping";
  EXPECT_EQ(a.grad[0], 3.0f);
  EXPECT_EQ(a.grad[1], 4.0f);
  EXPECT_EQ(baton::clip_global_norm({}, 1.0f), 0.0);
}

// ---------------------------------------------------------------- schedules

TEST(Schedule, Constant) {
  ScheduleOptions s;
  s.kind = ScheduleKind::kConstant;
  for (int64_t step : {0, 1, 50, 999})
    EXPECT_FLOAT_EQ(baton::scheduled_lr(s, 0.3f, step, 1000), 0.3f);
  // With a warm-up: linear ramp of base/W per step up to the base rate.
  s.warmup_steps = 4;
  for (int64_t step = 0; step < 4; ++step) {
    EXPECT_FLOAT_EQ(baton::scheduled_lr(s, 0.4f, step, 100), 0.1f * static_cast<float>(step + 1));
  }
  EXPECT_FLOAT_EQ(baton::scheduled_lr(s, 0.4f, 4, 100), 0.4f);
  EXPECT_FLOAT_EQ(baton::scheduled_lr(s, 0.4f, 99, 100), 0.4f);
}

TEST(Schedule, StepMultipliesByGammaEveryStepSize) {
  ScheduleOptions s;
  s.kind = ScheduleKind::kStep;
  s.step_size = 10;
  s.gamma = 0.5f;
  const float base = 0.8f;
  for (int64_t step = 0; step < 45; ++step) {
    const double expected = base * std::pow(0.5, static_cast<double>(step / 10));
    EXPECT_NEAR(baton::scheduled_lr(s, base, step, 100), expected, 1e-7) << step;
  }
  EXPECT_FLOAT_EQ(baton::scheduled_lr(s, base, 9, 100), 0.8f);
  EXPECT_FLOAT_EQ(baton::scheduled_lr(s, base, 10, 100), 0.4f);
  EXPECT_FLOAT_EQ(baton::scheduled_lr(s, base, 20, 100), 0.2f);

  // A warm-up shifts the staircase: decay counts from the end of warm-up.
  s.warmup_steps = 5;
  EXPECT_FLOAT_EQ(baton::scheduled_lr(s, base, 0, 100), base / 5.0f);
  EXPECT_FLOAT_EQ(baton::scheduled_lr(s, base, 14, 100), base);
  EXPECT_FLOAT_EQ(baton::scheduled_lr(s, base, 15, 100), base * 0.5f);
}

TEST(Schedule, CosineWithLinearWarmup) {
  ScheduleOptions s;
  s.kind = ScheduleKind::kCosine;
  s.warmup_steps = 10;
  s.min_lr = 1e-4f;
  const float base = 1e-2f;
  const int64_t total = 110;  // 100 cosine steps after the warm-up
  auto lr = [&](int64_t step) {
    return static_cast<double>(baton::scheduled_lr(s, base, step, total));
  };
  auto cosine = [&](int64_t step) {
    const double progress = std::min(1.0, static_cast<double>(step - 10) / 100.0);
    return 1e-4 + (1e-2 - 1e-4) * 0.5 * (1.0 + std::cos(kPi * progress));
  };

  EXPECT_NEAR(lr(0), base / 10.0, 1e-8) << "the first warm-up step";
  for (int64_t step = 1; step < 10; ++step) {
    EXPECT_NEAR(lr(step) - lr(step - 1), base / 10.0, 1e-8) << "linear warm-up at " << step;
  }
  EXPECT_NEAR(lr(9), base, 1e-8) << "the end of warm-up reaches the base rate";
  EXPECT_NEAR(lr(10), base, 1e-8) << "the cosine starts at the base rate";
  EXPECT_NEAR(lr(60), (1e-2 + 1e-4) / 2.0, 1e-8) << "halfway: the mean of base and min";
  EXPECT_NEAR(lr(total), 1e-4, 1e-8) << "the end is min_lr";
  EXPECT_NEAR(lr(total + 50), 1e-4, 1e-8) << "past the end it stays at min_lr";
  for (int64_t step = 10; step <= total; ++step) {
    EXPECT_NEAR(lr(step), cosine(step), 1e-8) << step;
    if (step > 10) {
      EXPECT_LE(lr(step), lr(step - 1) + 1e-9) << "non-increasing after warm-up";
    }
  }

  // No warm-up, min_lr 0: 0.5 (1 + cos(pi t / T)) * base.
  ScheduleOptions plain;
  plain.kind = ScheduleKind::kCosine;
  EXPECT_NEAR(baton::scheduled_lr(plain, 1.0f, 0, 40), 1.0, 1e-7);
  EXPECT_NEAR(baton::scheduled_lr(plain, 1.0f, 10, 40), 0.5 * (1.0 + std::cos(kPi / 4.0)), 1e-6);
  EXPECT_NEAR(baton::scheduled_lr(plain, 1.0f, 20, 40), 0.5, 1e-6);
  EXPECT_NEAR(baton::scheduled_lr(plain, 1.0f, 40, 40), 0.0, 1e-7);
}

// ---------------------------------------------------------------- parsing

TEST(ParseOptimizer, Defaults) {
  const OptimizerOptions adam =
      baton::parse_optimizer(ConfigNode(nlohmann::json::object(), "run.json", "optimizer"));
  EXPECT_EQ(adam.kind, OptimizerKind::kAdam);
  EXPECT_FLOAT_EQ(adam.lr, 1e-3f);
  EXPECT_FLOAT_EQ(adam.beta1, 0.9f);
  EXPECT_FLOAT_EQ(adam.beta2, 0.999f);
  EXPECT_FLOAT_EQ(adam.eps, 1e-8f);
  EXPECT_EQ(adam.weight_decay, 0.0f);
  EXPECT_EQ(adam.clip_global_norm, 0.0f);

  const OptimizerOptions sgd =
      baton::parse_optimizer(ConfigNode(nlohmann::json{{"type", "sgd"}}, "run.json", "optimizer"));
  EXPECT_EQ(sgd.kind, OptimizerKind::kSgd);
  EXPECT_FLOAT_EQ(sgd.lr, 0.01f);
  EXPECT_EQ(sgd.momentum, 0.0f);
  EXPECT_FALSE(sgd.nesterov);
  EXPECT_EQ(sgd.weight_decay, 0.0f);

  const OptimizerOptions adamw = baton::parse_optimizer(
      ConfigNode(nlohmann::json{{"type", "adamw"}}, "run.json", "optimizer"));
  EXPECT_EQ(adamw.kind, OptimizerKind::kAdamW);
  EXPECT_FLOAT_EQ(adamw.weight_decay, 0.01f);
}

TEST(ParseOptimizer, ExplicitValues) {
  const nlohmann::json j = {{"type", "sgd"},        {"lr", 0.2},
                            {"momentum", 0.8},      {"nesterov", true},
                            {"weight_decay", 1e-4}, {"clip_global_norm", 5}};
  const OptimizerOptions o = baton::parse_optimizer(ConfigNode(j, "run.json", "optimizer"));
  EXPECT_EQ(o.kind, OptimizerKind::kSgd);
  EXPECT_FLOAT_EQ(o.lr, 0.2f);
  EXPECT_FLOAT_EQ(o.momentum, 0.8f);
  EXPECT_TRUE(o.nesterov);
  EXPECT_FLOAT_EQ(o.weight_decay, 1e-4f);
  EXPECT_FLOAT_EQ(o.clip_global_norm, 5.0f);

  const nlohmann::json a = {{"type", "adam"}, {"beta1", 0.5}, {"beta2", 0.9}, {"eps", 1e-6}};
  const OptimizerOptions ao = baton::parse_optimizer(ConfigNode(a, "run.json", "optimizer"));
  EXPECT_FLOAT_EQ(ao.beta1, 0.5f);
  EXPECT_FLOAT_EQ(ao.beta2, 0.9f);
  EXPECT_FLOAT_EQ(ao.eps, 1e-6f);
}

TEST(ParseOptimizer, UnknownKeysNameTheKeyAndFile) {
  {
    const nlohmann::json j = {{"type", "adam"}, {"momentum", 0.9}};
    const std::string msg =
        input_error([&] { baton::parse_optimizer(ConfigNode(j, "my_run.json", "optimizer")); });
    EXPECT_NE(msg.find("my_run.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("optimizer.momentum"), std::string::npos) << msg;
    EXPECT_NE(msg.find("unknown key"), std::string::npos) << msg;
  }
  {
    const nlohmann::json j = {{"lrr", 0.1}};
    const std::string msg =
        input_error([&] { baton::parse_optimizer(ConfigNode(j, "other.json", "optimizer")); });
    EXPECT_NE(msg.find("other.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("lrr"), std::string::npos) << msg;
  }
  {
    // Adam's betas are not SGD keys.
    const nlohmann::json j = {{"type", "sgd"}, {"beta1", 0.9}};
    const std::string msg =
        input_error([&] { baton::parse_optimizer(ConfigNode(j, "run.json", "optimizer")); });
    EXPECT_NE(msg.find("beta1"), std::string::npos) << msg;
  }
}

TEST(ParseOptimizer, BadValues) {
  auto msg_for = [](const nlohmann::json& j) {
    return input_error([&] { baton::parse_optimizer(ConfigNode(j, "run.json", "optimizer")); });
  };
  std::string m = msg_for({{"lr", 0}});
  EXPECT_NE(m.find("optimizer.lr"), std::string::npos) << m;
  m = msg_for({{"lr", -1}});
  EXPECT_NE(m.find("optimizer.lr"), std::string::npos) << m;
  m = msg_for({{"type", "rmsprop"}});
  EXPECT_NE(m.find("optimizer.type"), std::string::npos) << m;
  EXPECT_NE(m.find("adamw"), std::string::npos) << "the message lists the choices: " << m;
  m = msg_for({{"type", "sgd"}, {"nesterov", true}});
  EXPECT_NE(m.find("optimizer.nesterov"), std::string::npos) << m;
  m = msg_for({{"type", "sgd"}, {"momentum", 1.0}});
  EXPECT_NE(m.find("optimizer.momentum"), std::string::npos) << m;
  m = msg_for({{"beta2", "high"}});
  EXPECT_NE(m.find("optimizer.beta2"), std::string::npos) << m;
  m = msg_for({{"weight_decay", -0.1}});
  EXPECT_NE(m.find("optimizer.weight_decay"), std::string::npos) << m;
}

TEST(ParseSchedule, DefaultsAndValues) {
  const ScheduleOptions d =
      baton::parse_schedule(ConfigNode(nlohmann::json::object(), "run.json", "schedule"));
  EXPECT_EQ(d.kind, ScheduleKind::kConstant);
  EXPECT_EQ(d.warmup_steps, 0);

  const ScheduleOptions st =
      baton::parse_schedule(ConfigNode(nlohmann::json{{"type", "step"}}, "run.json", "schedule"));
  EXPECT_EQ(st.kind, ScheduleKind::kStep);
  EXPECT_EQ(st.step_size, 1000);
  EXPECT_FLOAT_EQ(st.gamma, 0.1f);

  const nlohmann::json cj = {{"type", "cosine"}, {"warmup_steps", 20}, {"min_lr", 1e-5}};
  const ScheduleOptions c = baton::parse_schedule(ConfigNode(cj, "run.json", "schedule"));
  EXPECT_EQ(c.kind, ScheduleKind::kCosine);
  EXPECT_EQ(c.warmup_steps, 20);
  EXPECT_FLOAT_EQ(c.min_lr, 1e-5f);

  const nlohmann::json sj = {{"type", "step"}, {"step_size", 7}, {"gamma", 0.5}};
  const ScheduleOptions s = baton::parse_schedule(ConfigNode(sj, "run.json", "schedule"));
  EXPECT_EQ(s.step_size, 7);
  EXPECT_FLOAT_EQ(s.gamma, 0.5f);
}

TEST(ParseSchedule, UnknownAndBadKeys) {
  auto msg_for = [](const nlohmann::json& j) {
    return input_error([&] { baton::parse_schedule(ConfigNode(j, "sched.json", "schedule")); });
  };
  std::string m = msg_for({{"type", "cosine"}, {"gamma", 0.5}});  // gamma is a step key
  EXPECT_NE(m.find("sched.json"), std::string::npos) << m;
  EXPECT_NE(m.find("schedule.gamma"), std::string::npos) << m;
  m = msg_for({{"type", "constant"}, {"step_size", 10}});
  EXPECT_NE(m.find("schedule.step_size"), std::string::npos) << m;
  m = msg_for({{"warmup", 10}});
  EXPECT_NE(m.find("schedule.warmup"), std::string::npos) << m;
  m = msg_for({{"warmup_steps", -1}});
  EXPECT_NE(m.find("schedule.warmup_steps"), std::string::npos) << m;
  m = msg_for({{"type", "step"}, {"step_size", 0}});
  EXPECT_NE(m.find("schedule.step_size"), std::string::npos) << m;
  m = msg_for({{"type", "linear"}});
  EXPECT_NE(m.find("cosine"), std::string::npos) << "the message lists the choices: " << m;
}
