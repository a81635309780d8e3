// ParameterServerStrategy over real MPI ranks (the last num_ps ranks are
// servers). Run by ctest under mpiexec -n 3 and -n 4:
//   - async training on digits (resources/examples/parameter_server.json)
//     reaches >= 90% validation accuracy on the chief, with 1 and 2 servers;
//   - sync mode ends with the same parameters as one device with the whole
//     global batch (within 1e-4 + 1e-3 |x|), with 1 and 2 servers;
//   - num_ps leaving no worker is an InputError naming strategy.num_ps;
//   - syncbatchnorm is refused (its workers have no link for the statistics);
//   - sync mode with clip_global_norm clips by the norm over all shards (as
//     one device clips the whole gradient);
//   - async with strategy.max_staleness and one worker slowed: staleness
//     reaches the bound and never passes it (unbounded, it does pass it).
#include <baton/comm/mpi.h>
#include <baton/core/error.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/trainer.h>
#include <gtest/gtest.h>

#include "../engine/strategy_test_config.h"

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <string>
#include <thread>

namespace baton {
namespace {

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

nlohmann::json doc(const nlohmann::json& strategy, const nlohmann::json& optimizer, int64_t batch,
                   const char* norm = nullptr) {
  return equivalence_config(strategy, optimizer, batch, norm);
}

// Trains `cfg` (with `sink` watching, when given); the final parameters.
std::vector<float> train(const RunConfig& cfg, const Registry& registry, TrainSummary* out,
                         std::shared_ptr<TelemetrySink> sink = nullptr) {
  Telemetry t;
  if (sink) t.add(std::move(sink));
  TrainOptions opt;
  opt.run_id = "ps";
  Trainer trainer(cfg, registry, t, opt);
  *out = trainer.run();
  std::vector<float> flat;
  for (Param* p : trainer.model(0).params()) {
    flat.insert(flat.end(), p->value.data(), p->value.data() + p->value.numel());
  }
  return flat;
}

// The InputError message constructing a Trainer for `cfg` gives ("" when it
// is accepted).
std::string refusal(const RunConfig& cfg, const Registry& registry) {
  Telemetry t;
  TrainOptions o;
  o.run_id = "ps";
  try {
    const Trainer trainer(cfg, registry, t, o);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// Workers of a job with `num_ps` servers; -1 when the job is too small.
int workers(int num_ps) { return world_size() - num_ps; }

TEST(ParameterServer, AsyncDigitsReaches90Percent) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const int num_ps = world_size() >= 4 ? 2 : 1;
  ASSERT_GE(workers(num_ps), 1);
  RunConfig cfg =
      load_run_config(std::string(BATON_SOURCE_DIR) + "/resources/examples/parameter_server.json",
                      {"strategy.num_ps=" + std::to_string(num_ps)});
  TrainSummary s;
  (void)train(cfg, registry, &s);
  EXPECT_EQ(s.status, "completed");
  if (world_rank() < workers(num_ps)) {
    EXPECT_TRUE(s.has_staleness);
    // A push can be behind at most every other worker's pushes of the run.
    EXPECT_LE(s.staleness_mean, static_cast<double>(s.staleness_max));
    EXPECT_LE(s.staleness_max, s.steps * (workers(num_ps) - 1));
  }
  if (world_rank() == 0) {
    ASSERT_TRUE(s.has_validation);
    EXPECT_GE(s.val_accuracy, 0.90) << num_ps << " ps, " << workers(num_ps) << " workers";
    std::printf("async ps: %d workers, %d ps: val accuracy %.4f, staleness mean %.2f max %lld\n",
                workers(num_ps), num_ps, s.val_accuracy, s.staleness_mean,
                static_cast<long long>(s.staleness_max));
  }
}

TEST(ParameterServer, SyncMatchesOneDevice) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const nlohmann::json optimizers[] = {{{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}},
                                       {{"type", "adam"}, {"lr", 0.01}}};
  for (int num_ps = 1; num_ps <= 2 && workers(num_ps) >= 1; ++num_ps) {
    for (const auto& opt : optimizers) {
      for (int64_t batch : {32, 30}) {
        for (double dropout : {0.0, 0.25}) {  // masks keyed on the global row
          TrainSummary one_s, ps_s;
          nlohmann::json one_doc = doc({{"type", "one_device"}}, opt, batch);
          one_doc["model"]["dropout"] = dropout;
          nlohmann::json ps_doc =
              doc({{"type", "parameter_server"}, {"num_ps", num_ps}, {"mode", "sync"}}, opt, batch);
          ps_doc["model"]["dropout"] = dropout;
          const auto one = train(parse_run_config(one_doc, "ps.json"), registry, &one_s);
          const auto ps = train(parse_run_config(ps_doc, "ps.json"), registry, &ps_s);
          if (world_rank() >= workers(num_ps)) continue;  // a server: nothing trained here
          ASSERT_EQ(one.size(), ps.size());
          EXPECT_EQ(one_s.steps, ps_s.steps);
          double worst = 0;
          for (size_t i = 0; i < one.size(); ++i) {
            worst = std::max(worst, std::fabs(ps[i] - one[i]) / (1e-4 + 1e-3 * std::fabs(one[i])));
          }
          EXPECT_LE(worst, 1.0) << num_ps << " ps, batch " << batch << " dropout " << dropout << " "
                                << opt.dump();
          // Sync: every update is applied to the values the worker pulled.
          EXPECT_EQ(ps_s.staleness_max, 0);
        }
      }
    }
  }
}

// The language model under parameter servers: sync mode with dropout
// trains a tiny GPT as one device does; async mode trains it (the loss
// falls), with 1 and 2 servers.
TEST(ParameterServer, GptSyncMatchesOneDeviceAndAsyncTrains) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const nlohmann::json adamw = {{"type", "adamw"}, {"lr", 0.01}, {"weight_decay", 0.1}};
  for (int num_ps = 1; num_ps <= 2 && workers(num_ps) >= 1; ++num_ps) {
    TrainSummary one_s, ps_s, async_s;
    const auto one =
        train(parse_run_config(gpt_equivalence_config({{"type", "one_device"}}, adamw, 12, 0.2),
                               "ps.json"),
              registry, &one_s);
    const auto ps = train(
        parse_run_config(gpt_equivalence_config(
                             {{"type", "parameter_server"}, {"num_ps", num_ps}, {"mode", "sync"}},
                             adamw, 12, 0.2),
                         "ps.json"),
        registry, &ps_s);
    nlohmann::json async_doc = gpt_equivalence_config(
        {{"type", "parameter_server"}, {"num_ps", num_ps}, {"mode", "async"}}, adamw, 12, 0.0);
    async_doc["train"]["steps"] = 30;
    (void)train(parse_run_config(async_doc, "ps.json"), registry, &async_s);
    if (world_rank() >= workers(num_ps)) continue;  // a server: nothing trained here
    ASSERT_EQ(one.size(), ps.size());
    const double worst = worst_equivalence_error(ps, one);
    EXPECT_LE(worst, 1.0) << num_ps << " ps";
    ASSERT_GE(async_s.step_losses.size(), 20u);
    EXPECT_LT(async_s.step_losses.back(), async_s.step_losses.front() - 1.0)
        << "async GPT did not learn (" << num_ps << " ps)";
  }
}

// The CNN under sync parameter servers, with dropout: as one device.
TEST(ParameterServer, CnnSyncMatchesOneDevice) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}};
  for (int num_ps = 1; num_ps <= 2 && workers(num_ps) >= 1; ++num_ps) {
    TrainSummary one_s, ps_s;
    const auto one =
        train(parse_run_config(cnn_equivalence_config({{"type", "one_device"}}, sgd, 24, 0.25),
                               "ps.json"),
              registry, &one_s);
    const auto ps = train(
        parse_run_config(cnn_equivalence_config(
                             {{"type", "parameter_server"}, {"num_ps", num_ps}, {"mode", "sync"}},
                             sgd, 24, 0.25),
                         "ps.json"),
        registry, &ps_s);
    if (world_rank() >= workers(num_ps)) continue;
    ASSERT_EQ(one.size(), ps.size());
    const double worst = worst_equivalence_error(ps, one);
    EXPECT_LE(worst, 1.0) << num_ps << " ps";
  }
}

// Sync clipping is by the norm of the global batch's gradient, over every
// shard: the same as one device's (it used to clip each worker's share at
// the global threshold, so a clipped step differed from one device's).
TEST(ParameterServer, SyncClipsByTheNormOverAllShards) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.2}, {"clip_global_norm", 0.05}};
  for (int num_ps = 1; num_ps <= 2 && workers(num_ps) >= 2; ++num_ps) {
    nlohmann::json one_doc = doc({{"type", "one_device"}}, sgd, 32);
    nlohmann::json ps_doc =
        doc({{"type", "parameter_server"}, {"num_ps", num_ps}, {"mode", "sync"}}, sgd, 32);
    double one_norm = -1, ps_norm = -1;
    auto first_norm = [](double* out) {
      return std::make_shared<CallbackSink>([out](const Event& e) {
        const auto* s = std::get_if<StepEvent>(&e);
        if (s != nullptr && s->step == 1) *out = s->grad_norm;
      });
    };
    one_doc["train"]["log_every_steps"] = 1;
    ps_doc["train"]["log_every_steps"] = 1;
    TrainSummary one_s, ps_s;
    const auto one =
        train(parse_run_config(one_doc, "ps.json"), registry, &one_s, first_norm(&one_norm));
    const auto ps =
        train(parse_run_config(ps_doc, "ps.json"), registry, &ps_s, first_norm(&ps_norm));
    if (world_rank() >= workers(num_ps)) continue;
    ASSERT_GT(one_norm, 0.05) << "the threshold does not clip: the test proves nothing";
    // Every worker reports the global norm the servers agreed on.
    EXPECT_NEAR(ps_norm, one_norm, 1e-4 * one_norm) << num_ps << " ps";
    ASSERT_EQ(one.size(), ps.size());
    const double worst = worst_equivalence_error(ps, one);
    EXPECT_LE(worst, 1.0) << num_ps << " ps: sync clipping differs from one device's";
  }
}

// Bounded staleness: worker 1 sleeps after every step (its telemetry sink
// runs on its training thread), worker 0 runs flat out. Unbounded, worker
// 1's pushes fall many versions behind; with max_staleness S every update
// is at most S stale, and the slow worker makes some reach it.
TEST(ParameterServer, MaxStalenessBoundsASlowedWorker) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const int num_ps = world_size() - 2;  // 2 workers
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.05}};
  auto run = [&](int64_t bound) {
    nlohmann::json strategy = {{"type", "parameter_server"}, {"num_ps", num_ps}, {"mode", "async"}};
    if (bound >= 0) strategy["max_staleness"] = bound;
    nlohmann::json d = doc(strategy, sgd, 32);
    d["train"]["log_every_steps"] = 1;
    d["train"]["epochs"] = 3;
    Telemetry t;
    if (world_rank() == 1) {
      t.add(std::make_shared<CallbackSink>([](const Event& e) {
        if (std::holds_alternative<StepEvent>(e)) {
          std::this_thread::sleep_for(std::chrono::milliseconds(15));  // the slowed worker
        }
      }));
    }
    TrainOptions o;
    o.run_id = "stale";
    Trainer trainer(parse_run_config(d, "ps.json"), registry, t, o);
    return trainer.run();
  };
  const TrainSummary free_run = run(-1);
  if (world_rank() >= 2) {  // a server: every update it applied
    EXPECT_GT(free_run.staleness_max, 2) << "unbounded, the slowed worker should fall behind";
  }
  for (int64_t bound : {1, 2}) {
    const TrainSummary s = run(bound);
    EXPECT_EQ(s.status, "completed");
    if (world_rank() >= 2) {
      EXPECT_LE(s.staleness_max, bound) << "an update passed max_staleness " << bound;
      EXPECT_EQ(s.staleness_max, bound) << "the slowed worker never reached the bound";
    } else {
      EXPECT_LE(s.staleness_max, bound);
      if (world_rank() == 1) {
        EXPECT_GT(s.staleness_max, 0) << "the slow worker's pushes";
      }
    }
  }
}

TEST(ParameterServer, MaxStalenessBelowWorkersMinusOneIsAnInputError) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const int num_ps = world_size() - 2;  // 2 workers: the bound must be >= 1
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.05}};
  RunConfig cfg = parse_run_config(doc({{"type", "parameter_server"},
                                        {"num_ps", num_ps},
                                        {"mode", "async"},
                                        {"max_staleness", 0}},
                                       sgd, 32),
                                   "ps.json");
  const std::string why = refusal(cfg, registry);
  EXPECT_NE(why.find("ps.json: strategy.max_staleness: 0 is below workers - 1"), std::string::npos)
      << "max_staleness 0 with 2 workers: \"" << why << "\"";
  // In sync mode the key means nothing and is refused by the parser.
  try {
    parse_run_config(
        doc({{"type", "parameter_server"}, {"mode", "sync"}, {"max_staleness", 3}}, sgd, 32),
        "ps.json");
    ADD_FAILURE() << "max_staleness accepted in sync mode";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("strategy.max_staleness"), std::string::npos) << e.what();
  }
}

// Asynchronously each push is one optimizer step on that worker's own mean
// gradient (TF's definition): a worker's gradient norm at step 1 is one
// device's on the same 16 rows (it used to be half: scaled by the global
// batch of 32, then applied as a whole step).
TEST(ParameterServer, AsyncPushesAreTheWorkersMeanGradient) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const int num_ps = world_size() - 2;  // 2 workers
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.05}};
  const auto first_norm = [&](const nlohmann::json& d) {
    Telemetry t;
    double norm = -1;
    t.add(std::make_shared<CallbackSink>([&](const Event& e) {
      const auto* s = std::get_if<StepEvent>(&e);
      if (s != nullptr && s->step == 1) norm = s->grad_norm;
    }));
    TrainOptions opt;
    opt.run_id = "norm";
    Trainer trainer(parse_run_config(d, "ps.json"), registry, t, opt);
    trainer.run();
    return norm;
  };
  nlohmann::json one = doc({{"type", "one_device"}}, sgd, 16);
  one["train"]["log_every_steps"] = 1;
  nlohmann::json ps =
      doc({{"type", "parameter_server"}, {"num_ps", num_ps}, {"mode", "async"}}, sgd, 32);
  ps["train"]["log_every_steps"] = 1;
  const double want = first_norm(one);
  const double got = first_norm(ps);
  if (world_rank() == 0) {  // worker 0 reads the global batch's first 16 rows
    ASSERT_GT(want, 0.0);
    EXPECT_NEAR(got, want, 1e-5 * want) << "worker 0's first gradient is not its batch's mean";
  }
}

// With one worker, asynchronous training is one device's, exactly: every
// push is the step one device takes, the schedule over the server's updates.
TEST(ParameterServer, AsyncWithOneWorkerIsOneDeviceExactly) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const int num_ps = world_size() - 1;  // 1 worker
  const nlohmann::json adam = {{"type", "adam"}, {"lr", 0.01}};
  nlohmann::json one = doc({{"type", "one_device"}}, adam, 30);
  one["schedule"] = {{"type", "cosine"}, {"warmup_steps", 3}};
  nlohmann::json ps =
      doc({{"type", "parameter_server"}, {"num_ps", num_ps}, {"mode", "async"}}, adam, 30);
  ps["schedule"] = one["schedule"];
  TrainSummary one_s, ps_s;
  const auto a = train(parse_run_config(one, "ps.json"), registry, &one_s);
  const auto b = train(parse_run_config(ps, "ps.json"), registry, &ps_s);
  if (world_rank() != 0) return;  // a server
  EXPECT_EQ(ps_s.steps, one_s.steps);
  EXPECT_EQ(b, a) << "one async worker did not train as one device";
}

// The workers of a parameter server never talk to each other: SyncBatchNorm's
// statistics over the global batch cannot be had, and the run is refused
// (it used to train as per-worker BatchNorm without a word).
TEST(ParameterServer, SyncBatchNormIsRefusedNamingTheKey) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const nlohmann::json opt = {{"type", "sgd"}, {"lr", 0.05}};
  ASSERT_GE(workers(1), 2) << "needs 2 workers + 1 ps";
  RunConfig cfg = parse_run_config(
      doc({{"type", "parameter_server"}, {"num_ps", 1}}, opt, 32, "syncbatchnorm"), "ps.json");
  const std::string what = refusal(cfg, registry);
  EXPECT_NE(what.find("ps.json: model.norm: SyncBatchNorm"), std::string::npos)
      << "syncbatchnorm under parameter_server: \"" << what << "\"";
  EXPECT_NE(what.find("parameter_server"), std::string::npos) << what;
  // Plain BatchNorm (each worker's own rows) is what it is, and accepted.
  RunConfig bn = parse_run_config(
      doc({{"type", "parameter_server"}, {"num_ps", 1}}, opt, 32, "batchnorm"), "ps.json");
  EXPECT_EQ(refusal(bn, registry), "");
}

TEST(ParameterServer, NumPsLeavingNoWorkerIsAnInputError) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  const nlohmann::json opt = {{"type", "sgd"}, {"lr", 0.05}};
  for (int num_ps : {world_size(), world_size() + 3}) {
    RunConfig cfg = parse_run_config(
        doc({{"type", "parameter_server"}, {"num_ps", num_ps}}, opt, 32), "ps.json");
    const std::string why = refusal(cfg, registry);
    EXPECT_NE(why.find("strategy.num_ps"), std::string::npos)
        << "num_ps " << num_ps << ": \"" << why << "\"";
  }
  // Unknown keys (the allreduce block) and bad modes are refused by the parser.
  EXPECT_THROW(
      parse_run_config(
          doc({{"type", "parameter_server"}, {"allreduce", {{"algorithm", "ring"}}}}, opt, 32),
          "ps.json"),
      InputError);
  EXPECT_THROW(parse_run_config(doc({{"type", "parameter_server"}, {"mode", "eventual"}}, opt, 32),
                                "ps.json"),
               InputError);
  EXPECT_THROW(
      parse_run_config(doc({{"type", "parameter_server"}, {"num_ps", 0}}, opt, 32), "ps.json"),
      InputError);
}

}  // namespace
}  // namespace baton
