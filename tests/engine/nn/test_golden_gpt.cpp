// Against PyTorch, not against ourselves: a tiny GPT-2 (2 layers, d_model
// 32, 2 heads, context 16, vocabulary 64) with the weights PyTorch drew
// (tests/golden/make_gpt_golden.py, run by hand; its output is committed):
// the logits, the mean cross-entropy and every parameter's gradient within
// 1e-4, and 10 AdamW steps' losses within 1e-4 of PyTorch's.
#include <baton/train/registry.h>
#include <gtest/gtest.h>

#include <vector>

#include "golden_util.h"

namespace baton {
namespace {

TEST(GoldenGpt, LogitsLossGradientsAndAdamWStepsMatchPyTorch) {
  const golden::Golden g = golden::load("gpt_tiny");
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
  Tensor x({B, T});
  const auto tokens = g.doc.at("tokens").get<std::vector<int>>();
  for (int64_t i = 0; i < B * T; ++i) x[i] = static_cast<float>(tokens[static_cast<size_t>(i)]);
  const auto targets = g.doc.at("targets").get<std::vector<int32_t>>();
  golden::expect_model_matches(g, *model, x, targets, V);
}

}  // namespace
}  // namespace baton
