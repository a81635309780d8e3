// Loads a golden file pair written by a script in tests/golden/ (a JSON
// index with figures, a float32 blob) and compares tensors against it.
#pragma once

#include <baton/nn/loss.h>
#include <baton/nn/model.h>
#include <baton/optim/optimizer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace baton::golden {

struct Golden {
  nlohmann::json doc;
  std::vector<float> data;
  std::vector<float> tensor(const std::string& name) const {
    const auto& t = doc.at("tensors").at(name);
    int64_t n = 1;
    for (int64_t d : t.at("shape").get<std::vector<int64_t>>()) n *= d;
    const auto off = t.at("offset").get<int64_t>();
    return {data.begin() + off, data.begin() + off + n};
  }
};

// tests/golden/<name>.json and <name>.bin.
inline Golden load(const std::string& name) {
  const std::string dir = BATON_SOURCE_DIR "/tests/golden/";
  Golden g;
  std::ifstream j(dir + name + ".json");
  EXPECT_TRUE(j) << dir << name << ".json";
  if (!j) return g;
  g.doc = nlohmann::json::parse(j);
  std::ifstream b(dir + name + ".bin", std::ios::binary);
  EXPECT_TRUE(b) << dir << name << ".bin";
  b.seekg(0, std::ios::end);
  g.data.resize(static_cast<size_t>(b.tellg()) / sizeof(float));
  b.seekg(0);
  b.read(reinterpret_cast<char*>(g.data.data()),
         static_cast<std::streamsize>(g.data.size() * sizeof(float)));
  return g;
}

inline void expect_close(const std::string& what, const float* got, const std::vector<float>& want,
                         double tol) {
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(d <= worst)) {  // NaN counts as worst
      worst = std::isnan(d) ? INFINITY : d;
      at = i;
    }
  }
  EXPECT_LE(worst, tol) << what << "[" << at << "]: " << got[at] << " vs PyTorch's " << want[at];
}

// The whole comparison for a model built in the script's shape: PyTorch's
// initial weights copied in (Sequential::params() order = the file's
// "params"); the logits (batch rows, `classes` wide), the mean
// cross-entropy and every parameter gradient within 1e-4; then the file's
// "adamw_losses" (AdamW steps on the same batch, decay on the parameters
// Baton decays) within 1e-4.
inline void expect_model_matches(const Golden& g, Sequential& model, const Tensor& x,
                                 const std::vector<int32_t>& targets, int64_t classes) {
  const auto params = model.params();
  const auto names = g.doc.at("params").get<std::vector<std::string>>();
  ASSERT_EQ(params.size(), names.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const auto v = g.tensor("param." + names[i]);
    ASSERT_EQ(params[i]->value.numel(), static_cast<int64_t>(v.size())) << names[i];
    std::copy(v.begin(), v.end(), params[i]->value.data());
  }
  const auto rows = static_cast<int64_t>(targets.size());
  const ForwardContext train{Mode::kTrain, 1};
  SoftmaxCrossEntropy xent;
  Tensor dout({rows, classes});
  const float scale = 1.0f / static_cast<float>(rows);
  const Tensor& logits = model.forward(x, train);
  ASSERT_EQ(logits.numel(), rows * classes);
  expect_close("logits", logits.data(), g.tensor("logits"), 1e-4);
  const LossResult r = xent.compute(logits, targets.data(), nullptr, dout, scale, cpu_backend());
  EXPECT_NEAR(r.loss_sum * scale, g.doc.at("loss").get<double>(), 1e-4);
  model.backward(dout);
  for (size_t i = 0; i < params.size(); ++i) {
    expect_close("grad of " + names[i], params[i]->grad.data(), g.tensor("grad." + names[i]), 1e-4);
  }

  OptimizerOptions o;
  o.kind = OptimizerKind::kAdamW;
  const auto& opt_doc = g.doc.at("optimizer");
  o.weight_decay = opt_doc.at("weight_decay").get<float>();
  o.beta1 = opt_doc.at("beta1").get<float>();
  o.beta2 = opt_doc.at("beta2").get<float>();
  o.eps = opt_doc.at("eps").get<float>();
  Optimizer opt(o, params);
  const auto want = g.doc.at("adamw_losses").get<std::vector<double>>();
  ASSERT_FALSE(want.empty());
  const float lr = opt_doc.at("lr").get<float>();
  for (size_t step = 0; step < want.size(); ++step) {
    const Tensor& out = model.forward(x, train);
    const double loss =
        xent.compute(out, targets.data(), nullptr, dout, scale, cpu_backend()).loss_sum * scale;
    EXPECT_NEAR(loss, want[step], 1e-4) << "AdamW step " << step;
    model.backward(dout);
    opt.step(lr);
  }
}

}  // namespace baton::golden
