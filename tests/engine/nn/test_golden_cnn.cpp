// Against PyTorch, not against ourselves: two tiny convolutional nets with
// the weights PyTorch drew (tests/golden/make_cnn_golden.py, run by hand;
// its output is committed), on one batch of four 3x8x8 images:
//   cnn_tiny     the `cnn` plugin: BatchNorm2d, max and average pooling,
//                a grouped convolution, a flatten and a two-layer head;
//   resnet_tiny  the `resnet` plugin: a stem, an identity basic block and a
//                strided one with a projection shortcut, global pooling.
// The logits, the mean cross-entropy and every parameter gradient within
// 1e-4, and 10 AdamW steps' losses within 1e-4 of PyTorch's.
#include <baton/train/registry.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "golden_util.h"

namespace baton {
namespace {

class GoldenCnn : public testing::TestWithParam<std::string> {};

TEST_P(GoldenCnn, LogitsLossGradientsAndAdamWStepsMatchPyTorch) {
  const golden::Golden g = golden::load(GetParam());
  ASSERT_FALSE(g.data.empty());
  const auto image = g.doc.at("image_shape").get<std::vector<int64_t>>();
  const int64_t n = g.doc.at("batch"), classes = g.doc.at("classes");
  const int64_t features = image.at(0) * image.at(1) * image.at(2);
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const nlohmann::json& model_cfg = g.doc.at("model");
  ConfigNode node(model_cfg, GetParam() + ".json", "model");
  auto model =
      registry.model(model_cfg.at("type"), node)(node, ModelShape{features, classes, image});
  ASSERT_EQ(model->plan(n, features), classes);
  const auto pixels = g.tensor("images");
  ASSERT_EQ(static_cast<int64_t>(pixels.size()), n * features);
  Tensor x({n, features});
  std::copy(pixels.begin(), pixels.end(), x.data());
  golden::expect_model_matches(g, *model, x, g.doc.at("targets").get<std::vector<int32_t>>(),
                               classes);
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenCnn, testing::Values("cnn_tiny", "resnet_tiny"));

}  // namespace
}  // namespace baton
