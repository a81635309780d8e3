// Activation recomputation (model.activation_checkpointing, issue 32): the
// GPT's blocks keep only their input and output, one set of intermediates
// serves them all, and each block's backward computes its forward again
// into it. It trains to the same bits as the blocks that keep theirs
// (dropout included: its masks are keyed on the step and the row), the
// plan counts one block's intermediates, and the bytes the model
// allocates drop by what the plan says.
#include <baton/core/config.h>
#include <baton/core/error.h>
#include <baton/nn/model.h>
#include <baton/train/registry.h>
#include <gtest/gtest.h>
#include <malloc.h>

#include <memory>
#include <string>
#include <vector>

#include "strategy_test_config.h"
#include "trained_run.h"

#if defined(__SANITIZE_ADDRESS__)
#define BATON_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BATON_TEST_SANITIZED 1
#endif
#endif

namespace baton {
namespace {

class Recomputation : public ::testing::Test {
 protected:
  void SetUp() override { registry_.load_plugin_dir(BATON_PLUGIN_DIR); }

  static nlohmann::json doc(bool recompute, const nlohmann::json& strategy) {
    nlohmann::json d = gpt_equivalence_config(
        strategy,
        {{"type", "adamw"}, {"lr", 0.01}, {"weight_decay", 0.1}, {"clip_global_norm", 1.0}}, 8,
        0.1);
    d["model"]["n_layer"] = 3;
    d["model"]["activation_checkpointing"] = recompute;
    return d;
  }

  // A GPT of `layers` blocks (width 32, 4 heads, 16-token windows)
  // planned for `batch` sequences.
  std::unique_ptr<Sequential> planned(int layers, bool recompute, int64_t batch) {
    const nlohmann::json m = {{"type", "gpt"},  {"n_layer", layers},
                              {"n_head", 4},    {"d_model", 32},
                              {"dropout", 0.1}, {"activation_checkpointing", recompute}};
    ConfigNode node(m, "recompute.json", "model");
    auto model = registry_.model("gpt", node)(node, ModelShape{16, 256});
    model->plan(batch, 16);
    return model;
  }

  Registry registry_;
};

TEST_F(Recomputation, RecomputedBlocksTrainToTheKeptOnesBits) {
  const nlohmann::json strategies[] = {{{"type", "one_device"}},
                                       {{"type", "mirrored"}, {"replicas", 2}}};
  for (const auto& strategy : strategies) {
    TrainOptions opt;
    opt.run_id = "recompute";
    const TrainedRun kept = train_run(doc(false, strategy), "kept.json", registry_, opt);
    const TrainedRun again = train_run(doc(true, strategy), "recompute.json", registry_, opt);
    ASSERT_FALSE(kept.summary.step_losses.empty());
    EXPECT_EQ(again.summary.step_losses, kept.summary.step_losses) << strategy.dump();
    ASSERT_EQ(again.params.size(), kept.params.size());
    for (size_t r = 0; r < kept.params.size(); ++r) {
      EXPECT_EQ(again.params[r], kept.params[r]) << strategy.dump() << " replica " << r;
    }
  }
}

// The plan: a block beyond the first adds its output and its input
// gradient (2 x 32 floats a token) and nothing else.
TEST_F(Recomputation, ThePlanKeepsOneBlocksIntermediates) {
  const int64_t d = 32, seq = 16;
  const int64_t kept2 = planned(2, false, 4)->saved_floats_per_sample();
  const int64_t kept4 = planned(4, false, 4)->saved_floats_per_sample();
  const int64_t again2 = planned(2, true, 4)->saved_floats_per_sample();
  const int64_t again4 = planned(4, true, 4)->saved_floats_per_sample();
  EXPECT_EQ(again4 - again2, 2 * seq * 2 * d);
  const int64_t block = (kept4 - kept2) / 2;  // a kept block's floats a sample
  EXPECT_GT(block, 10 * seq * d);
  EXPECT_EQ(kept4 - again4, 3 * (block - seq * 2 * d));
}

// What the process allocates planning the model drops by what the plan
// says: within 10% (the plan's per-layer figures are a model of the
// buffers, 5% off here; without the sharing nothing would drop).
TEST_F(Recomputation, TheModelAllocatesWhatThePlanSays) {
#ifdef BATON_TEST_SANITIZED
  GTEST_SKIP() << "under AddressSanitizer, whose allocator mallinfo2 does not see";
#else
  auto allocated = [] {
    const struct mallinfo2 m = mallinfo2();
    return static_cast<int64_t>(m.uordblks + m.hblkhd);
  };
  const int64_t batch = 32;
  planned(1, false, 1);  // what a first model allocates once, out of the way
  int64_t bytes[2] = {0, 0}, planned_floats[2] = {0, 0};
  std::unique_ptr<Sequential> models[2];
  for (int recompute = 0; recompute < 2; ++recompute) {
    const int64_t before = allocated();
    models[recompute] = planned(6, recompute == 1, batch);
    bytes[recompute] = allocated() - before;
    planned_floats[recompute] = models[recompute]->saved_floats_per_sample();
  }
  const double saved = static_cast<double>(bytes[0] - bytes[1]);
  const double plan_saved =
      static_cast<double>((planned_floats[0] - planned_floats[1]) * batch * 4);
  EXPECT_GT(plan_saved, 0.0);
  EXPECT_NEAR(saved, plan_saved, 0.1 * plan_saved)
      << bytes[0] << " bytes kept, " << bytes[1] << " recomputed";
#endif
}

// The key is the GPT's: the CNN and the ResNet refuse it, naming it.
TEST_F(Recomputation, OtherModelsRefuseTheKey) {
  for (const char* type : {"cnn", "resnet"}) {
    const nlohmann::json m = {{"type", type}, {"activation_checkpointing", true}};
    ConfigNode node(m, "recompute.json", "model");
    try {
      registry_.model(type, node)(node, ModelShape{64, 10});
      ADD_FAILURE() << type << " took activation_checkpointing";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("model.activation_checkpointing"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace baton
