// `baton launch` end to end under mpirun (--oversubscribe), 2 ranks of a
// deterministic multi_worker_mirrored run checkpointing every 25 steps:
//  - SIGKILL of a random rank at a random moment: the run restarts from its
//    newest checkpoint and ends with parameters bit-identical to the
//    uninterrupted run's (4 trials a run, a new seed each run);
//  - SIGSTOP of a rank: found by its missing heartbeats within the timeout
//    (3 s) + 2 s, and the run completes (2 trials);
//  - a rank that dies in every attempt: --max-restarts 2 gives exactly 3
//    attempts, then "failed" with the reason in the history, exit 1;
//  - bad input: exit 2 and no rank started.
// The faults come from a rank wrapper script (--rank-wrapper), the way a
// user would wrap ranks in a profiler. Each trial prints its seed; set
// BATON_LAUNCH_SEED to replay one.
#include <baton/core/child_process.h>
#include <baton/core/running_child.h>
#include <baton/history/store.h>
#include <baton/train/checkpoint.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "launch/launched_job.h"

namespace fs = std::filesystem;

namespace baton {
namespace {

const std::string kConfig = testing_launch::digits_config(R"({
  "name": "launch-test", "seed": 3,
  "model": {"type": "mlp", "layers": [64, 256, 256, 10], "activation": "relu"},
  "train": {"steps": 6000, "global_batch_size": 64, "log_every_steps": 500},
  "strategy": {"type": "multi_worker_mirrored"},
  "checkpoint": {"every_steps": 25, "every_epoch": false, "keep": 2}
})");

// FAULT_RANK gets FAULT_SIGNAL FAULT_DELAY s after it starts, in the first
// attempt only (FAULT_MARK is made once, atomically, with mkdir), or in
// every attempt with FAULT_ALWAYS=1; the moment goes to FAULT_MARK.time.
// With FAULT_AFTER_CHECKPOINT_IN=DIR the delay counts from the run's first
// checkpoint in DIR instead: a fault inside the training however long the
// ranks take to start (a loaded machine's MPI start can take seconds).
const char* kWrapper = R"(#!/bin/bash
if [ "$OMPI_COMM_WORLD_RANK" = "$FAULT_RANK" ] &&
   { [ "${FAULT_ALWAYS:-0}" = 1 ] || mkdir "$FAULT_MARK" 2>/dev/null; }; then
  me=$$
  ( if [ -n "${FAULT_AFTER_CHECKPOINT_IN:-}" ]; then
      # Looks every 20 ms for the checkpoint (no inotify tool here).
      until compgen -G "$FAULT_AFTER_CHECKPOINT_IN/ckpt-*.bin" >/dev/null; do sleep 0.02; done
    fi
    sleep "$FAULT_DELAY"; date +%s.%N > "$FAULT_MARK.time"; kill -"$FAULT_SIGNAL" "$me" ) &
fi
# FAULT_TRUNCATE=DIR: after the fault, the chief's newest checkpoint in DIR
# is cut short once (as a write the kill interrupted would leave it).
if [ -n "${FAULT_TRUNCATE:-}" ] && [ "$OMPI_COMM_WORLD_RANK" = 0 ] && [ -d "$FAULT_MARK" ] &&
   mkdir "$FAULT_MARK.cut" 2>/dev/null; then
  newest=$(ls -1 "$FAULT_TRUNCATE"/ckpt-*.bin | sort -V | tail -1)
  truncate -s 100 "$newest" && basename "$newest" > "$FAULT_MARK.cut/name"
fi
# LINGER_RANK stays LINGER_S seconds after its baton has exited, as a rank
# slow to exit does (its last files, a sanitizer's exit report).
if [ "$OMPI_COMM_WORLD_RANK" = "${LINGER_RANK:--1}" ]; then
  "$@"; rc=$?; sleep "$LINGER_S"; exit $rc
fi
exec "$@"
)";

class LaunchRestarts : public testing::Test {
 protected:
  void SetUp() override {
    if (find_on_path("mpirun").empty()) GTEST_SKIP() << "mpirun is not on PATH";
    work_ = testing_launch::fresh_test_dir(BATON_TEST_WORK_DIR);
    config_ = (work_ / "config.json").string();
    std::ofstream(config_) << kConfig;
    wrapper_ = (work_ / "fault.sh").string();
    std::ofstream(wrapper_) << kWrapper;
    fs::permissions(wrapper_, fs::perms::owner_all);
  }

  struct Launched {
    ChildResult result;
    std::vector<nlohmann::json> events;  // the launcher's --events lines
    int exit_code() const { return WIFEXITED(result.status) ? WEXITSTATUS(result.status) : -1; }
    std::vector<nlohmann::json> of_type(const std::string& type) const {
      return testing_launch::of_type(events, type);
    }
  };

  Launched launch(const std::string& run_id, std::vector<std::string> fault_env,
                  std::vector<std::string> extra = {}) {
    const std::string events = (work_ / (run_id + ".events.jsonl")).string();
    std::vector<std::string> args = {"baton",
                                     "launch",
                                     config_,
                                     "--np",
                                     np_,
                                     "--runs-dir",
                                     runs(),
                                     "--db",
                                     db(),
                                     "--events",
                                     events,
                                     "--run-id",
                                     run_id,
                                     "--rank-wrapper",
                                     wrapper_,
                                     "--heartbeat",
                                     "0.2",
                                     "--heartbeat-timeout",
                                     heartbeat_timeout_,
                                     "-q"};
    args.insert(args.end(), extra.begin(), extra.end());
    fault_env.push_back("OMPI_ALLOW_RUN_AS_ROOT=1");
    fault_env.push_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
    fault_env.push_back("FAULT_MARK=" + (work_ / (run_id + ".mark")).string());
    Launched l;
    l.result = run_child(BATON_BINARY, args, fault_env, 300);
    std::ifstream in(events);
    for (std::string line; std::getline(in, line);) {
      l.events.push_back(nlohmann::json::parse(line, nullptr, false));
    }
    return l;
  }

  // The newest checkpoint's tensors of a run (which must be at `steps`).
  testing_launch::NamedTensors final_tensors(const std::string& run_id, int64_t steps = 6000) {
    return testing_launch::final_tensors((fs::path(runs()) / run_id / "checkpoints").string(),
                                         steps);
  }

  double fault_time(const std::string& run_id) {
    std::ifstream in(work_ / (run_id + ".mark.time"));
    double t = 0;
    in >> t;
    return t;
  }

  std::string runs() const { return (work_ / "runs").string(); }
  std::string db() const { return (work_ / "history.db").string(); }
  // The fault's delay counted from run `id`'s first checkpoint (kWrapper).
  std::string after_first_checkpoint(const std::string& id) const {
    return "FAULT_AFTER_CHECKPOINT_IN=" + (fs::path(runs()) / id / "checkpoints").string();
  }

  static uint64_t seed() {
    if (const char* s = std::getenv("BATON_LAUNCH_SEED")) return std::strtoull(s, nullptr, 10);
    return static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  }

  fs::path work_;
  std::string config_, wrapper_;
  // Long enough that a loaded machine never looks hung; the SIGSTOP test
  // sets its own.
  std::string heartbeat_timeout_ = "10";
  std::string np_ = "2";
};

using testing_launch::bit_identical;

TEST_F(LaunchRestarts, KilledRanksRestartAndEndBitIdenticalToTheUninterruptedRun) {
  const Launched ref = launch("ref", {"FAULT_RANK=-1"});
  ASSERT_EQ(ref.exit_code(), 0) << ref.result.err;
  const auto want = final_tensors("ref");
  ASSERT_FALSE(want.empty());
  const uint64_t s0 = seed();
  std::printf("seed %llu (BATON_LAUNCH_SEED replays it)\n", static_cast<unsigned long long>(s0));
  std::mt19937_64 rng(s0);
  int restarted = 0;
  std::vector<double> recovery_s;  // a rank's death to the resumed run's start
  // Four trials (a new seed each run): each is a whole run and its restart
  // (about 5 s here, CI's serial time: ten took a minute and a half).
  constexpr int kTrials = 4;
  for (int trial = 0; trial < kTrials; ++trial) {
    const int rank = static_cast<int>(rng() % 2);
    const double delay = 0.6 + static_cast<double>(rng() % 1000) / 1000.0 * 1.4;
    const std::string id = "kill" + std::to_string(trial);
    char d[16];
    std::snprintf(d, sizeof(d), "%.3f", delay);
    const Launched l = launch(id, {"FAULT_RANK=" + std::to_string(rank), "FAULT_SIGNAL=KILL",
                                   std::string("FAULT_DELAY=") + d, after_first_checkpoint(id)});
    ASSERT_EQ(l.exit_code(), 0) << "trial " << trial << " (rank " << rank << ", " << d
                                << " s): " << excerpt(l.result.err);
    const auto restarts = l.of_type("restart");
    restarted += restarts.empty() ? 0 : 1;
    for (const auto& r : restarts) EXPECT_EQ(r.value("rank", -2), rank) << r.dump();
    // The next attempt resumed from a checkpoint, not from the start (which
    // would end bit-identical too).
    const auto starts = l.of_type("run_start");
    ASSERT_EQ(starts.size(), restarts.size() + 1) << "trial " << trial;
    if (!restarts.empty() && restarts[0].value("step", int64_t{0}) >= 50) {
      EXPECT_GT(starts[1].value("start_step", int64_t{0}), 0) << starts[1].dump();
      recovery_s.push_back(starts[1].value("time", 0.0) - fault_time(id));
    }
    std::string why;
    EXPECT_TRUE(bit_identical(final_tensors(id), want, &why))
        << "trial " << trial << " (rank " << rank << ", " << d << " s): " << why;
  }
  // Most kills land inside the run (a few may come after its end).
  EXPECT_GE(restarted, kTrials - 2)
      << "only " << restarted << " of " << kTrials << " trials were interrupted";
  // The launcher answered for each run while it lived: a rank's death and
  // the restart left the run `running` (the chief's own death did not make
  // it interrupted, with an error event, when the next attempt opened the
  // history), and every run ended completed.
  {
    HistoryStore store(db(), HistoryStore::Open::kReadOnly);
    for (const RunRecord& run : store.list_runs()) {
      EXPECT_EQ(run.status, "completed") << run.uid;
      for (const RunEventRecord& e : store.events(run.id)) {
        EXPECT_EQ(e.message.find("marked interrupted"), std::string::npos)
            << run.uid << ": " << e.message;
      }
    }
  }
  double sum = 0, worst = 0;
  for (double t : recovery_s) sum += t, worst = std::max(worst, t);
  if (!recovery_s.empty()) {
    std::printf("death to resumed start (measured): mean %.2f s, worst %.2f s over %zu restarts\n",
                sum / static_cast<double>(recovery_s.size()), worst, recovery_s.size());
  }
}

// multi_worker_mirrored on GPUs (2 emulated GPUs per process, rank r on
// gpu_emulated:r, NCCL's stand-in between the processes): a rank killed
// after the first checkpoint takes the job down (its peer's NCCL wait
// finds its process gone), the job restarts on the same GPUs from the
// newest checkpoint, and ends bit-identical to the uninterrupted run.
TEST_F(LaunchRestarts, AKilledGpuRankRestartsOnItsGpuFromTheCheckpoint) {
  if (!fs::exists(fs::path(BATON_BINARY).parent_path().parent_path() / "lib" / "baton" /
                  "baton_cuda_emu.so")) {
    GTEST_SKIP() << "built without the GPU emulator (no CUDA toolkit headers)";
  }
  const std::vector<std::string> gpus = {"--set", "strategy.devices=gpu_emulated",
                                         "--set", "train.steps=120",
                                         "--set", "model.layers=[64,64,10]"};
  const Launched ref = launch("gpu_ref", {"FAULT_RANK=-1", "BATON_SIMT_DEVICES=2"}, gpus);
  ASSERT_EQ(ref.exit_code(), 0) << excerpt(ref.result.err);
  const auto starts = ref.of_type("run_start");
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].value("device", ""), "gpu_emulated:0") << starts[0].dump();
  EXPECT_EQ(starts[0].value("communication", ""), "nccl/native") << starts[0].dump();
  const auto want = final_tensors("gpu_ref", 120);
  ASSERT_FALSE(want.empty());
  const Launched l = launch("gpu_kill",
                            {"FAULT_RANK=1", "FAULT_SIGNAL=KILL", "FAULT_DELAY=0.2",
                             "BATON_SIMT_DEVICES=2", after_first_checkpoint("gpu_kill")},
                            gpus);
  ASSERT_EQ(l.exit_code(), 0) << excerpt(l.result.err);
  const auto restarts = l.of_type("restart");
  ASSERT_FALSE(restarts.empty()) << "the kill came after the run's end";
  EXPECT_EQ(restarts[0].value("rank", -2), 1) << restarts[0].dump();
  const auto again = l.of_type("run_start");
  ASSERT_EQ(again.size(), restarts.size() + 1);
  EXPECT_GT(again[1].value("start_step", int64_t{0}), 0) << again[1].dump();
  std::string why;
  EXPECT_TRUE(bit_identical(final_tensors("gpu_kill", 120), want, &why)) << why;
}

// A checkpoint the kill left unusable (cut short): the restart reports it,
// takes the one before, and the run still ends bit-identical.
TEST_F(LaunchRestarts, ACheckpointCutShortIsSkippedForThePreviousOne) {
  const Launched ref = launch("ref", {"FAULT_RANK=-1"});
  ASSERT_EQ(ref.exit_code(), 0) << ref.result.err;
  const std::string dir = (fs::path(runs()) / "cut" / "checkpoints").string();
  const Launched l = launch("cut", {"FAULT_RANK=1", "FAULT_SIGNAL=KILL", "FAULT_DELAY=1.0",
                                    "FAULT_TRUNCATE=" + dir, after_first_checkpoint("cut")});
  ASSERT_EQ(l.exit_code(), 0) << excerpt(l.result.err);
  ASSERT_EQ(l.of_type("restart").size(), 1u);
  std::ifstream in(work_ / "cut.mark.cut" / "name");
  std::string cut;
  in >> cut;
  ASSERT_FALSE(cut.empty()) << "no checkpoint was cut";
  const int64_t cut_step = std::stoll(cut.substr(5));  // ckpt-<step>.bin
  bool reported = false;
  for (const auto& e : l.of_type("log")) {
    const std::string m = e.value("message", "");
    reported =
        reported || (m.rfind("skipped checkpoint ", 0) == 0 && m.find(cut) != std::string::npos);
  }
  EXPECT_TRUE(reported) << "the cut checkpoint " << cut << " was not reported";
  const auto starts = l.of_type("run_start");
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_LT(starts[1].value("start_step", int64_t{-1}), cut_step);
  EXPECT_GT(starts[1].value("start_step", int64_t{-1}), 0);
  std::string why;
  EXPECT_TRUE(bit_identical(final_tensors("cut"), final_tensors("ref"), &why)) << why;
}

TEST_F(LaunchRestarts, AStoppedRankIsFoundByItsMissingHeartbeats) {
  const uint64_t s0 = seed();
  std::printf("seed %llu (BATON_LAUNCH_SEED replays it)\n", static_cast<unsigned long long>(s0));
  std::mt19937_64 rng(s0);
  heartbeat_timeout_ = "3";
  // Two trials (a new seed each run), about 8 s each.
  for (int trial = 0; trial < 2; ++trial) {
    const int rank = static_cast<int>(rng() % 2);
    const std::string id = "stop" + std::to_string(trial);
    const Launched l =
        launch(id, {"FAULT_RANK=" + std::to_string(rank), "FAULT_SIGNAL=STOP", "FAULT_DELAY=0.8"});
    ASSERT_EQ(l.exit_code(), 0) << "trial " << trial << ": " << excerpt(l.result.err);
    const auto restarts = l.of_type("restart");
    ASSERT_EQ(restarts.size(), 1u) << "trial " << trial;
    const auto& r = restarts[0];
    EXPECT_EQ(r.value("rank", -2), rank) << r.dump();
    EXPECT_NE(r.value("cause", "").find("no heartbeat"), std::string::npos) << r.dump();
    // Within the timeout (3 s) + 2 s of the stop (and not before the
    // timeout less one heartbeat interval).
    const double took = r.value("detected", 0.0) - fault_time(id);
    EXPECT_GT(took, 2.7) << r.dump();
    EXPECT_LT(took, 5.0) << r.dump();
    std::string why;
    EXPECT_FALSE(final_tensors(id).empty()) << "trial " << trial;
  }
}

TEST_F(LaunchRestarts, ARankThatAlwaysDiesSpendsTheRestartsAndFails) {
  // Dying at once each time: a quick failure counts as much as a slow one.
  const Launched l =
      launch("doomed", {"FAULT_RANK=1", "FAULT_SIGNAL=KILL", "FAULT_DELAY=0.3", "FAULT_ALWAYS=1"},
             {"--max-restarts", "2"});
  EXPECT_EQ(l.exit_code(), 1) << l.result.err;
  EXPECT_EQ(l.of_type("restart").size(), 2u);
  EXPECT_EQ(l.of_type("launch_failure").size(), 1u);
  const auto end = l.of_type("launch_end");
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(end[0].value("status", ""), "failed");
  EXPECT_EQ(end[0].value("attempts", 0), 3);
  EXPECT_NE(l.result.out.find("failed after 3 attempts"), std::string::npos) << l.result.out;
  // The history says so, with the reason.
  HistoryStore store(db(), HistoryStore::Open::kExisting);
  const RunRecord run = store.run(store.resolve("doomed"));
  EXPECT_EQ(run.status, "failed");
  EXPECT_NE(run.error.find("attempt 3"), std::string::npos) << run.error;
  EXPECT_NE(run.error.find("rank 1"), std::string::npos) << run.error;
}

// Ranks that die before the chief has recorded the run, in every attempt:
// the launcher records it itself once no attempt is left, failed, with why.
TEST_F(LaunchRestarts, ARunWhoseRanksNeverStartIsStillRecordedAsFailed) {
  const Launched l =
      launch("stillborn", {"FAULT_RANK=1", "FAULT_SIGNAL=KILL", "FAULT_DELAY=0", "FAULT_ALWAYS=1"},
             {"--max-restarts", "1"});
  EXPECT_EQ(l.exit_code(), 1) << l.result.err;
  EXPECT_EQ(l.of_type("restart").size(), 1u);
  HistoryStore store(db(), HistoryStore::Open::kExisting);
  const RunRecord run = store.run(store.resolve("stillborn"));
  EXPECT_EQ(run.status, "failed");
  EXPECT_EQ(run.name, "launch-test");
  EXPECT_NE(run.error.find("attempt 2"), std::string::npos) << run.error;
  EXPECT_NE(run.error.find("rank 1"), std::string::npos) << run.error;
}

// The run is over (the chief sent its end) and one rank's process is gone
// while another is still exiting: not a death, no restart.
TEST_F(LaunchRestarts, RanksExitingAtTheirOwnPaceAfterTheEndAreNotDeaths) {
  const Launched l = launch("linger", {"FAULT_RANK=-1", "LINGER_RANK=1", "LINGER_S=3"},
                            {"--max-restarts", "0", "--set", "train.steps=300"});
  EXPECT_EQ(l.exit_code(), 0) << l.result.err << l.result.out;
  EXPECT_EQ(l.of_type("restart").size(), 0u);
  HistoryStore store(db(), HistoryStore::Open::kExisting);
  EXPECT_EQ(store.run(store.resolve("linger")).status, "completed");
}

// parameter_server (sync, 2 workers and a server): a killed server, or a
// killed worker, restarts the whole job from the newest checkpoint - which
// holds the server's shard and its optimizer state - and the run ends
// bit-identical to the uninterrupted one (the server sums two workers'
// gradients: a + b, the same either way round).
TEST_F(LaunchRestarts, AParameterServerJobRestartsFromTheServersCheckpointedState) {
  np_ = "3";
  // Half the MLP runs' steps: three runs here (about 5 s each), the kills
  // still land well inside them (at most 1.8 s after the first checkpoint).
  const std::vector<std::string> ps = {"--set", "strategy.type=parameter_server",
                                       "--set", "strategy.num_ps=1",
                                       "--set", "strategy.mode=sync",
                                       "--set", "train.steps=3000"};
  const Launched ref = launch("psref", {"FAULT_RANK=-1"}, ps);
  ASSERT_EQ(ref.exit_code(), 0) << ref.result.err;
  const auto want = final_tensors("psref", 3000);
  ASSERT_FALSE(want.empty());
  {
    // The checkpoint holds the server's optimizer state (Adam's, not zeros).
    CheckpointManager m((fs::path(runs()) / "psref" / "checkpoints").string(), 2);
    const auto data = m.load_latest();
    ASSERT_TRUE(data.has_value());
    EXPECT_EQ(data->meta.at("ps_updates"), nlohmann::json::array({3000}));
    double sum = 0;
    for (const auto& [name, t] : data->tensors) {
      if (name.rfind("optim.v", 0) != 0) continue;
      for (int64_t i = 0; i < t.numel(); ++i) sum += t.data()[i];
    }
    EXPECT_GT(sum, 0.0) << "the optimizer state in the checkpoint is all zeros";
  }
  const uint64_t s0 = seed();
  std::printf("seed %llu (BATON_LAUNCH_SEED replays it)\n", static_cast<unsigned long long>(s0));
  std::mt19937_64 rng(s0);
  for (const int rank : {2, 1}) {  // the server, then a worker
    const double delay = 0.8 + static_cast<double>(rng() % 1000) / 1000.0;
    char d[16];
    std::snprintf(d, sizeof(d), "%.3f", delay);
    const std::string id = "ps" + std::to_string(rank);
    const Launched l = launch(id,
                              {"FAULT_RANK=" + std::to_string(rank), "FAULT_SIGNAL=KILL",
                               std::string("FAULT_DELAY=") + d, after_first_checkpoint(id)},
                              ps);
    ASSERT_EQ(l.exit_code(), 0) << "rank " << rank << " killed at " << d
                                << " s: " << excerpt(l.result.err);
    const auto restarts = l.of_type("restart");
    ASSERT_EQ(restarts.size(), 1u) << "rank " << rank << " at " << d << " s";
    EXPECT_EQ(restarts[0].value("rank", -2), rank) << restarts[0].dump();
    const auto starts = l.of_type("run_start");
    ASSERT_EQ(starts.size(), 2u);
    if (restarts[0].value("step", int64_t{0}) >= 50) {
      EXPECT_GT(starts[1].value("start_step", int64_t{0}), 0) << starts[1].dump();
    }
    std::string why;
    EXPECT_TRUE(bit_identical(final_tensors(id, 3000), want, &why))
        << "rank " << rank << " killed at " << d << " s: " << why;
  }
}

// Whether any process's command line contains `text` (the ranks of a run
// carry its id in theirs).
bool process_with(const std::string& text) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find(text) != std::string::npos && cmd.find("baton") != std::string::npos &&
        cmd.find("train") != std::string::npos) {
      return true;
    }
  }
  return false;
}

// The launcher itself killed: its job goes with it (nothing keeps training
// unsupervised), and `baton launch --resume` continues the run.
TEST_F(LaunchRestarts, AKilledLauncherTakesItsJobAlongAndResumeContinues) {
  const Launched ref = launch("ref", {"FAULT_RANK=-1"});
  ASSERT_EQ(ref.exit_code(), 0) << ref.result.err;
  const std::string events = (work_ / "orphan.events.jsonl").string();
  {
    RunningChild launcher(BATON_BINARY,
                          {"baton", "launch", config_, "--np", "2", "--runs-dir", runs(), "--db",
                           db(), "--events", events, "--run-id", "orphan", "-q"},
                          {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"});
    // Until the run has a checkpoint past its start.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool checkpointed = false;
    RunningChild::Lines ignored;
    while (!checkpointed && std::chrono::steady_clock::now() < deadline) {
      launcher.read(0.05, ignored);
      std::ifstream in(events);
      for (std::string line; std::getline(in, line);) {
        const auto js = nlohmann::json::parse(line, nullptr, false);
        if (js.is_object() && js.value("type", "") == "checkpoint" &&
            js.value("step", int64_t{0}) >= 100) {
          checkpointed = true;
        }
      }
    }
    ASSERT_TRUE(checkpointed) << "no checkpoint within 60 s";
    ASSERT_TRUE(process_with("--run-id orphan"));
    ::kill(launcher.pid(), SIGKILL);
    ASSERT_TRUE(launcher.exit_status() || launcher.terminate(1.0) != 0);
  }
  // The ranks end with it (mpirun at once, the ranks when their output
  // has nowhere to go).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (process_with("--run-id orphan") && std::chrono::steady_clock::now() < deadline) {
    ::poll(nullptr, 0, 50);  // between looks at /proc
  }
  EXPECT_FALSE(process_with("--run-id orphan")) << "ranks outlived their launcher by 20 s";
  {
    // The launcher answered for the run: its death is what makes the run
    // interrupted.
    HistoryStore store(db(), HistoryStore::Open::kExisting);
    EXPECT_EQ(store.run(store.resolve("orphan")).status, "interrupted");
  }
  {
    // They did not train on to the end unsupervised.
    CheckpointManager m((fs::path(runs()) / "orphan" / "checkpoints").string(), 2);
    const auto left = m.load_latest();
    ASSERT_TRUE(left.has_value());
    EXPECT_LT(left->step, 6000);
  }
  // launch --events appends: the resumed launch's lines alone.
  fs::remove(events);
  const Launched resumed = launch("orphan", {"FAULT_RANK=-1"}, {"--resume"});
  ASSERT_EQ(resumed.exit_code(), 0) << resumed.result.err;
  const auto starts = resumed.of_type("run_start");
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_GE(starts[0].value("start_step", int64_t{0}), 100) << starts[0].dump();
  std::string why;
  EXPECT_TRUE(bit_identical(final_tensors("orphan"), final_tensors("ref"), &why)) << why;
}

// Ranks that beat but make no progress: here stuck reading their data (a
// FIFO nobody writes), as ranks stuck in a collective would be.
TEST_F(LaunchRestarts, RanksThatBeatButNeverStepAreStuck) {
  const std::string fifo = (work_ / "data.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Launched l = launch(
      "stuck", {"FAULT_RANK=-1"},
      {"--set", "data.train.path=" + fifo, "--progress-timeout", "3", "--max-restarts", "0"});
  EXPECT_EQ(l.exit_code(), 1) << l.result.err;
  const auto failures = l.of_type("launch_failure");
  ASSERT_EQ(failures.size(), 1u);
  const std::string cause = failures[0].value("cause", "");
  EXPECT_NE(cause.find("no rank finished a step"), std::string::npos) << cause;
  EXPECT_NE(cause.find("since the start"), std::string::npos) << cause;
}

TEST_F(LaunchRestarts, BadInputIsExitTwoBeforeAnyRankStarts) {
  const auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "baton");
    return run_child(BATON_BINARY, args, {}, 60);
  };
  const auto code = [](const ChildResult& r) {
    return WIFEXITED(r.status) ? WEXITSTATUS(r.status) : -1;
  };
  const ChildResult unknown = run({"launch", config_, "--np", "2", "--bogus"});
  EXPECT_EQ(code(unknown), 2) << unknown.err;
  EXPECT_NE(unknown.err.find("--bogus"), std::string::npos) << unknown.err;
  const ChildResult beat = run({"launch", config_, "--heartbeat", "5", "--heartbeat-timeout", "2"});
  EXPECT_EQ(code(beat), 2) << beat.err;
  EXPECT_NE(beat.err.find("--heartbeat-timeout"), std::string::npos) << beat.err;
  const ChildResult negative = run({"launch", config_, "--max-restarts", "-1"});
  EXPECT_EQ(code(negative), 2) << negative.err;
  EXPECT_NE(negative.err.find("--max-restarts"), std::string::npos) << negative.err;
  const std::string empty_hosts = (work_ / "hosts").string();
  std::ofstream(empty_hosts) << "# no hosts\n";
  const ChildResult hosts = run({"launch", config_, "--hostfile", empty_hosts});
  EXPECT_EQ(code(hosts), 2) << hosts.err;
  EXPECT_NE(hosts.err.find(empty_hosts), std::string::npos) << hosts.err;
  const ChildResult key = run({"launch", config_, "--set", "train.stepz=3"});
  EXPECT_EQ(code(key), 2) << key.err;
  EXPECT_NE(key.err.find("stepz"), std::string::npos) << key.err;
  // An error the ranks find (the data file): reported, not restarted.
  const ChildResult data = run({"launch", config_, "--np", "2", "--runs-dir", runs(), "--db", db(),
                                "--set", "data.train.path=/nonexistent/digits.csv"});
  EXPECT_EQ(code(data), 2) << data.err;
  EXPECT_NE(data.out.find("not restarted"), std::string::npos) << data.out;
  EXPECT_EQ(data.out.find("restarting"), std::string::npos) << data.out;
}

}  // namespace
}  // namespace baton
