// strategy.sharding "optimizer" (ZeRO-1) and "gradients" (ZeRO-2) for
// mirrored on threads: each of the N replicas keeps and updates 1/N of the
// optimizer state; gradients are reduce-scattered (ZeRO-2's in groups of
// layers as backward completes each, through one window of gradient
// memory) and the values all-gathered. Both train as "none" does (dropout,
// weight decay, clipping by the global norm and a tied LM head included),
// hold 1/N of the state per replica (ZeRO-2 also only a window of the
// gradients), and their checkpoints - the whole state in the unsharded
// optimizer's names - resume under another sharding and another replica
// count.
#include <baton/core/error.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/trainer.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
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

  // ZeRO-2's groups are at least a bucket (strategy.allreduce.bucket_mb):
  // one of 50 floats, so every layer of these small models closes one
  // (and ZeRO-3 gathers the middle layer's values again for its backward).
  static nlohmann::json strategy(int replicas, const char* sharding) {
    nlohmann::json s = {{"type", "mirrored"}, {"replicas", replicas}, {"sharding", sharding}};
    if (std::string(sharding) != "none") s["allreduce"] = {{"bucket_mb", 200.0 / (1 << 20)}};
    return s;
  }

  static nlohmann::json doc(int replicas, const char* sharding, const nlohmann::json& optimizer) {
    nlohmann::json d = equivalence_config(strategy(replicas, sharding), optimizer, 30);
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

  // What a trainer of `d` holds before training: its parameters and
  // optimizer state, and its gradients (bytes).
  std::pair<int64_t, int64_t> held(const nlohmann::json& d) {
    const RunConfig cfg = parse_run_config(d, "sharding.json");
    Telemetry t;
    TrainOptions opt;
    opt.run_id = "bytes";
    const Trainer trainer(cfg, registry_, t, opt);
    return {trainer.parameter_bytes(), trainer.gradient_bytes()};
  }
  int64_t parameter_bytes(const nlohmann::json& d) { return held(d).first; }

  // An MLP of six 128-wide layers on 3 replicas, Adam, 2 steps; sharded,
  // in groups of at least 1000 floats.
  static nlohmann::json six_layers(const char* sharding) {
    nlohmann::json d = doc(3, sharding, {{"type", "adam"}, {"lr", 0.01}});
    if (std::string(sharding) != "none") {
      d["strategy"]["allreduce"]["bucket_mb"] = 1000.0 * 4 / (1 << 20);
    }
    d["model"]["layers"] = {12, 128, 128, 128, 128, 128, 128, 5};
    d["train"].erase("epochs");
    d["train"]["steps"] = 2;
    return d;
  }
  static constexpr int64_t kLayer = 128 * 128 + 128;
  static constexpr int64_t kModel = 12 * 128 + 128 + 5 * kLayer + 128 * 5 + 5;
  // Its groups, from the last layer, each at least 1000 floats: the head
  // (645) and the last 128-wide layer; four 128-wide layers; the first.
  // Each parameter 64-aligned (weights first), each group padded to 3
  // pieces of multiples of 64. A replica's window is the largest group;
  // its piece a third of every group (floats).
  struct Groups {
    int64_t window, piece;
  };
  static Groups six_layer_groups() {
    const auto a64 = [](int64_t n) { return (n + 63) / 64 * 64; };
    const auto padded = [](int64_t n) { return (n + 191) / 192 * 192; };
    const int64_t head = padded(128 * 128 + a64(128 * 5) + 128 + a64(5));
    const int64_t middle = padded(128 * 128 + 128);
    const int64_t first = padded(a64(12 * 128) + 128);
    return {std::max({head, middle, first}), (head + 4 * middle + first) / 3};
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
      const Trained none = train(doc(n, "none", opt));
      for (const char* mode : {"optimizer", "gradients", "parameters"}) {
        const std::string cell =
            std::string(mode) + " " + opt.dump() + " on " + std::to_string(n) + " replicas";
        std::vector<Event> events;
        const Trained sharded = train(doc(n, mode, opt), "", false, &events);
        ASSERT_EQ(sharded.params.size(), static_cast<size_t>(n)) << cell;
        // The same sums in the same order (the local communicator's
        // reduce-scatter adds the replicas in rank order, as its allreduce
        // does) and the same element-wise updates over pieces whose bounds
        // are multiples of 64 floats (every vector width takes them alike):
        // the same bits. Clipping's norm is summed piece by piece, which
        // moves its last bits: within the equivalence bound then.
        if (opt.contains("clip_global_norm")) {
          EXPECT_LE(worst_equivalence_error(sharded.params[0], none.params[0]), 1.0) << cell;
        } else {
          EXPECT_EQ(sharded.params[0], none.params[0]) << cell;
        }
        for (int r = 1; r < n; ++r) {
          EXPECT_EQ(sharded.params[r], sharded.params[0]) << cell << " " << r;
        }
        ASSERT_EQ(sharded.summary.step_losses.size(), none.summary.step_losses.size()) << cell;
        for (size_t i = 0; i < none.summary.step_losses.size(); ++i) {
          EXPECT_NEAR(sharded.summary.step_losses[i], none.summary.step_losses[i], 1e-4) << cell;
        }
        // The run log says how the state and the gradients were split:
        // The three layers in three groups.
        const std::string stage = std::string(mode) == "optimizer"   ? "1"
                                  : std::string(mode) == "gradients" ? "2"
                                                                     : "3";
        const std::string said = "ZeRO-" + stage + "): each of " + std::to_string(n);
        bool found = false, grouped = false;
        for (const Event& e : events) {
          if (const auto* l = std::get_if<LogEvent>(&e)) {
            found = found || l->message.find(said) != std::string::npos;
            grouped = grouped || l->message.find("in 3 groups of layers") != std::string::npos;
          }
        }
        EXPECT_TRUE(found) << cell;
        EXPECT_TRUE(grouped) << cell;
      }
    }
  }
}

// ZeRO-2 and ZeRO-3 with a tied LM head: the head writes the token
// table's gradient first and the embedding, three groups later, adds to
// it (and the head reads the table's values the embedding's group
// gathered), so the table's group keeps memory of its own while the
// blocks' groups share theirs; the same bits as "none" on 2 and 3
// replicas, every replica's values whole after the run.
TEST_F(Sharding, TheGradientsShardedTrainATiedGptAsNone) {
  const nlohmann::json adam = {{"type", "adam"}, {"lr", 0.01}};
  for (const int n : {2, 3}) {
    const Trained a = train(gpt_equivalence_config(strategy(n, "none"), adam, 6, 0.1));
    for (const char* mode : {"gradients", "parameters"}) {
      const Trained b = train(gpt_equivalence_config(strategy(n, mode), adam, 6, 0.1));
      EXPECT_EQ(b.params[0], a.params[0]) << mode << " " << n;
      for (int r = 1; r < n; ++r) EXPECT_EQ(b.params[r], a.params[0]) << mode << " " << r;
      ASSERT_EQ(b.summary.step_losses.size(), a.summary.step_losses.size());
      for (size_t i = 0; i < a.summary.step_losses.size(); ++i) {
        EXPECT_EQ(b.summary.step_losses[i], a.summary.step_losses[i])
            << mode << " " << n << " " << i;
      }
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

// ZeRO-2 holds a window of the gradients and its piece of their sum: on 3
// replicas of an MLP of six 128-wide layers, its largest group's gradients
// (the window: about a layer's) and a third of the model's (the piece) -
// the window the plan says, and under 60% of what "none" holds.
TEST_F(Sharding, TheGradientsShardedHoldAWindowAndAPiece) {
  const int64_t held_none = held(six_layers("none")).second;
  const int64_t held_zero2 = held(six_layers("gradients")).second;
  EXPECT_GE(held_none, 3 * 4 * kModel);
  EXPECT_LE(held_none, 3 * 4 * (kModel + 64 * 12));  // within the pieces' alignment
  const Groups g = six_layer_groups();
  EXPECT_EQ(held_zero2, 3 * 4 * (g.window + g.piece));
  EXPECT_LT(held_zero2, held_none * 6 / 10);
  // The plan's figure is the window the trainer made.
  const Trained run = train(six_layers("gradients"));
  EXPECT_EQ(run.summary.memory.sharding, "gradients");
  EXPECT_EQ(run.summary.memory.gradients, 4 * g.window);
  // Its piece (half its communication figure) unpadded: within the groups' padding.
  const int64_t planned = run.summary.memory.gradients + run.summary.memory.communication / 2;
  EXPECT_NEAR(static_cast<double>(held_zero2 / 3), static_cast<double>(planned), 4.0 * 64 * 8);
}

// ZeRO-3 holds a window of the values and its piece of them too: on 3
// replicas of the same MLP, the values, gradients and Adam's state take
// under 45% of what "none" holds, as the plan says.
TEST_F(Sharding, TheParametersShardedHoldAWindowAndAPieceOfTheValues) {
  const auto [values_none, grads_none] = held(six_layers("none"));
  const auto [values_zero3, grads_zero3] = held(six_layers("parameters"));
  // Values, gradients: the window and the piece each; Adam's two moments
  // of the piece.
  const Groups g = six_layer_groups();
  EXPECT_EQ(values_zero3 + grads_zero3, 3 * 4 * (2 * g.window + 4 * g.piece));
  EXPECT_LT(values_zero3 + grads_zero3, (values_none + grads_none) * 45 / 100);
  const Trained run = train(six_layers("parameters"));
  EXPECT_EQ(run.summary.memory.sharding, "parameters");
  EXPECT_EQ(run.summary.memory.gradients, 4 * g.window);
  EXPECT_NEAR(static_cast<double>(run.summary.memory.parameters),
              static_cast<double>(4 * (g.window + g.piece)), 4.0 * 64 * 8);
}

// ZeRO-3's validation: each replica's share of the validation set through
// the gathered values; a share with a batch fewer than the others still
// takes part in their gathers. 33 validation samples over 4 replicas of 8
// rows: shares of 8, 8, 8 and 9 samples, the last in two batches.
TEST_F(Sharding, TheParametersShardedValidateAsNone) {
  const nlohmann::json adam = {{"type", "adam"}, {"lr", 0.01}};
  nlohmann::json none = doc(4, "none", adam), zero3 = doc(4, "parameters", adam);
  for (nlohmann::json* d : {&none, &zero3}) {
    (*d)["data"]["validation_split"] = 0.11;
    (*d)["train"]["global_batch_size"] = 32;
  }
  const Trained a = train(none), b = train(zero3);
  ASSERT_TRUE(a.summary.has_validation);
  ASSERT_TRUE(b.summary.has_validation);
  EXPECT_GT(a.summary.val_loss, 0.0);
  EXPECT_EQ(b.summary.val_loss, a.summary.val_loss);
  EXPECT_EQ(b.summary.val_accuracy, a.summary.val_accuracy);
  EXPECT_EQ(b.params[3], a.params[0]);
}

// A checkpoint holds the whole state however it was kept: one written by 4
// ZeRO-1 replicas resumes on 2 unsharded ones, one written by those on 3
// ZeRO-2 ones, theirs on 4 ZeRO-3 ones, and theirs on 2 ZeRO-1 ones; each
// run ends as the uninterrupted run does.
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
  const Trained whole = train(steps(2, "none", 20));
  train(steps(4, "optimizer", 4), dir.string());
  const Trained two = train(steps(2, "none", 8), dir.string(), true);
  EXPECT_EQ(two.summary.start_step, 4);
  const Trained three = train(steps(3, "gradients", 12), dir.string(), true);
  EXPECT_EQ(three.summary.start_step, 8);
  const Trained four = train(steps(4, "parameters", 16), dir.string(), true);
  EXPECT_EQ(four.summary.start_step, 12);
  // ... and ZeRO-3's, written group by group from the windows, on 2 ZeRO-1 ones.
  const Trained five = train(steps(2, "optimizer", 20), dir.string(), true);
  EXPECT_EQ(five.summary.start_step, 16);
  ASSERT_EQ(three.summary.step_losses.size(), 4u);
  ASSERT_EQ(four.summary.step_losses.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(two.summary.step_losses[i], whole.summary.step_losses[i + 4], 1e-4) << i;
    EXPECT_NEAR(three.summary.step_losses[i], whole.summary.step_losses[i + 8], 1e-4) << i;
    EXPECT_NEAR(four.summary.step_losses[i], whole.summary.step_losses[i + 12], 1e-4) << i;
    EXPECT_NEAR(five.summary.step_losses[i], whole.summary.step_losses[i + 16], 1e-4) << i;
  }
  EXPECT_LE(worst_equivalence_error(five.params[0], whole.params[0]), 1.0);
  fs::remove_all(dir);
}

TEST_F(Sharding, WhatDoesNotShardIsRefusedNamingTheKey) {
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
  refused(doc(2, "everything", adam), "everything");
  nlohmann::json mwm = doc(2, "optimizer", adam);
  mwm["strategy"] = {
      {"type", "multi_worker_mirrored"}, {"sharding", "optimizer"}, {"replicas_per_worker", 2}};
  refused(mwm, "one replica each");
  mwm["strategy"]["sharding"] = "gradients";
  refused(mwm, "\"gradients\" runs over multi_worker_mirrored's processes with one replica");
  // The allreduce's settings a sharded run does not use.
  nlohmann::json ring = doc(2, "parameters", adam);
  ring["strategy"]["allreduce"]["algorithm"] = "ring";
  refused(ring, "\"ring\" does not apply to strategy.sharding \"parameters\"");
  nlohmann::json overlap = doc(2, "gradients", adam);
  overlap["strategy"]["allreduce"]["overlap"] = false;
  refused(overlap, "strategy.allreduce.overlap: does not apply");
  nlohmann::json central = doc(2, "optimizer", adam);
  central["strategy"]["type"] = "central_storage";
  central["strategy"].erase("allreduce");
  refused(central, "sharding");
}

}  // namespace
}  // namespace baton
