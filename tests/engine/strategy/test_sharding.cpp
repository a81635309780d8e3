// strategy.sharding "optimizer" (ZeRO-1) for mirrored on threads: each of
// the N replicas keeps and updates 1/N of the optimizer state; gradients
// are reduce-scattered and the values all-gathered. It trains as "none"
// does (dropout, weight decay and clipping by the global norm included),
// holds 1/N of the state per replica, and its checkpoints - the whole
// state in the unsharded optimizer's names - resume under another
// sharding and another replica count.
#include <baton/core/error.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/trainer.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "strategy_test_config.h"
#include "trained_run.h"

namespace baton {
namespace {

namespace fs = std::filesystem;

using Trained = TrainedRun;

class Sharding : public ::testing::Test {
 protected:
  void SetUp() override { registry_.load_plugin_dir(BATON_PLUGIN_DIR); }

  static nlohmann::json doc(int replicas, const char* sharding, const nlohmann::json& optimizer) {
    nlohmann::json d = equivalence_config(
        {{"type", "mirrored"}, {"replicas", replicas}, {"sharding", sharding}}, optimizer, 30);
    d["model"]["dropout"] = 0.25;
    d["data"]["shard_policy"] = "data";
    return d;
  }

  Trained train(const nlohmann::json& d, const std::string& checkpoints = "", bool resume = false,
                std::vector<Event>* events = nullptr) {
    TrainOptions opt;
    opt.run_id = "sharding";
    opt.checkpoint_dir = checkpoints;
    opt.resume = resume;
    return train_run(d, "sharding.json", registry_, opt, events);
  }

  int64_t parameter_bytes(const nlohmann::json& d) {
    const RunConfig cfg = parse_run_config(d, "sharding.json");
    Telemetry t;
    TrainOptions opt;
    opt.run_id = "bytes";
    const Trainer trainer(cfg, registry_, t, opt);
    return trainer.parameter_bytes();
  }

  Registry registry_;
};

// Every optimizer kind the state shards over (momentum; Adam's two
// moments; AdamW's decoupled decay, which only the decayed piece takes),
// with clipping low enough to clip most steps: the global norm is taken
// over every replica's piece.
TEST_F(Sharding, TheOptimizerShardedTrainsAsNone) {
  const nlohmann::json optimizers[] = {
      {{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}, {"weight_decay", 0.01}},
      {{"type", "adam"}, {"lr", 0.01}},
      {{"type", "adamw"}, {"lr", 0.01}, {"weight_decay", 0.1}, {"clip_global_norm", 0.5}}};
  for (const int n : {2, 3, 4}) {
    for (const auto& opt : optimizers) {
      const std::string cell = opt.dump() + " on " + std::to_string(n) + " replicas";
      const Trained none = train(doc(n, "none", opt));
      std::vector<Event> events;
      const Trained zero1 = train(doc(n, "optimizer", opt), "", false, &events);
      ASSERT_EQ(zero1.params.size(), static_cast<size_t>(n)) << cell;
      // The same sums in the same order (the local communicator's
      // reduce-scatter adds the replicas in rank order, as its allreduce
      // does) and the same element-wise updates over pieces whose bounds
      // are multiples of 64 floats (every vector width takes them alike):
      // the same bits. Clipping's norm is summed piece by piece, which
      // moves its last bits: within the equivalence bound then.
      if (opt.contains("clip_global_norm")) {
        EXPECT_LE(worst_equivalence_error(zero1.params[0], none.params[0]), 1.0) << cell;
      } else {
        EXPECT_EQ(zero1.params[0], none.params[0]) << cell;
      }
      for (int r = 1; r < n; ++r) EXPECT_EQ(zero1.params[r], zero1.params[0]) << cell << " " << r;
      ASSERT_EQ(zero1.summary.step_losses.size(), none.summary.step_losses.size()) << cell;
      for (size_t i = 0; i < none.summary.step_losses.size(); ++i) {
        EXPECT_NEAR(zero1.summary.step_losses[i], none.summary.step_losses[i], 1e-4) << cell;
      }
      // The run log says how the state was split.
      bool said = false;
      for (const Event& e : events) {
        if (const auto* l = std::get_if<LogEvent>(&e)) {
          said = said || l->message.find("ZeRO-1") != std::string::npos;
        }
      }
      EXPECT_TRUE(said) << cell;
    }
  }
}

// Each replica holds its piece of the state: on 3 replicas, Adam's two
// moments take a third of what "none" keeps (within the pieces' 256-byte
// alignment), the values stay whole on every replica.
TEST_F(Sharding, EachReplicaHoldsItsPieceOfTheState) {
  const nlohmann::json adam = {{"type", "adam"}, {"lr", 0.01}};
  nlohmann::json none = doc(3, "none", adam), zero1 = doc(3, "optimizer", adam);
  for (nlohmann::json* d : {&none, &zero1}) (*d)["model"]["layers"] = {12, 256, 256, 5};
  const int64_t values = 3 * int64_t{4} * (12 * 256 + 256 + 256 * 256 + 256 + 256 * 5 + 5);
  const int64_t state_none = parameter_bytes(none) - values;
  const int64_t state_zero1 = parameter_bytes(zero1) - values;
  EXPECT_EQ(state_none, 2 * values);
  EXPECT_LE(static_cast<double>(state_zero1), 1.02 * static_cast<double>(state_none) / 3)
      << state_zero1 << " bytes of state against " << state_none << " unsharded";
  EXPECT_GE(state_zero1, state_none / 3);
}

// A checkpoint holds the whole state however it was kept: one written by 4
// sharded replicas resumes on 2 unsharded ones, and one written by those
// on 3 sharded ones; each run ends as the uninterrupted run does.
TEST_F(Sharding, ACheckpointResumesUnderAnotherShardingAndReplicaCount) {
  const fs::path dir = fs::temp_directory_path() / ("baton_sharding_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const nlohmann::json adam = {{"type", "adam"}, {"lr", 0.01}};
  const auto steps = [&](int n, const char* sharding, int64_t count) {
    nlohmann::json d = doc(n, sharding, adam);
    d["train"].erase("epochs");
    d["train"]["steps"] = count;
    return d;
  };
  const Trained whole = train(steps(2, "none", 12));
  train(steps(4, "optimizer", 4), dir.string());
  const Trained two = train(steps(2, "none", 8), dir.string(), true);
  EXPECT_EQ(two.summary.start_step, 4);
  const Trained three = train(steps(3, "optimizer", 12), dir.string(), true);
  EXPECT_EQ(three.summary.start_step, 8);
  ASSERT_EQ(three.summary.step_losses.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(two.summary.step_losses[i], whole.summary.step_losses[i + 4], 1e-4) << i;
    EXPECT_NEAR(three.summary.step_losses[i], whole.summary.step_losses[i + 8], 1e-4) << i;
  }
  EXPECT_LE(worst_equivalence_error(three.params[0], whole.params[0]), 1.0);
  fs::remove_all(dir);
}

TEST_F(Sharding, WhatIsNotBuiltIsRefusedNamingTheKey) {
  const nlohmann::json adam = {{"type", "adam"}, {"lr", 0.01}};
  const auto refused = [&](const nlohmann::json& d, const std::string& why) {
    try {
      (void)parse_run_config(d, "sharding.json");
      ADD_FAILURE() << "accepted: " << d["strategy"].dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("strategy.sharding"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused(doc(2, "gradients", adam), "ZeRO-2) is not built yet");
  refused(doc(2, "parameters", adam), "ZeRO-3) is not built yet");
  refused(doc(2, "everything", adam), "everything");
  nlohmann::json mwm = doc(2, "optimizer", adam);
  mwm["strategy"] = {
      {"type", "multi_worker_mirrored"}, {"sharding", "optimizer"}, {"replicas_per_worker", 2}};
  refused(mwm, "one replica each");
  nlohmann::json central = doc(2, "optimizer", adam);
  central["strategy"]["type"] = "central_storage";
  refused(central, "sharding");
}

}  // namespace
}  // namespace baton
