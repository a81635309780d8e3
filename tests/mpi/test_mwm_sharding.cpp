// strategy.sharding "optimizer" (ZeRO-1) across multi_worker_mirrored's
// processes, one replica each (run by ctest under mpiexec -n 2 and -n 3):
// each process keeps and updates 1/N of the optimizer state, the gradients
// reduce-scattered and the values all-gathered over MPI. It trains as
// "none" does (dropout, the batch split unevenly), every rank holding the
// same bits; a checkpoint gathers the pieces into the whole state, which
// resumes sharded (the chief broadcasts it, each process takes its piece)
// and unsharded alike, ending as the uninterrupted run.
#include <baton/core/error.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/trainer.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "../engine/strategy_test_config.h"
#include "../engine/trained_run.h"
#include "mpi_test_util.h"

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <filesystem>
#include <string>
#include <vector>

namespace baton {
namespace {

namespace fs = std::filesystem;

struct Trained {
  TrainSummary summary;
  std::vector<float> params;
};

class MwmSharding : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.load_plugin_dir(BATON_PLUGIN_DIR);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  }

  static nlohmann::json doc(const char* sharding, const nlohmann::json& optimizer) {
    nlohmann::json d = equivalence_config(
        {{"type", "multi_worker_mirrored"}, {"sharding", sharding}}, optimizer, 30);
    d["model"]["dropout"] = 0.25;
    d["data"]["shard_policy"] = "data";
    return d;
  }

  Trained train(const nlohmann::json& doc, const std::string& checkpoints = "",
                bool resume = false) {
    TrainOptions opt;
    opt.run_id = "mwm_sharding";
    opt.checkpoint_dir = checkpoints;
    opt.resume = resume;
    TrainedRun run = train_run(doc, "mwm_sharding.json", registry_, opt);
    return {run.summary, run.params.at(0)};
  }

  // Whether every rank holds rank 0's `values`.
  static bool same_on_every_rank(const std::vector<float>& values) {
    std::vector<float> root = values;
    MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    const int mine = root == values ? 1 : 0;
    int all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all == 1;
  }

  Registry registry_;
  int rank_ = 0;
};

// ZeRO-1, ZeRO-2 and ZeRO-3 over the processes train as "none".
TEST_F(MwmSharding, TheOptimizerShardedOverProcessesTrainsAsNone) {
  const nlohmann::json optimizers[] = {
      {{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}},
      {{"type", "adam"}, {"lr", 0.01}},
      {{"type", "adamw"}, {"lr", 0.01}, {"weight_decay", 0.1}, {"clip_global_norm", 0.5}}};
  for (const auto& opt : optimizers) {
    const std::string cell = opt.dump() + " on rank " + std::to_string(rank_);
    const Trained none = train(doc("none", opt));
    for (const char* mode : {"optimizer", "gradients", "parameters"}) {
      nlohmann::json d = doc(mode, opt);
      // The groups of layers: buckets of 50 floats, a layer each.
      d["strategy"]["allreduce"] = {{"bucket_mb", 200.0 / (1 << 20)}};
      const Trained sharded = train(d);
      // MPI's reduce-scatter and its allreduce may add in other orders:
      // within the equivalence bound.
      const std::string where = std::string(mode) + " " + cell;
      EXPECT_LE(worst_equivalence_error(sharded.params, none.params), 1.0) << where;
      EXPECT_TRUE(same_on_every_rank(sharded.params)) << where;
      ASSERT_EQ(sharded.summary.step_losses.size(), none.summary.step_losses.size()) << where;
      for (size_t i = 0; i < none.summary.step_losses.size(); ++i) {
        EXPECT_NEAR(sharded.summary.step_losses[i], none.summary.step_losses[i], 1e-4) << where;
      }
    }
  }
}

TEST_F(MwmSharding, ACheckpointOfThePiecesResumesShardedAndUnsharded) {
  const std::string dir = mpi_test::shared_temp_dir("baton_mwm_sharding");
  ASSERT_FALSE(dir.empty());
  const nlohmann::json adam = {{"type", "adam"}, {"lr", 0.01}};
  const auto steps = [&](const char* sharding, int64_t n) {
    nlohmann::json d = doc(sharding, adam);
    d["train"].erase("epochs");
    d["train"]["steps"] = n;
    return d;
  };
  const Trained whole = train(steps("optimizer", 16));
  train(steps("optimizer", 4), dir);
  const Trained sharded = train(steps("gradients", 8), dir, true);
  EXPECT_EQ(sharded.summary.start_step, 4);
  // ZeRO-3: the chief restores, every process takes its pieces of the
  // values it broadcasts; its checkpoint gathered group by group.
  const Trained values = train(steps("parameters", 12), dir, true);
  EXPECT_EQ(values.summary.start_step, 8);
  const Trained unsharded = train(steps("none", 16), dir, true);
  EXPECT_EQ(unsharded.summary.start_step, 12);
  ASSERT_EQ(sharded.summary.step_losses.size(), 4u);
  ASSERT_EQ(values.summary.step_losses.size(), 4u);
  ASSERT_EQ(unsharded.summary.step_losses.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(sharded.summary.step_losses[i], whole.summary.step_losses[i + 4], 1e-4) << i;
    EXPECT_NEAR(values.summary.step_losses[i], whole.summary.step_losses[i + 8], 1e-4) << i;
    EXPECT_NEAR(unsharded.summary.step_losses[i], whole.summary.step_losses[i + 12], 1e-4) << i;
  }
  EXPECT_LE(worst_equivalence_error(unsharded.params, whole.params), 1.0);
  EXPECT_TRUE(same_on_every_rank(unsharded.params));
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank_ == 0) fs::remove_all(dir);
}

}  // namespace
}  // namespace baton
