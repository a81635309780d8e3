// parameter_server with its workers on GPUs (issue 31): each worker on the
// GPU of its place on its host, the servers in host memory. A worker keeps
// its variables in a host copy: its gradients come off its GPU into it and
// leave for the servers from it, the servers' values arrive in it and go
// onto the GPU. Run by ctest under mpiexec -n 3 (two workers, one server),
// every process seeing 2 emulated GPUs: synchronously the workers train as
// one device on the CPU (dropout included, the batch split unevenly),
// asynchronously they train, and a resumed run ends where an uninterrupted
// one does.
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

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace baton {
namespace {

namespace fs = std::filesystem;

// Two emulated GPUs per process (read once, when the emulator's library
// loads): worker r of each host takes gpu_emulated:r.
const bool kSet = [] { return setenv("BATON_SIMT_DEVICES", "2", 0) == 0; }();

nlohmann::json mlp(const nlohmann::json& strategy, const nlohmann::json& optimizer) {
  nlohmann::json doc = equivalence_config(strategy, optimizer, 30);
  doc["model"]["dropout"] = 0.25;
  doc["train"]["epochs"] = 1;
  return doc;
}

struct Trained {
  TrainSummary summary;
  std::vector<float> params;
};

class PsGpus : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kSet);
    if (!fs::exists(fs::path(BATON_GPU_LIBRARY_DIR) / "baton_cuda_emu.so")) {
      GTEST_SKIP() << "built without the GPU emulator (no CUDA toolkit headers)";
    }
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 3) GTEST_SKIP() << "needs 3 ranks (2 workers, 1 server); has " << size;
    registry_.load_plugin_dir(BATON_PLUGIN_DIR);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  }

  bool server() const { return rank_ == 2; }

  Trained train(const nlohmann::json& doc, const std::string& checkpoints = "",
                bool resume = false) {
    TrainOptions opt;
    opt.run_id = "ps_gpus";
    opt.gpu_library_dir = BATON_GPU_LIBRARY_DIR;
    opt.checkpoint_dir = checkpoints;
    opt.resume = resume;
    TrainedRun run = train_run(doc, "ps_gpus.json", registry_, opt);
    return {run.summary, run.params.at(0)};
  }

  Registry registry_;
  int rank_ = 0;
};

const nlohmann::json kSync = {
    {"type", "parameter_server"}, {"num_ps", 1}, {"mode", "sync"}, {"devices", "gpu_emulated"}};

TEST_F(PsGpus, SyncWorkersOnGpusTrainAsOneDeviceOnTheCpu) {
  const nlohmann::json optimizers[] = {{{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}},
                                       {{"type", "adam"}, {"lr", 0.01}}};
  for (const auto& opt : optimizers) {
    const std::string cell = opt.dump() + " on rank " + std::to_string(rank_);
    const Trained cpu = train(mlp({{"type", "one_device"}, {"devices", "cpu"}}, opt));
    const Trained ps = train(mlp(kSync, opt));
    // The server (rank 2, the host's third rank) takes no GPU: it would be
    // refused, its host having 2.
    if (server()) continue;
    EXPECT_EQ(ps.summary.device, "gpu_emulated:" + std::to_string(rank_)) << cell;
    EXPECT_LE(worst_equivalence_error(ps.params, cpu.params), 1.0) << cell;
    EXPECT_EQ(ps.summary.steps, cpu.summary.steps) << cell;
    EXPECT_EQ(ps.summary.staleness_max, 0) << cell;
  }
}

TEST_F(PsGpus, AsyncWorkersOnGpusTrain) {
  nlohmann::json doc =
      mlp({{"type", "parameter_server"}, {"num_ps", 1}, {"devices", "gpu_emulated"}},
          {{"type", "adam"}, {"lr", 0.01}});
  doc["train"]["epochs"] = 3;
  const Trained ps = train(doc);
  if (server()) return;
  EXPECT_EQ(ps.summary.device, "gpu_emulated:" + std::to_string(rank_));
  ASSERT_GE(ps.summary.step_losses.size(), 10u);
  // Each worker's own batches' losses: the last few well below the first few.
  const auto& l = ps.summary.step_losses;
  const double first = (l[0] + l[1] + l[2]) / 3, last = (l[l.size() - 1] + l[l.size() - 2]) / 2;
  EXPECT_LT(last, 0.8 * first) << "rank " << rank_;
}

// The chief restores the servers' values and optimizer state and gives
// them to every process: a worker on a GPU takes them into its host copy
// and onto its GPU. Resumed at step 4 of 8, the run ends as the
// uninterrupted one does.
TEST_F(PsGpus, AResumedRunEndsAsAnUninterruptedOne) {
  const std::string dir = mpi_test::shared_temp_dir("baton_ps_gpus");
  ASSERT_FALSE(dir.empty());
  const auto steps = [&](int64_t n) {
    nlohmann::json doc = mlp(kSync, {{"type", "adam"}, {"lr", 0.01}});
    doc["train"].erase("epochs");
    doc["train"]["steps"] = n;
    return doc;
  };
  const Trained whole = train(steps(8));
  (void)train(steps(4), dir);
  const Trained resumed = train(steps(8), dir, true);
  if (!server()) {
    EXPECT_EQ(resumed.summary.start_step, 4) << "rank " << rank_;
    EXPECT_LE(worst_equivalence_error(resumed.params, whole.params), 1.0) << "rank " << rank_;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank_ == 0) fs::remove_all(dir);
}

}  // namespace
}  // namespace baton
