// Plugin loading: the built-in plugins register their names; a plugin built
// for another ABI version, or a library that is not a plugin, is refused
// with a message naming it.
#include <baton/core/error.h>
#include <baton/train/plugin_abi.h>
#include <baton/train/registry.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace baton {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(Plugins, BuiltinsRegisterModelsAndDatasets) {
  Registry r;
  EXPECT_EQ(r.load_plugin_dir(BATON_PLUGIN_DIR), 4);  // mlp, gpt, cnn, datasets
  for (const char* m : {"mlp", "gpt", "cnn", "resnet"}) {
    EXPECT_TRUE(contains(r.model_names(), m)) << m;
  }
  for (const char* d : {"csv", "idx", "synthetic_classification", "synthetic_images", "text"}) {
    EXPECT_TRUE(contains(r.dataset_names(), d)) << d;
  }
  ASSERT_EQ(r.plugins().size(), 4u);
  EXPECT_FALSE(r.plugins()[0].name.empty());
}

TEST(Plugins, WrongAbiVersionIsRefused) {
  Registry r;
  const std::string path = std::string(BATON_TEST_PLUGIN_DIR) + "/bad_abi.so";
  try {
    r.load_plugin(path);
    FAIL() << "a plugin with a wrong ABI version was accepted";
  } catch (const RuntimeError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    const std::string claimed = "ABI version " + std::to_string(BATON_PLUGIN_ABI_VERSION + 41);
    EXPECT_NE(msg.find(claimed), std::string::npos) << msg;
  }
  EXPECT_TRUE(r.plugins().empty());
}

TEST(Plugins, NonPluginLibraryIsRefused) {
  Registry r;
  EXPECT_THROW(r.load_plugin("/nonexistent/plugin.so"), RuntimeError);
  // libz is a real shared library without the entry point.
  try {
    r.load_plugin("libz.so.1");
    FAIL() << "a library without baton_plugin_entry was accepted";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("baton_plugin_entry"), std::string::npos) << e.what();
  }
}

TEST(Plugins, UnknownNamesListTheKnownOnes) {
  Registry r;
  r.load_plugin_dir(BATON_PLUGIN_DIR);
  ConfigNode node(nlohmann::json{{"type", "transformer"}}, "run.json", "model");
  try {
    r.model("transformer", node);
    FAIL();
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("run.json: model.type"), std::string::npos) << msg;
    EXPECT_NE(msg.find("mlp"), std::string::npos) << msg;
  }
}

TEST(Plugins, MlpValidatesItsConfig) {
  Registry r;
  r.load_plugin_dir(BATON_PLUGIN_DIR);
  auto build = [&](nlohmann::json j) {
    ConfigNode node(j, "run.json", "model");
    return r.model("mlp", node)(node, ModelShape{4, 3});
  };
  auto m = build({{"type", "mlp"}, {"layers", {4, 8, 3}}, {"norm", "batchnorm"}, {"dropout", 0.1}});
  EXPECT_EQ(m->plan(2, 4), 3);
  EXPECT_THROW(build({{"type", "mlp"}, {"layers", {5, 8, 3}}}), InputError);
  EXPECT_THROW(build({{"type", "mlp"}, {"layers", {4, 8, 2}}}), InputError);
  EXPECT_THROW(build({{"type", "mlp"}, {"layers", {4, 3}}, {"activaton", "relu"}}), InputError);
  EXPECT_THROW(build({{"type", "mlp"}, {"layers", {4, 3}}, {"norm", "groupnorm"}}), InputError);
}

// "conv_algorithm": "direct" keeps every convolution direct; "auto" (the
// default) lets a 32-channel 3x3 layer take Winograd's kernels where the
// CPU has them, which round differently: the outputs then differ, slightly.
TEST(Plugins, ConvNetsTakeAConvAlgorithm) {
  Registry r;
  r.load_plugin_dir(BATON_PLUGIN_DIR);
  const ModelShape shape{3 * 8 * 8, 4, {3, 8, 8}};
  auto build = [&](const std::string& type, nlohmann::json j) {
    j["type"] = type;
    if (type == "resnet") j["stages"] = {{32, 1}};
    if (type == "cnn") j["blocks"] = {{{"conv", 32}}, {{"conv", 32}}};
    ConfigNode node(j, "run.json", "model");
    return r.model(type, node)(node, shape);
  };
  const int64_t batch = 3;
  Tensor x({batch, shape.in_features});
  Rng data(3);
  for (auto& v : x.span()) v = static_cast<float>(data.uniform());
  for (const std::string type : {"cnn", "resnet"}) {
    std::vector<std::vector<float>> outs;
    for (const char* algorithm : {"auto", "direct"}) {
      auto m = build(type, {{"conv_algorithm", algorithm}});
      ASSERT_EQ(m->plan(batch, shape.in_features), shape.out_features);
      Rng rng(11);
      m->init(rng);
      const Tensor& y = m->forward(x, ForwardContext{Mode::kEval, 1});
      outs.emplace_back(y.span().begin(), y.span().end());
    }
    double largest = 0;
    for (size_t i = 0; i < outs[0].size(); ++i) {
      largest = std::max(largest, std::abs(static_cast<double>(outs[0][i]) - outs[1][i]));
    }
    EXPECT_LT(largest, 1e-4) << type;
    if (__builtin_cpu_supports("avx512f")) {
      EXPECT_GT(largest, 0.0) << type << ": \"auto\" ran the direct kernels too";
    } else {
      std::printf("no AVX-512 here: both algorithms ran direct kernels (%s)\n", type.c_str());
    }
    try {
      build(type, {{"conv_algorithm", "winograd"}});
      ADD_FAILURE() << type << ": an unknown algorithm was accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("conv_algorithm"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace baton
