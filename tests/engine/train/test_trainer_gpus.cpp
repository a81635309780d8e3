// mirrored over several GPUs (issue 31): one replica on each listed GPU,
// each driven by its own thread, the flat gradient buffers summed over an
// NCCL group on the devices. Here 4 emulated GPUs and the emulator's NCCL
// stand-in (its rules: one rank per GPU, a communicator per device); on a
// GPU machine (BATON_TEST_GPU_DEVICE set: tests/gpu/run_gpu_checks.sh) the
// real GPUs, the cases needing more GPUs than there are skipped with the
// reason. The equivalence
// matrix's GPU row: mirrored on 1, 2 and 4 GPUs trains as one_device on a
// GPU and as the CPU, dropout included, with every replica identical.
#include <baton/core/error.h>
#include <baton/nn/gpu_library.h>
#include <baton/nn/gpu_peak.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/trainer.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "strategy_test_config.h"
#include "timeline_test_util.h"
#include "trained_run.h"

namespace baton {
namespace {

namespace fs = std::filesystem;

// Four emulated GPUs, unless the environment says otherwise (set before the
// emulator's library is loaded, which reads it once); the real GPUs where
// BATON_TEST_GPU_DEVICE is set (the device check: tests/gpu).
const bool kReal = [] {
  setenv("BATON_SIMT_DEVICES", "4", 0);
  const char* d = std::getenv("BATON_TEST_GPU_DEVICE");
  return d != nullptr && *d != '\0';
}();

// How many GPUs the tests may list, and their bounds: the emulator's
// products sum in the CPU's order (the equivalence bound, losses within
// 1e-4); a GPU's libraries in theirs (10 times the bound, 1e-3).
int gpus_here() {
  static const int n = [] {
    const fs::path lib =
        fs::path(BATON_GPU_LIBRARY_DIR) / (kReal ? "baton_cuda.so" : "baton_cuda_emu.so");
    if (!fs::exists(lib)) return 0;
    return GpuLibrary(lib.string()).device_count();
  }();
  return n;
}
double param_bound() { return kReal ? 10.0 : 1.0; }
double loss_bound() { return kReal ? 1e-3 : 1e-4; }

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

nlohmann::json gpu_list(int n) {
  nlohmann::json list = nlohmann::json::array();
  for (int i = 0; i < n; ++i)
    list.push_back((kReal ? "gpu:" : "gpu_emulated:") + std::to_string(i));
  return list;
}

std::string joined(int n) {
  std::string s;
  for (const auto& name : gpu_list(n)) s += (s.empty() ? "" : ",") + name.get<std::string>();
  return s;
}

#define REQUIRE_GPUS(n)                                                           \
  if (gpus_here() < (n)) {                                                        \
    GTEST_SKIP() << "needs " << (n) << " GPUs; this machine has " << gpus_here(); \
  }

using Trained = TrainedRun;

class TrainerGpus : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(fs::path(BATON_GPU_LIBRARY_DIR) / "baton_cuda_emu.so")) {
      GTEST_SKIP() << "built without the GPU emulator (no CUDA toolkit headers)";
    }
    registry_.load_plugin_dir(BATON_PLUGIN_DIR);
  }

  Trained train(const nlohmann::json& doc, std::vector<Event>* events = nullptr,
                bool timeline = false) {
    TrainOptions opt;
    opt.run_id = "gpus";
    opt.gpu_library_dir = BATON_GPU_LIBRARY_DIR;
    opt.timeline = timeline;
    return train_run(doc, "gpus.json", registry_, opt, events);
  }

  void expect_refused(const nlohmann::json& doc, const std::string& key, const std::string& why) {
    try {
      train(doc);
      ADD_FAILURE() << key << " accepted: " << doc["strategy"].dump();
    } catch (const InputError& e) {
      EXPECT_TRUE(has(e.what(), key)) << e.what();
      EXPECT_TRUE(has(e.what(), why)) << e.what();
    }
  }

  Registry registry_;
};

// The MLP of the CPU's equivalence matrix with dropout, a batch that 4
// replicas split unevenly (30: 8, 8, 7, 7), a held-out share evaluated on
// every GPU, and the replicas' checksums compared every 3 steps.
nlohmann::json mlp(const nlohmann::json& strategy, const nlohmann::json& optimizer) {
  nlohmann::json doc = equivalence_config(strategy, optimizer, 30);
  doc["model"]["dropout"] = 0.25;
  doc["train"]["epochs"] = 1;
  doc["data"]["validation_split"] = 0.2;
  if (strategy.value("type", "") == "mirrored") {
    doc["data"]["shard_policy"] = "data";
    doc["strategy"]["drift_check_steps"] = 3;
  }
  return doc;
}

class MirroredGpus : public TrainerGpus, public ::testing::WithParamInterface<int> {};

TEST_P(MirroredGpus, TrainsAsOneDeviceOnAGpuAndAsTheCpu) {
  const int n = GetParam();
  REQUIRE_GPUS(n);
  const nlohmann::json optimizers[] = {{{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}},
                                       {{"type", "adam"}, {"lr", 0.01}}};
  for (const auto& opt : optimizers) {
    const std::string cell = opt.dump() + " on " + std::to_string(n) + " GPU(s)";
    const Trained cpu = train(mlp({{"type", "one_device"}, {"devices", "cpu"}}, opt));
    const Trained gpu = train(mlp({{"type", "one_device"}, {"devices", gpu_list(1)}}, opt));
    ASSERT_EQ(gpu.summary.device, joined(1));
    EXPECT_LE(worst_equivalence_error(gpu.params[0], cpu.params[0]), param_bound()) << cell;
    const Trained many = train(mlp({{"type", "mirrored"}, {"devices", gpu_list(n)}}, opt));
    ASSERT_EQ(many.params.size(), static_cast<size_t>(n)) << cell;
    EXPECT_EQ(many.summary.device, joined(n)) << cell;
    EXPECT_EQ(many.summary.communication, "nccl/native") << cell;
    EXPECT_LE(worst_equivalence_error(many.params[0], cpu.params[0]), param_bound()) << cell;
    EXPECT_LE(worst_equivalence_error(many.params[0], gpu.params[0]), param_bound()) << cell;
    for (int r = 1; r < n; ++r) EXPECT_EQ(many.params[r], many.params[0]) << cell << " " << r;
    // The same losses, step by step, and the same validation.
    ASSERT_EQ(many.summary.step_losses.size(), cpu.summary.step_losses.size()) << cell;
    for (size_t i = 0; i < cpu.summary.step_losses.size(); ++i) {
      EXPECT_NEAR(many.summary.step_losses[i], cpu.summary.step_losses[i], loss_bound()) << cell;
    }
    EXPECT_NEAR(many.summary.val_loss, cpu.summary.val_loss, loss_bound()) << cell;
    // The buckets' allreduce overlapping backward (the default) and after
    // it: the same collectives on the same ranges, the same bits.
    if (n > 1) {
      nlohmann::json after = mlp({{"type", "mirrored"}, {"devices", gpu_list(n)}}, opt);
      after["strategy"]["allreduce"] = {{"overlap", false}};
      EXPECT_EQ(train(after).params, many.params) << cell;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Gpus, MirroredGpus, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "gpus";
                         });

// central_storage on GPUs, as TF places it: the replicas compute on their
// GPUs, the variables and the one optimizer stay in host memory, each
// step's gradients come to the host and are summed there in replica order.
// It trains as the CPU's central_storage over as many replicas (the same
// sums in the same order) and as one device, every GPU holding the host
// copy's values after each step.
class CentralStorageGpus : public TrainerGpus, public ::testing::WithParamInterface<int> {};

TEST_P(CentralStorageGpus, TrainsAsTheCpuWithTheVariablesInHostMemory) {
  const int n = GetParam();
  REQUIRE_GPUS(n);
  const nlohmann::json optimizers[] = {{{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}},
                                       {{"type", "adam"}, {"lr", 0.01}}};
  for (const auto& opt : optimizers) {
    const std::string cell = opt.dump() + " on " + std::to_string(n) + " GPU(s)";
    const Trained one = train(mlp({{"type", "one_device"}, {"devices", "cpu"}}, opt));
    const Trained cpu =
        train(mlp({{"type", "central_storage"}, {"devices", "cpu"}, {"replicas", n}}, opt));
    const Trained gpu = train(mlp({{"type", "central_storage"}, {"devices", gpu_list(n)}}, opt));
    ASSERT_EQ(gpu.params.size(), static_cast<size_t>(n)) << cell;
    EXPECT_EQ(gpu.summary.device, joined(n)) << cell;
    EXPECT_TRUE(has(gpu.summary.communication, "summed into the central copy on the host"))
        << gpu.summary.communication;
    EXPECT_LE(worst_equivalence_error(gpu.params[0], cpu.params[0]), param_bound()) << cell;
    EXPECT_LE(worst_equivalence_error(gpu.params[0], one.params[0]), param_bound()) << cell;
    for (int r = 1; r < n; ++r) EXPECT_EQ(gpu.params[r], gpu.params[0]) << cell << " " << r;
    ASSERT_EQ(gpu.summary.step_losses.size(), cpu.summary.step_losses.size()) << cell;
    for (size_t i = 0; i < cpu.summary.step_losses.size(); ++i) {
      EXPECT_NEAR(gpu.summary.step_losses[i], cpu.summary.step_losses[i], loss_bound()) << cell;
    }
    EXPECT_NEAR(gpu.summary.val_loss, cpu.summary.val_loss, loss_bound()) << cell;
  }
}

INSTANTIATE_TEST_SUITE_P(Gpus, CentralStorageGpus, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "gpus";
                         });

// strategy.sharding "optimizer" (ZeRO-1), "gradients" (ZeRO-2) and
// "parameters" (ZeRO-3) over NCCL: each GPU keeps and updates its piece of
// the optimizer state, the gradients reduce-scattered (ZeRO-2's and -3's
// group by group from backward's hook, through one window of device
// memory) and the values all-gathered on the devices (ZeRO-3's into a
// window before each group's layers run). It trains as "none" on the
// GPUs (SGD with momentum; AdamW with clipping, whose norm is summed piece
// by piece), every GPU the same values, and its checkpoint - the whole
// state - resumes unsharded on the CPU.
TEST_F(TrainerGpus, TheOptimizerShardedOverGpusTrainsAsNone) {
  REQUIRE_GPUS(2);
  const nlohmann::json optimizers[] = {
      {{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}},
      {{"type", "adamw"}, {"lr", 0.01}, {"weight_decay", 0.1}, {"clip_global_norm", 0.5}}};
  for (const int n : {2, 4}) {
    if (n > gpus_here()) continue;  // a real machine's GPUs: 2 at least (above)
    for (const auto& opt : optimizers) {
      const std::string cell = opt.dump() + " on " + std::to_string(n) + " GPU(s)";
      const nlohmann::json none = mlp({{"type", "mirrored"}, {"devices", gpu_list(n)}}, opt);
      const Trained a = train(none);
      for (const char* mode : {"optimizer", "gradients", "parameters"}) {
        nlohmann::json sharded = none;
        sharded["strategy"]["sharding"] = mode;
        // Groups of 50 floats (a layer each); ZeRO-2's and -3's windows on
        // the GPU.
        sharded["strategy"]["allreduce"] = {{"bucket_mb", 200.0 / (1 << 20)}};
        const Trained b = train(sharded);
        const std::string where = std::string(mode) + " " + cell;
        ASSERT_EQ(b.params.size(), static_cast<size_t>(n)) << where;
        EXPECT_LE(worst_equivalence_error(b.params[0], a.params[0]), param_bound()) << where;
        for (int r = 1; r < n; ++r) EXPECT_EQ(b.params[r], b.params[0]) << where << " " << r;
        ASSERT_EQ(b.summary.step_losses.size(), a.summary.step_losses.size()) << where;
        for (size_t i = 0; i < a.summary.step_losses.size(); ++i) {
          EXPECT_NEAR(b.summary.step_losses[i], a.summary.step_losses[i], loss_bound()) << where;
        }
      }
    }
  }
}

// The overlap, seen on the devices' clock: on each replica's communication
// lane a bucket's "gradients ready" span ends when the GPU has written its
// gradients, and its "allreduce" follows. Bucket 0 (the last layer's)
// being allreduced before the last bucket's gradients were written (the
// first layers' backward still running on the GPU) is the overlap. Wide
// hidden layers make that backward long; tiny buckets make several.
TEST_F(TrainerGpus, BucketsAreAllreducedWhileBackwardStillRunsOnTwoGpus) {
  REQUIRE_GPUS(2);
  nlohmann::json doc = mlp({{"type", "mirrored"},
                            {"devices", gpu_list(2)},
                            {"allreduce", {{"bucket_mb", 0.002}, {"first_bucket_mb", 0.002}}}},
                           {{"type", "sgd"}, {"lr", 0.05}});
  doc["model"]["layers"] = {12, 256, 256, 5};
  doc["train"].erase("epochs");
  doc["train"]["steps"] = 3;
  std::vector<Event> events;
  train(doc, &events, true);
  nlohmann::json record;
  for (const Event& e : events) {
    if (const auto* tl = std::get_if<TimelineEvent>(&e)) record = tl->trace;
  }
  ASSERT_TRUE(record.is_object());
  for (int r = 0; r < 2; ++r) {
    const int64_t lane = timeline_lane(TimelineLane::kReplicaComm, r);
    // Per step: bucket 0's allreduce start, the last "gradients ready" end.
    std::map<int64_t, int64_t> first_allreduce, last_ready;
    std::map<int64_t, std::set<int64_t>> buckets;
    for (const Span& s : spans_of(record["ranks"][0])) {
      if (s.lane != lane) continue;
      if (s.name == "allreduce") {
        buckets[s.step].insert(s.index);
        if (s.index == 0) first_allreduce[s.step] = s.start;
      }
      if (s.name == "gradients ready") {
        last_ready[s.step] = std::max(last_ready[s.step], s.start + s.dur);
      }
    }
    ASSERT_EQ(buckets.size(), 3u) << "replica " << r;
    int overlapped = 0;
    for (const auto& [step, ids] : buckets) {
      EXPECT_GE(ids.size(), 3u) << "several buckets a step";
      ASSERT_EQ(last_ready.count(step), 1u) << "step " << step;
      ASSERT_EQ(first_allreduce.count(step), 1u) << "step " << step;
      overlapped += first_allreduce.at(step) < last_ready.at(step);
    }
    EXPECT_GE(overlapped, 1) << "replica " << r
                             << ": no step's bucket 0 was allreduced during backward";
  }
}

// Device events: one per GPU at the start and every train.device_sample_s
// seconds; on the emulator its memory (the arena is in use), marked
// emulated, its utilisation not known (-1). device_sample_s 0: none.
TEST_F(TrainerGpus, EachGpuIsSampledWhileItTrains) {
  REQUIRE_GPUS(2);
  nlohmann::json doc =
      mlp({{"type", "mirrored"}, {"devices", gpu_list(2)}}, {{"type", "sgd"}, {"lr", 0.05}});
  doc["train"].erase("epochs");
  doc["train"]["steps"] = 3;
  doc["train"]["device_sample_s"] = 1e-6;  // after every step
  std::vector<Event> events;
  train(doc, &events);
  std::map<std::string, int> per_device;
  for (const Event& e : events) {
    const auto* d = std::get_if<DeviceEvent>(&e);
    if (d == nullptr) continue;
    ++per_device[d->device];
    EXPECT_EQ(d->emulated, !kReal) << d->device;
    EXPECT_GT(d->memory_total_mib, 0) << d->device;
    EXPECT_GT(d->memory_used_mib, 0) << d->device;
    EXPECT_LE(d->memory_used_mib, d->memory_total_mib) << d->device;
    if (!kReal) {
      EXPECT_EQ(d->utilization_pct, -1) << d->device;
    }
  }
  ASSERT_EQ(per_device.size(), 2u);
  for (const auto& [device, n] : per_device) EXPECT_EQ(n, 4) << device << ": the start and 3 steps";
  doc["train"]["device_sample_s"] = 0;
  events.clear();
  train(doc, &events);
  for (const Event& e : events) EXPECT_FALSE(std::holds_alternative<DeviceEvent>(e));
}

// MFU: the step's counted model FLOPs over its time over both GPUs' peak,
// the peak modelled from the device's SMs and clock (the emulator's
// advertised sm_90 with 132 SMs at 1.98 GHz: 256 fp32 FLOPs per SM per
// clock), said so; none on the CPU.
TEST_F(TrainerGpus, MfuIsTheModelFlopsOverEveryGpusModelledPeak) {
  REQUIRE_GPUS(2);
  nlohmann::json doc =
      mlp({{"type", "mirrored"}, {"devices", gpu_list(2)}}, {{"type", "sgd"}, {"lr", 0.05}});
  doc["train"].erase("epochs");
  doc["train"]["steps"] = 4;
  doc["train"]["log_every_steps"] = 1;
  std::vector<Event> events;
  const Trained t = train(doc, &events);
  double peak = 0, flops = 0;
  int steps = 0;
  for (const Event& e : events) {
    if (const auto* s = std::get_if<RunStartEvent>(&e)) {
      peak = s->peak_flops;
      flops = s->model_flops_per_step;
      if (!kReal) {
        EXPECT_DOUBLE_EQ(peak, 256.0 * 132 * 1.98e9);
        EXPECT_TRUE(has(s->peak_note, "modelled fp32 dense peak")) << s->peak_note;
        EXPECT_TRUE(has(s->peak_note, "emulated")) << s->peak_note;
      }
    }
    if (const auto* s = std::get_if<StepEvent>(&e)) {
      ++steps;
      ASSERT_GT(peak, 0);
      EXPECT_GT(s->mfu, 0);
      EXPECT_NEAR(s->mfu, flops / (s->step_time_ms / 1000) / (2 * peak), 1e-9 * s->mfu);
    }
  }
  EXPECT_EQ(steps, 4);
  EXPECT_EQ(t.summary.peak_flops, peak);
  EXPECT_NEAR(t.summary.mfu, t.summary.model_flops_per_s / (2 * peak), 1e-9 * t.summary.mfu);
  EXPECT_GT(t.summary.mfu, 0);
  const Trained cpu =
      train(mlp({{"type", "one_device"}, {"devices", "cpu"}}, {{"type", "sgd"}, {"lr", 0.05}}));
  EXPECT_EQ(cpu.summary.mfu, 0);
  EXPECT_TRUE(has(cpu.summary.peak_note, "no peak")) << cpu.summary.peak_note;
}

// The table the peak comes from: H100's bf16 is 4096 FLOPs per SM per
// clock (989 TFLOP/s at 132 SMs and 1.83 GHz, NVIDIA's figure); a
// capability it does not hold gives none, saying why.
TEST(GpuPeak, ModelledFromTheCapabilitysRatePerSmAndClock) {
  EXPECT_NEAR(gpu_dense_peak(9, 0, 132, 1830000, "bf16").flops, 989.4e12, 0.1e12);
  EXPECT_NEAR(gpu_dense_peak(8, 0, 108, 1410000, "tf32").flops, 156e12, 0.1e12);
  EXPECT_NEAR(gpu_dense_peak(8, 0, 108, 1410000, "fp32").flops, 19.5e12, 0.1e12);
  const GpuPeak unknown = gpu_dense_peak(7, 5, 40, 1590000, "fp32");
  EXPECT_EQ(unknown.flops, 0);
  EXPECT_TRUE(has(unknown.note, "sm_75")) << unknown.note;
}

TEST_F(TrainerGpus, AutoTakesEveryGpuOrAsManyAsTheReplicasAsked) {
  ::setenv("BATON_CUDA_EMULATE", "1", 1);
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.05}};
  nlohmann::json doc = mlp({{"type", "mirrored"}}, sgd);
  doc["train"].erase("epochs");
  doc["train"]["steps"] = 2;
  const Trained every = train(doc);
  EXPECT_EQ(every.params.size(), 4u);
  EXPECT_TRUE(has(every.summary.device_note, "auto:")) << every.summary.device_note;
  doc["strategy"]["replicas"] = 2;
  EXPECT_EQ(train(doc).summary.device, "gpu_emulated:0,gpu_emulated:1");
  // More replicas than GPUs: the CPU, saying why.
  doc["strategy"]["replicas"] = 5;
  const Trained cpu = train(doc);
  ::unsetenv("BATON_CUDA_EMULATE");
  EXPECT_EQ(cpu.summary.device, "cpu:0");
  EXPECT_TRUE(has(cpu.summary.device_note, "asks for 5 replicas and this machine has 4 emulated"))
      << cpu.summary.device_note;
}

TEST_F(TrainerGpus, WhatTheGpusCannotDoIsAnInputErrorNamingTheKey) {
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.05}};
  const auto with = [&](nlohmann::json strategy) { return mlp(std::move(strategy), sgd); };
  expect_refused(with({{"type", "mirrored"}, {"devices", {"gpu_emulated:0", "gpu_emulated:0"}}}),
                 "strategy.devices", "listed twice");
  expect_refused(with({{"type", "mirrored"}, {"devices", {"gpu_emulated:0", "gpu:1"}}}),
                 "strategy.devices", "GPUs of one kind");
  expect_refused(with({{"type", "mirrored"}, {"devices", {"gpu_emulated:0", "cpu"}}}),
                 "strategy.devices", "GPUs of one kind");
  expect_refused(with({{"type", "mirrored"}, {"devices", gpu_list(2)}, {"replicas", 3}}),
                 "strategy.replicas", "lists 2 GPU(s)");
  expect_refused(with({{"type", "mirrored"}, {"devices", {"gpu_emulated:1", "gpu_emulated:9"}}}),
                 "strategy.devices", "\"gpu_emulated:9\" was asked for");
  expect_refused(with({{"type", "parameter_server"}, {"devices", gpu_list(2)}}), "strategy.devices",
                 "parameter_server runs each worker on the GPU of its place on its host");
  expect_refused(with({{"type", "central_storage"}, {"devices", gpu_list(2)}, {"replicas", 3}}),
                 "strategy.replicas", "lists 2 GPU(s)");
  expect_refused(with({{"type", "central_storage"}, {"devices", {"gpu_emulated:0", "cpu"}}}),
                 "strategy.devices", "central_storage's devices are GPUs of one kind");
  // allreduce.backend, when given, fits the devices: nccl between GPUs,
  // local between CPU threads.
  expect_refused(with({{"type", "mirrored"},
                       {"devices", "cpu"},
                       {"replicas", 2},
                       {"allreduce", {{"backend", "nccl"}}}}),
                 "strategy.allreduce.backend", "this run's replicas are on the CPU");
  expect_refused(with({{"type", "mirrored"},
                       {"devices", {"gpu_emulated:0", "gpu_emulated:1"}},
                       {"allreduce", {{"backend", "local"}}}}),
                 "strategy.allreduce.backend", "sums host memory");
  nlohmann::json named = with({{"type", "mirrored"},
                               {"devices", {"gpu_emulated:0", "gpu_emulated:1"}},
                               {"allreduce", {{"backend", "nccl"}}}});
  named["train"].erase("epochs");
  named["train"]["steps"] = 1;
  EXPECT_EQ(train(named).summary.communication, "nccl/native");
}

// SyncBatchNorm between GPUs: each replica's statistics summed over NCCL
// on the devices (after its stream's writes), so mirrored on 2 GPUs
// normalises over the global batch as one device does with BatchNorm and
// as 2 CPU replicas do with SyncBatchNorm.
TEST_F(TrainerGpus, SyncBatchNormSumsItsStatisticsOverNcclBetweenGpus) {
  REQUIRE_GPUS(2);
  const nlohmann::json sgd = {{"type", "sgd"}, {"lr", 0.05}, {"momentum", 0.9}};
  const auto with_norm = [&](const nlohmann::json& strategy, const char* norm) {
    nlohmann::json doc = mlp(strategy, sgd);
    doc["model"]["norm"] = norm;
    return doc;
  };
  const Trained one = train(with_norm({{"type", "one_device"}, {"devices", "cpu"}}, "batchnorm"));
  const Trained cpus = train(
      with_norm({{"type", "mirrored"}, {"devices", "cpu"}, {"replicas", 2}}, "syncbatchnorm"));
  std::vector<Event> events;
  const Trained gpus =
      train(with_norm({{"type", "mirrored"}, {"devices", gpu_list(2)}}, "syncbatchnorm"), &events);
  ASSERT_EQ(gpus.params.size(), 2u);
  EXPECT_EQ(gpus.params[1], gpus.params[0]);
  EXPECT_LE(worst_equivalence_error(gpus.params[0], cpus.params[0]), param_bound());
  EXPECT_LE(worst_equivalence_error(gpus.params[0], one.params[0]), param_bound());
  ASSERT_EQ(gpus.summary.step_losses.size(), one.summary.step_losses.size());
  for (size_t i = 0; i < one.summary.step_losses.size(); ++i) {
    EXPECT_NEAR(gpus.summary.step_losses[i], one.summary.step_losses[i], loss_bound()) << i;
  }
  // The layer talks during backward: the buckets wait for it, and the run
  // log says so.
  bool said = false;
  for (const Event& e : events) {
    if (const auto* l = std::get_if<LogEvent>(&e)) said = said || has(l->message, "overlap is off");
  }
  EXPECT_TRUE(said);
}

// A checkpoint written by replicas on two GPUs resumes on the CPU (and the
// other way) as if never moved: the file is the same whichever device wrote
// it - mirrored's (replica 0's optimizer on its GPU) and central_storage's
// (the host copy's optimizer) alike.
class CheckpointGpus : public TrainerGpus, public ::testing::WithParamInterface<const char*> {};

TEST_P(CheckpointGpus, MovesBetweenTwoGpusAndTheCpu) {
  REQUIRE_GPUS(2);
  const fs::path dir =
      fs::temp_directory_path() / ("baton_trainer_gpus_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const nlohmann::json adam = {{"type", "adam"}, {"lr", 0.01}};
  const auto run = [&](const nlohmann::json& devices, int64_t steps, bool resume) {
    // "sharded": mirrored with its optimizer state sharded on the GPUs
    // (and on the CPU's 2 replicas).
    const bool sharded = std::string(GetParam()) == "sharded";
    nlohmann::json strategy = {{"type", sharded ? "mirrored" : GetParam()}, {"devices", devices}};
    if (sharded) strategy["sharding"] = "optimizer";
    if (devices == "cpu") strategy["replicas"] = 2;
    nlohmann::json doc = mlp(strategy, adam);
    doc["train"].erase("epochs");
    doc["train"]["steps"] = steps;
    const RunConfig cfg = parse_run_config(doc, "gpus.json");
    Telemetry t;
    TrainOptions opt;
    opt.run_id = "gpus";
    opt.gpu_library_dir = BATON_GPU_LIBRARY_DIR;
    opt.checkpoint_dir = dir.string();
    opt.resume = resume;
    Trainer trainer(cfg, registry_, t, opt);
    return trainer.run();
  };
  const TrainSummary whole = run("cpu", 8, false);
  fs::remove_all(dir);
  run(gpu_list(2), 4, false);
  const TrainSummary moved = run("cpu", 8, true);
  ASSERT_EQ(moved.step_losses.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(moved.step_losses[i], whole.step_losses[i + 4], loss_bound());
  fs::remove_all(dir);
  run("cpu", 4, false);
  const TrainSummary back = run(gpu_list(2), 8, true);
  ASSERT_EQ(back.step_losses.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(back.step_losses[i], whole.step_losses[i + 4], loss_bound());
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Gpus, CheckpointGpus,
                         ::testing::Values("mirrored", "central_storage", "sharded"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           return std::string(i.param);
                         });

}  // namespace
}  // namespace baton
