// MultiWorkerMirroredStrategy over real MPI ranks: with the same seed and
// global batch, N ranks end with the same parameters as one replica (within
// 1e-4 + 1e-3 |x|: only the order of gradient sums differs), and every rank
// holds exactly the same parameters. Run by ctest under mpiexec -n 2, 3, 4.
#include <baton/comm/mpi.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/trainer.h>
#include <gtest/gtest.h>

#include "../engine/strategy_test_config.h"

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>

namespace baton {
namespace {

nlohmann::json doc(const nlohmann::json& strategy, const nlohmann::json& optimizer, int64_t batch) {
  return equivalence_config(strategy, optimizer, batch);
}

std::vector<float> train(const nlohmann::json& d, const Registry& registry, TrainSummary* out) {
  RunConfig cfg = parse_run_config(d, "mwm.json");
  Telemetry t;
  TrainOptions opt;
  opt.run_id = "mwm";
  Trainer trainer(cfg, registry, t, opt);
  *out = trainer.run();
  std::vector<float> flat;
  for (Param* p : trainer.model(0).params()) {
    flat.insert(flat.end(), p->value.data(), p->value.data() + p->value.numel());
  }
  return flat;
}

TEST(MultiWorkerMirrored, RanksMatchOneDeviceAndEachOther) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const nlohmann::json optimizers[] = {{{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}},
                                       {{"type", "adam"}, {"lr", 0.01}}};
  for (const auto& opt : optimizers) {
    for (int64_t batch : {32, 30}) {
      for (const char* algorithm : {"native", "ring", "hierarchical"}) {
        TrainSummary one_s, many_s;
        const auto one = train(doc({{"type", "one_device"}}, opt, batch), registry, &one_s);
        const auto many =
            train(doc({{"type", "multi_worker_mirrored"},
                       {"allreduce", {{"algorithm", algorithm}, {"bucket_mb", 0.0005}}}},
                      opt, batch),
                  registry, &many_s);
        ASSERT_EQ(one.size(), many.size());
        EXPECT_EQ(one_s.steps, many_s.steps);
        double worst = 0;
        for (size_t i = 0; i < one.size(); ++i) {
          worst = std::max(worst, std::fabs(many[i] - one[i]) / (1e-4 + 1e-3 * std::fabs(one[i])));
        }
        EXPECT_LE(worst, 1.0) << algorithm << " batch " << batch << " " << opt.dump();
        // Every rank holds the same bits as rank 0.
        std::vector<float> root = many;
        MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
        EXPECT_EQ(root, many) << "rank " << rank << " of " << size << " drifted (" << algorithm
                              << ")";
        // The step losses are the global batch's, the same on every rank.
        ASSERT_EQ(one_s.step_losses.size(), many_s.step_losses.size());
        for (size_t i = 0; i < one_s.step_losses.size(); ++i) {
          EXPECT_NEAR(many_s.step_losses[i], one_s.step_losses[i],
                      1e-4 * (1 + one_s.step_losses[i]));
        }
      }
    }
  }
}

// Dropout over ranks (and threads in them): each row's mask follows its
// place in the global batch, so the job still trains as one device does.
TEST(MultiWorkerMirrored, DropoutMatchesOneDevice) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}};
  nlohmann::json one_doc = doc({{"type", "one_device"}}, sgd, 30);
  one_doc["model"]["dropout"] = 0.3;
  TrainSummary one_s, many_s;
  const auto one = train(one_doc, registry, &one_s);
  for (int k : {1, 2}) {
    nlohmann::json d = doc({{"type", "multi_worker_mirrored"},
                            {"replicas_per_worker", k},
                            {"allreduce", {{"algorithm", "ring"}, {"bucket_mb", 0.0005}}}},
                           sgd, 30);
    d["model"]["dropout"] = 0.3;
    const auto many = train(d, registry, &many_s);
    double worst = 0;
    for (size_t i = 0; i < one.size(); ++i) {
      worst = std::max(worst, std::fabs(many[i] - one[i]) / (1e-4 + 1e-3 * std::fabs(one[i])));
    }
    EXPECT_LE(worst, 1.0) << "dropout, " << k << " replica(s) per worker";
  }
}

// The chief's parameters reach every rank before the first step: a rank
// that starts elsewhere (here: nudged) ends with the same bits as rank 0.
// --resume with no shared file system: every rank has a checkpoint
// directory of its own and only the chief's holds checkpoints (only the
// chief writes them). The chief reads the newest, every rank resumes at its
// step with its state, and the run ends exactly where the uninterrupted one
// does (the old code had rank 1 start again from step 0).
TEST(MultiWorkerMirrored, ResumeNeedsOnlyTheChiefsCheckpoints) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  nlohmann::json d = doc({{"type", "multi_worker_mirrored"}, {"replicas_per_worker", 2}},
                         {{"type", "adam"}, {"lr", 0.01}}, 30);
  d["model"]["dropout"] = 0.2;
  d["checkpoint"] = {{"every_epoch", false}};
  const RunConfig cfg = parse_run_config(d, "mwm.json");
  const auto run = [&](TrainOptions opt, int64_t stop_at, TrainSummary* out) {
    Telemetry t;
    std::atomic<bool> stop{false};
    t.add(std::make_shared<CallbackSink>([&](const Event& e) {
      const auto* s = std::get_if<StepEvent>(&e);
      if (s != nullptr && s->step == stop_at) stop = true;
    }));
    opt.stop = &stop;
    Trainer trainer(cfg, registry, t, opt);
    *out = trainer.run();
    std::vector<float> flat;
    for (Param* p : trainer.model(1).params())
      flat.insert(flat.end(), p->value.data(), p->value.data() + p->value.numel());
    return flat;
  };
  const std::string base = "/tmp/baton_mwm_resume_" + std::to_string(::getppid());
  // Rank r's own directory: nothing shared between the ranks.
  const std::string mine = base + "/rank" + std::to_string(rank);
  std::filesystem::remove_all(mine);
  TrainOptions full_opt;
  full_opt.run_id = "full";
  TrainSummary full_s, part_s, rest_s;
  const auto full = run(full_opt, -1, &full_s);

  TrainOptions first;
  first.run_id = "part";
  first.checkpoint_dir = mine;
  run(first, 5, &part_s);
  ASSERT_EQ(part_s.status, "interrupted");
  const int64_t stopped_at = part_s.steps;
  ASSERT_GT(stopped_at, 0);
  bool has_checkpoint = std::filesystem::exists(mine) && !std::filesystem::is_empty(mine);
  EXPECT_EQ(has_checkpoint, rank == 0) << "only the chief writes checkpoints";

  TrainOptions second = first;
  second.resume = true;
  const auto rest = run(second, -1, &rest_s);
  EXPECT_EQ(rest_s.status, "completed");
  EXPECT_EQ(rest_s.start_step, stopped_at) << "rank " << rank << " did not resume with the chief";
  EXPECT_EQ(rest_s.steps, full_s.steps);
  ASSERT_EQ(rest.size(), full.size());
  double worst = 0;
  for (size_t i = 0; i < full.size(); ++i) {
    worst = std::max(worst, std::fabs(rest[i] - full[i]) / (1e-5 + 1e-4 * std::fabs(full[i])));
  }
  EXPECT_LE(worst, 1.0) << "the resumed run left the uninterrupted one's path (rank " << rank
                        << ")";
  MPI_Barrier(MPI_COMM_WORLD);
  std::filesystem::remove_all(mine);
}

TEST(MultiWorkerMirrored, TheChiefsStateIsBroadcastToEveryRank) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  RunConfig cfg =
      parse_run_config(doc({{"type", "multi_worker_mirrored"}, {"replicas_per_worker", 2}},
                           {{"type", "sgd"}, {"lr", 0.05}}, 32),
                       "mwm.json");
  Telemetry t;
  std::vector<StepEvent> steps;
  t.add(std::make_shared<CallbackSink>([&](const Event& e) {
    if (const auto* s = std::get_if<StepEvent>(&e)) steps.push_back(*s);
  }));
  TrainOptions opt;
  opt.run_id = "mwm-bcast";
  Trainer trainer(cfg, registry, t, opt);
  if (rank != 0) {
    for (Param* p : trainer.model(1).params()) p->value[0] += 0.25f * static_cast<float>(rank);
  }
  ASSERT_EQ(trainer.run().status, "completed");
  std::vector<float> mine;
  for (Param* p : trainer.model(1).params())
    mine.insert(mine.end(), p->value.data(), p->value.data() + p->value.numel());
  std::vector<float> root = mine;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  EXPECT_EQ(root, mine) << "rank " << rank << " kept its own start";
  // Step events carry the process's rank and its first global replica.
  ASSERT_FALSE(steps.empty());
  for (const StepEvent& e : steps) {
    EXPECT_EQ(e.rank, rank);
    EXPECT_EQ(e.replica, 2 * rank);
    EXPECT_EQ(e.local_replicas, 2);
    EXPECT_GT(e.rank_samples_per_s, 0.0);
    // Each process holds its share of the global batch.
    EXPECT_LT(e.rank_samples_per_s, e.samples_per_s);
  }
}

// The equivalence matrix over processes: ranks (mpiexec -n 2, 3, 4) x
// replicas per rank (1 to 3) x SGD and Adam x dropout and SyncBatchNorm x
// an even and an uneven global batch: the job trains as one device.
TEST(MultiWorkerMirrored, EquivalenceMatrix) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const nlohmann::json optimizers[] = {{{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}},
                                       {{"type", "adam"}, {"lr", 0.01}}};
  for (const auto& opt : optimizers) {
    for (const char* norm : {static_cast<const char*>(nullptr), "syncbatchnorm"}) {
      // Not Adam with SyncBatchNorm: see Strategies.EquivalenceMatrix (the
      // bias before a norm has a zero true gradient; Adam amplifies noise).
      if (norm != nullptr && opt["type"] == "adam") continue;
      for (int64_t batch : {36, 35}) {
        nlohmann::json one = equivalence_config({{"type", "one_device"}}, opt, batch, norm);
        one["model"]["dropout"] = norm == nullptr ? 0.25 : 0.0;
        one["train"]["epochs"] = 1;
        TrainSummary one_s, many_s;
        const auto ref = train(one, registry, &one_s);
        for (int k : {1, 2, 3}) {
          nlohmann::json d =
              equivalence_config({{"type", "multi_worker_mirrored"},
                                  {"replicas_per_worker", k},
                                  {"allreduce", {{"algorithm", "ring"}, {"bucket_mb", 0.0005}}}},
                                 opt, batch, norm);
          d["model"]["dropout"] = one["model"]["dropout"];
          d["train"]["epochs"] = 1;
          const auto many = train(d, registry, &many_s);
          double worst = 0;
          for (size_t i = 0; i < ref.size(); ++i) {
            worst =
                std::max(worst, std::fabs(many[i] - ref[i]) / (1e-4 + 1e-3 * std::fabs(ref[i])));
          }
          EXPECT_LE(worst, 1.0) << "k " << k << (norm ? " syncbatchnorm" : " dropout") << " batch "
                                << batch << " " << opt.dump();
          EXPECT_EQ(many_s.steps, one_s.steps);
        }
      }
    }
  }
}

// The language model over ranks: a tiny GPT with dropout, 1 and 2
// replicas per rank, trains as one device.
TEST(MultiWorkerMirrored, GptMatchesOneDevice) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const nlohmann::json adamw = {{"type", "adamw"}, {"lr", 0.01}, {"weight_decay", 0.1}};
  for (int64_t batch : {12, 11}) {
    TrainSummary one_s, many_s;
    const auto ref = train(gpt_equivalence_config({{"type", "one_device"}}, adamw, batch, 0.2),
                           registry, &one_s);
    for (int k : {1, 2}) {
      const auto many = train(gpt_equivalence_config({{"type", "multi_worker_mirrored"},
                                                      {"replicas_per_worker", k},
                                                      {"allreduce", {{"algorithm", "ring"}}}},
                                                     adamw, batch, 0.2),
                              registry, &many_s);
      ASSERT_EQ(many.size(), ref.size());
      const double worst = worst_equivalence_error(many, ref);
      EXPECT_LE(worst, 1.0) << "k " << k << " batch " << batch;
      EXPECT_EQ(many_s.steps, one_s.steps);
    }
  }
}

// The CNN over ranks, with dropout and SyncBatchNorm: as one device.
TEST(MultiWorkerMirrored, CnnMatchesOneDevice) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}};
  for (const char* norm : {static_cast<const char*>(nullptr), "syncbatchnorm"}) {
    TrainSummary one_s, many_s;
    const auto ref = train(cnn_equivalence_config({{"type", "one_device"}}, sgd, 24, 0.25, norm),
                           registry, &one_s);
    const auto many = train(
        cnn_equivalence_config({{"type", "multi_worker_mirrored"}, {"replicas_per_worker", 2}}, sgd,
                               24, 0.25, norm),
        registry, &many_s);
    ASSERT_EQ(many.size(), ref.size());
    const double worst = worst_equivalence_error(many, ref);
    EXPECT_LE(worst, 1.0) << (norm ? "syncbatchnorm" : "no norm");
  }
}

// Several replicas (threads) per rank: the replicas of the whole job, in
// threads and processes, still equal one device; every replica on every
// rank holds the same bits; and overlap changes no bit.
TEST(MultiWorkerMirrored, ReplicasPerWorkerMatchOneDevice) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const nlohmann::json adam = {{"type", "adam"}, {"lr", 0.01}};
  TrainSummary one_s;
  const auto one = train(doc({{"type", "one_device"}}, adam, 30), registry, &one_s);
  for (int k : {2, 3}) {
    for (const char* algorithm : {"native", "ring"}) {
      std::vector<std::vector<float>> per_overlap[2];
      for (bool overlap : {false, true}) {
        nlohmann::json st = {
            {"type", "multi_worker_mirrored"},
            {"replicas_per_worker", k},
            {"allreduce", {{"algorithm", algorithm}, {"bucket_mb", 0.0005}, {"overlap", overlap}}}};
        RunConfig cfg = parse_run_config(doc(st, adam, 30), "mwm.json");
        Telemetry t;
        TrainOptions opt;
        opt.run_id = "mwm-k";
        Trainer trainer(cfg, registry, t, opt);
        ASSERT_EQ(trainer.strategy().num_replicas(), size * k);
        ASSERT_EQ(trainer.strategy().local_replicas(), k);
        EXPECT_EQ(trainer.strategy().overlaps_backward(), overlap);
        const TrainSummary s = trainer.run();
        EXPECT_EQ(s.steps, one_s.steps);
        for (int r = 0; r < k; ++r) {
          std::vector<float> flat;
          for (Param* p : trainer.model(r).params()) {
            flat.insert(flat.end(), p->value.data(), p->value.data() + p->value.numel());
          }
          per_overlap[overlap].push_back(std::move(flat));
        }
        const auto& mine = per_overlap[overlap][0];
        double worst = 0;
        for (size_t i = 0; i < one.size(); ++i) {
          worst = std::max(worst, std::fabs(mine[i] - one[i]) / (1e-4 + 1e-3 * std::fabs(one[i])));
        }
        EXPECT_LE(worst, 1.0) << "k " << k << " " << algorithm << " overlap " << overlap;
        for (int r = 1; r < k; ++r) EXPECT_EQ(per_overlap[overlap][r], mine) << "local " << r;
        std::vector<float> root = mine;
        MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
        EXPECT_EQ(root, mine) << "k " << k << " " << algorithm << ": drifted from rank 0";
      }
      EXPECT_EQ(per_overlap[1], per_overlap[0]) << "k " << k << " " << algorithm;
    }
  }
}

}  // namespace
}  // namespace baton
