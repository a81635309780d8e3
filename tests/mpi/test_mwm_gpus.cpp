// multi_worker_mirrored on GPUs (issue 31): one rank per GPU, each on the
// GPU of its place on its host, NCCL's unique id sent over MPI and the
// gradients summed over NCCL on the devices. Here every process sees 2
// emulated GPUs and the NCCL stand-in joins the ranks of the two processes
// (nccl_wire.h). Run by ctest under mpiexec -n 2: the equivalence matrix's
// multi-process GPU row - the ranks train as one_device on the CPU (dropout
// included, the batch split unevenly), every rank holds the same bits, and
// the buckets' allreduce during backward and after it gives the same bits;
// SyncBatchNorm's statistics go between the ranks' GPUs.
#include <baton/core/error.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/trainer.h>
#include <gtest/gtest.h>

#include "../engine/strategy_test_config.h"
#include "../engine/trained_run.h"

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
// loads): rank r of each host takes gpu_emulated:r.
const bool kSet = [] { return setenv("BATON_SIMT_DEVICES", "2", 0) == 0; }();

nlohmann::json mlp(const nlohmann::json& strategy, const nlohmann::json& optimizer) {
  nlohmann::json doc = equivalence_config(strategy, optimizer, 30);
  doc["model"]["dropout"] = 0.25;
  doc["train"]["epochs"] = 1;
  doc["data"]["validation_split"] = 0.2;
  doc["data"]["shard_policy"] = "data";
  if (strategy.value("type", "") == "multi_worker_mirrored") {
    doc["strategy"]["drift_check_steps"] = 3;
  }
  return doc;
}

struct Trained {
  TrainSummary summary;
  std::vector<float> params;
};

class MwmGpus : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kSet);
    if (!fs::exists(fs::path(BATON_GPU_LIBRARY_DIR) / "baton_cuda_emu.so")) {
      GTEST_SKIP() << "built without the GPU emulator (no CUDA toolkit headers)";
    }
    registry_.load_plugin_dir(BATON_PLUGIN_DIR);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  }

  Trained train(const nlohmann::json& doc) {
    TrainOptions opt;
    opt.run_id = "mwm_gpus";
    opt.gpu_library_dir = BATON_GPU_LIBRARY_DIR;
    TrainedRun run = train_run(doc, "mwm_gpus.json", registry_, opt);
    return {run.summary, run.params.at(0)};
  }

  Registry registry_;
  int rank_ = 0;
};

TEST_F(MwmGpus, RanksOnTheirGpusTrainAsTheCpuAndHoldTheSameBits) {
  const nlohmann::json gpus = {{"type", "multi_worker_mirrored"}, {"devices", "gpu_emulated"}};
  const nlohmann::json optimizers[] = {{{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}},
                                       {{"type", "adam"}, {"lr", 0.01}}};
  for (const auto& opt : optimizers) {
    const std::string cell = opt.dump() + " on rank " + std::to_string(rank_);
    const Trained cpu = train(mlp({{"type", "one_device"}, {"devices", "cpu"}}, opt));
    const Trained many = train(mlp(gpus, opt));
    EXPECT_EQ(many.summary.device, "gpu_emulated:" + std::to_string(rank_)) << cell;
    EXPECT_EQ(many.summary.communication, "nccl/native") << cell;
    EXPECT_LE(worst_equivalence_error(many.params, cpu.params), 1.0) << cell;
    // Every rank holds the same bits as rank 0.
    std::vector<float> root = many.params;
    MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
    EXPECT_EQ(root, many.params) << cell;
    ASSERT_EQ(many.summary.step_losses.size(), cpu.summary.step_losses.size()) << cell;
    for (size_t i = 0; i < cpu.summary.step_losses.size(); ++i) {
      EXPECT_NEAR(many.summary.step_losses[i], cpu.summary.step_losses[i], 1e-4) << cell;
    }
    EXPECT_NEAR(many.summary.val_loss, cpu.summary.val_loss, 1e-4) << cell;
    nlohmann::json after = mlp(gpus, opt);
    after["strategy"]["allreduce"] = {{"overlap", false}};
    EXPECT_EQ(train(after).params, many.params) << cell << ": overlap off";
  }
}

// SyncBatchNorm between the ranks' GPUs: the statistics summed over NCCL
// between the processes, so the two ranks normalise over the global batch
// as one device does with BatchNorm.
TEST_F(MwmGpus, SyncBatchNormSumsOverTheRanksGpus) {
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}};
  nlohmann::json one = mlp({{"type", "one_device"}, {"devices", "cpu"}}, sgd);
  one["model"]["norm"] = "batchnorm";
  nlohmann::json many = mlp({{"type", "multi_worker_mirrored"}, {"devices", "gpu_emulated"}}, sgd);
  many["model"]["norm"] = "syncbatchnorm";
  const Trained a = train(one), b = train(many);
  EXPECT_LE(worst_equivalence_error(b.params, a.params), 1.0) << "rank " << rank_;
  std::vector<float> root = b.params;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  EXPECT_EQ(root, b.params) << "rank " << rank_;
}

// strategy.sharding "optimizer" across the ranks' GPUs: the pieces
// reduce-scattered and all-gathered over NCCL between the processes; it
// trains as "none" (within the bound), both ranks the same bits.
TEST_F(MwmGpus, TheOptimizerShardedOverTheRanksGpusTrainsAsNone) {
  const nlohmann::json adam = {{"type", "adam"}, {"lr", 0.01}};
  const nlohmann::json gpus = {{"type", "multi_worker_mirrored"}, {"devices", "gpu_emulated"}};
  nlohmann::json sharded = gpus;
  sharded["sharding"] = "optimizer";
  const Trained a = train(mlp(gpus, adam)), b = train(mlp(sharded, adam));
  EXPECT_LE(worst_equivalence_error(b.params, a.params), 1.0) << "rank " << rank_;
  std::vector<float> root = b.params;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  EXPECT_EQ(root, b.params) << "rank " << rank_;
}

TEST_F(MwmGpus, WhatGpusCannotDoIsRefusedNamingTheKey) {
  const auto refused = [&](const nlohmann::json& strategy, const std::string& key,
                           const std::string& why) {
    try {
      train(mlp(strategy, {{"type", "sgd"}, {"lr", 0.05}}));
      ADD_FAILURE() << key << " accepted: " << strategy.dump();
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused(
      {{"type", "multi_worker_mirrored"}, {"devices", "gpu_emulated"}, {"replicas_per_worker", 2}},
      "strategy.replicas_per_worker", "one rank on one GPU");
  refused({{"type", "multi_worker_mirrored"},
           {"devices", "gpu_emulated"},
           {"allreduce", {{"backend", "mpi"}}}},
          "strategy.allreduce.backend", "use \"nccl\"");
  refused({{"type", "multi_worker_mirrored"}, {"allreduce", {{"backend", "nccl"}}}},
          "strategy.allreduce.backend", "strategy.devices \"gpu\"");
  refused({{"type", "multi_worker_mirrored"}, {"devices", "gpu:1"}}, "strategy.devices",
          "one rank per GPU");
}

}  // namespace
}  // namespace baton
