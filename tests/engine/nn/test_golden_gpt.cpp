// Against PyTorch, not against ourselves: a tiny GPT-2 (2 layers, d_model
// 32, 2 heads, context 16, vocabulary 64) with the weights PyTorch drew
// (tests/golden/make_gpt_golden.py, run by hand; its output is committed):
// the logits, the mean cross-entropy and every parameter's gradient within
// 1e-4, and 10 AdamW steps' losses within 1e-4 of PyTorch's.
#include <baton/nn/loss.h>
#include <baton/optim/optimizer.h>
#include <baton/train/registry.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

namespace baton {
namespace {

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

Golden load() {
  const std::string dir = BATON_SOURCE_DIR "/tests/golden/";
  Golden g;
  std::ifstream j(dir + "gpt_tiny.json");
  EXPECT_TRUE(j) << dir << "gpt_tiny.json";
  g.doc = nlohmann::json::parse(j);
  std::ifstream b(dir + "gpt_tiny.bin", std::ios::binary);
  EXPECT_TRUE(b) << dir << "gpt_tiny.bin";
  b.seekg(0, std::ios::end);
  g.data.resize(static_cast<size_t>(b.tellg()) / sizeof(float));
  b.seekg(0);
  b.read(reinterpret_cast<char*>(g.data.data()),
         static_cast<std::streamsize>(g.data.size() * sizeof(float)));
  return g;
}

void expect_close(const std::string& what, const float* got, const std::vector<float>& want,
                  double tol) {
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (d > worst) {
      worst = d;
      at = i;
    }
  }
  EXPECT_LE(worst, tol) << what << "[" << at << "]: " << got[at] << " vs PyTorch's " << want[at];
}

TEST(GoldenGpt, LogitsLossGradientsAndAdamWStepsMatchPyTorch) {
  const Golden g = load();
  const auto& cfg = g.doc.at("config");
  const int64_t V = cfg.at("vocab"), T = cfg.at("context"), B = cfg.at("batch");
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const nlohmann::json model_cfg = {{"type", "gpt"},
                                    {"n_layer", cfg.at("n_layer")},
                                    {"n_head", cfg.at("n_head")},
                                    {"d_model", cfg.at("d_model")}};
  ConfigNode node(model_cfg, "golden.json", "model");
  auto model = registry.model("gpt", node)(node, ModelShape{T, V});
  ASSERT_EQ(model->plan(B, T), V);
  const auto params = model->params();
  const auto names = g.doc.at("params").get<std::vector<std::string>>();
  ASSERT_EQ(params.size(), names.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const auto v = g.tensor("param." + names[i]);
    ASSERT_EQ(params[i]->value.numel(), static_cast<int64_t>(v.size())) << names[i];
    std::copy(v.begin(), v.end(), params[i]->value.data());
  }
  Tensor x({B, T});
  const auto tokens = g.doc.at("tokens").get<std::vector<int>>();
  for (int64_t i = 0; i < B * T; ++i) x[i] = static_cast<float>(tokens[static_cast<size_t>(i)]);
  const auto targets = g.doc.at("targets").get<std::vector<int32_t>>();

  const ForwardContext train{Mode::kTrain, 1};
  SoftmaxCrossEntropy xent;
  Tensor dout({B * T, V});
  const float scale = 1.0f / static_cast<float>(B * T);
  const Tensor& logits = model->forward(x, train);
  expect_close("logits", logits.data(), g.tensor("logits"), 1e-4);
  const LossResult r = xent.compute(logits, targets.data(), nullptr, dout, scale, cpu_backend());
  EXPECT_NEAR(r.loss_sum * scale, g.doc.at("loss").get<double>(), 1e-4);
  model->backward(dout);
  for (size_t i = 0; i < params.size(); ++i) {
    expect_close("grad of " + names[i], params[i]->grad.data(), g.tensor("grad." + names[i]), 1e-4);
  }

  // 10 AdamW steps on the batch (weight decay on matrices and embeddings).
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdamW;
  o.weight_decay = g.doc.at("optimizer").at("weight_decay").get<float>();
  o.beta1 = 0.9f;
  o.beta2 = 0.999f;
  o.eps = 1e-8f;
  Optimizer opt(o, params);
  const auto want = g.doc.at("adamw_losses").get<std::vector<double>>();
  const float lr = g.doc.at("optimizer").at("lr").get<float>();
  for (size_t step = 0; step < want.size(); ++step) {
    const Tensor& out = model->forward(x, train);
    const double loss =
        xent.compute(out, targets.data(), nullptr, dout, scale, cpu_backend()).loss_sum * scale;
    EXPECT_NEAR(loss, want[step], 1e-4) << "AdamW step " << step;
    model->backward(dout);
    opt.step(lr);
  }
}

}  // namespace
}  // namespace baton
