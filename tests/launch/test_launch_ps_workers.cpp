// `baton launch` of an asynchronous parameter_server job (3 workers, 1
// server on this host; mpirun with --oversubscribe), watched as a person
// would, through its --events stream, with the faults made from outside:
//  - a worker SIGKILLed mid-run is replaced while the server and the other
//    workers go on: no restart of the job, the replacement continues its
//    slot from the step its predecessor last pushed, on the same share of
//    the data (its sample log), and the run completes;
//  - a worker stopped (SIGSTOP) is found by its missing heartbeats and
//    replaced the same way;
//  - a worker that dies each time it is replaced spends --max-restarts and
//    the run fails (no replacement past the budget);
//  - a killed server restarts the whole job from its checkpoint, as TF does.
#include <arpa/inet.h>
#include <baton/comm/communicator.h>
#include <baton/comm/tcp.h>
#include <baton/core/child_process.h>
#include <baton/history/store.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "launch/launched_job.h"
#include "net_test_util.h"

namespace fs = std::filesystem;

namespace baton {
namespace {

using testing_launch::of_type;

// Long enough that a stopped worker's detection (a 3 s heartbeat timeout)
// and its replacement come well before the others' end, and that a
// worker dying at every start is seen to start again (10,000 steps were
// not, once in CI: the others ended first).
constexpr int kSteps = 15000;

const char* kConfig = R"({
  "name": "ps-workers-test", "seed": 7, "threads": 1,
  "model": {"type": "mlp", "layers": [64, 256, 256, 10], "activation": "relu"},
  "data": {"train": {"type": "csv", "path": ")" BATON_SOURCE_DIR
                      R"(/resources/datasets/digits.csv.gz", "label": -1},
           "standardize": true, "shuffle_buffer": 512},
  "loss": "softmax_cross_entropy",
  "optimizer": {"type": "adam", "lr": 0.001},
  "train": {"steps": 15000, "global_batch_size": 60, "log_every_steps": 100},
  "strategy": {"type": "parameter_server", "mode": "async", "num_ps": 1},
  "checkpoint": {"every_steps": 500, "every_epoch": false, "keep": 2}
})";

// One rank of a "ranks" event, or null.
nlohmann::json rank_of(const nlohmann::json& ranks_event, int rank) {
  for (const auto& r : ranks_event.value("ranks", nlohmann::json::array())) {
    if (r.value("rank", -1) == rank) return r;
  }
  return nullptr;
}

// A sample log's steps: step -> the sample indices (one replica a file).
std::map<int64_t, std::string> read_steps(const fs::path& file) {
  std::map<int64_t, std::string> steps;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    int64_t step = 0;
    ls >> step;
    steps[step] = line.substr(line.find(':') + 1);
  }
  return steps;
}

class LaunchPsWorkers : public testing::Test {
 protected:
  void SetUp() override {
    if (find_on_path("mpirun").empty()) GTEST_SKIP() << "mpirun is not on PATH";
    work_ = testing_launch::fresh_test_dir(BATON_TEST_WORK_DIR);
    config_ = (work_ / "config.json").string();
    std::ofstream(config_) << kConfig;
  }
  void TearDown() override {
    for (const long pid : stopped_) ::kill(static_cast<pid_t>(pid), SIGKILL);
  }

  testing_launch::LaunchedJob launch(const std::string& id,
                                     const std::function<void(const nlohmann::json&)>& on_event,
                                     std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"baton",
                                     "launch",
                                     config_,
                                     "--np",
                                     "4",
                                     "--runs-dir",
                                     runs(),
                                     "--db",
                                     db(),
                                     "--events",
                                     "-",
                                     "--run-id",
                                     id,
                                     "--heartbeat",
                                     "0.2",
                                     "--heartbeat-timeout",
                                     heartbeat_timeout_,
                                     "-q",
                                     "--sample-log",
                                     (work_ / "samples").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return testing_launch::run_launcher(BATON_BINARY, args, env_, on_event, 300);
  }
  // Sends `sig` to `rank` once `step_rank` is past step `from` (the rank
  // itself by default; again to each new process holding the rank when
  // `again`); the pids signalled go to *hit.
  std::function<void(const nlohmann::json&)> fault(int rank, int sig, int64_t from,
                                                   std::vector<long>* hit, bool again = false,
                                                   int step_rank = -1) {
    return [=, this](const nlohmann::json& e) {
      if (e.value("type", "") != "ranks") return;
      const nlohmann::json r = rank_of(e, rank);
      const nlohmann::json by = rank_of(e, step_rank < 0 ? rank : step_rank);
      if (r.is_null() || by.is_null() || r.value("state", "") != "running" ||
          by.value("step", int64_t{-1}) < from) {
        return;
      }
      const long pid = r.value("pid", 0L);
      if (pid <= 0 || (!again && !hit->empty())) return;
      if (std::find(hit->begin(), hit->end(), pid) != hit->end()) return;
      ::kill(static_cast<pid_t>(pid), sig);
      if (sig == SIGSTOP) stopped_.push_back(pid);
      hit->push_back(pid);
    };
  }
  // The final "ranks" event.
  static nlohmann::json last_ranks(const testing_launch::LaunchedJob& j) {
    const auto all = of_type(j.events, "ranks");
    return all.empty() ? nlohmann::json() : all.back();
  }

  std::string runs() const { return (work_ / "runs").string(); }
  std::string db() const { return (work_ / "history.db").string(); }

  fs::path work_;
  std::string config_;
  std::vector<long> stopped_;
  std::string heartbeat_timeout_ = "10";  // long enough that a loaded machine never looks hung
  std::vector<std::string> env_ = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
};

TEST_F(LaunchPsWorkers, AKilledWorkerIsReplacedWhileTheServersGoOn) {
  std::vector<long> hit;
  const auto job = launch("kill", fault(2, SIGKILL, 2000, &hit));
  ASSERT_EQ(job.exit_code, 0) << job.err;
  ASSERT_EQ(hit.size(), 1u) << "worker 2 was never seen running past step 2000";
  const auto replaced = of_type(job.events, "replace");
  ASSERT_EQ(replaced.size(), 1u) << job.err;
  EXPECT_EQ(replaced[0].value("rank", -1), 2) << replaced[0].dump();
  EXPECT_NE(replaced[0].value("cause", "").find("signal 9"), std::string::npos)
      << replaced[0].dump();
  // The job itself was never restarted: one attempt, one start.
  EXPECT_TRUE(of_type(job.events, "restart").empty());
  EXPECT_EQ(of_type(job.events, "run_start").size(), 1u);
  const auto end = of_type(job.events, "launch_end");
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(end[0].value("status", ""), "completed");
  EXPECT_EQ(end[0].value("attempts", 0), 1);
  EXPECT_EQ(end[0].value("replacements", 0), 1);
  // Every worker, the replacement too, trained to the end.
  const nlohmann::json ranks = last_ranks(job);
  for (int r = 0; r < 3; ++r) {
    const nlohmann::json one = rank_of(ranks, r);
    ASSERT_FALSE(one.is_null()) << ranks.dump();
    EXPECT_EQ(one.value("state", ""), "done") << one.dump();
    EXPECT_EQ(one.value("step", -1), kSteps) << one.dump();
  }
  EXPECT_NE(rank_of(ranks, 2).value("pid", 0L), hit[0]) << "rank 2 is still the killed process";

  // The replacement went on where its slot's last push left off, on the
  // same share of the data: its sample log starts at the step after the
  // last one pushed (the killed worker's last logged step, or the one
  // after it), and a step both ran drew the same samples.
  std::vector<fs::path> logs;
  for (const auto& f : fs::directory_iterator(work_ / "samples")) {
    if (f.path().filename().string().find("-replica2.") != std::string::npos) {
      logs.push_back(f.path());
    }
  }
  ASSERT_EQ(logs.size(), 2u) << "worker 2's sample logs";
  std::sort(logs.begin(), logs.end(), [](const fs::path& a, const fs::path& b) {
    return std::stoll(a.filename().string().substr(4)) <
           std::stoll(b.filename().string().substr(4));
  });
  const auto before = read_steps(logs[0]);
  const auto after = read_steps(logs[1]);
  ASSERT_FALSE(before.empty());
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(before.begin()->first, 0);
  const int64_t last = before.rbegin()->first, start = after.begin()->first;
  EXPECT_GE(start, 2000);
  EXPECT_TRUE(start == last || start == last + 1)
      << "logged up to " << last << ", went on at " << start;
  if (start == last) {
    EXPECT_EQ(after.at(start), before.at(start)) << "step " << start;
  }
  EXPECT_EQ(after.rbegin()->first, kSteps - 1);
  EXPECT_EQ(static_cast<int64_t>(after.size()), kSteps - start) << "a step skipped or repeated";

  // The history keeps it.
  HistoryStore store(db(), HistoryStore::Open::kExisting);
  EXPECT_EQ(store.run(store.resolve("kill")).status, "completed");
  const ChildResult shown =
      run_child(BATON_BINARY, {"baton", "history", "show", "kill", "--db", db()}, {}, 60);
  EXPECT_NE(shown.out.find("replaced, the servers and the other workers going on"),
            std::string::npos)
      << shown.out;
}

TEST_F(LaunchPsWorkers, AStoppedWorkerIsFoundByItsSilenceAndReplaced) {
  std::vector<long> hit;
  heartbeat_timeout_ = "3";
  const auto job = launch("stop", fault(1, SIGSTOP, 2000, &hit));
  ASSERT_EQ(job.exit_code, 0) << job.err;
  ASSERT_EQ(hit.size(), 1u);
  const auto replaced = of_type(job.events, "replace");
  ASSERT_EQ(replaced.size(), 1u) << job.err;
  EXPECT_EQ(replaced[0].value("rank", -1), 1);
  EXPECT_NE(replaced[0].value("cause", "").find("no heartbeat"), std::string::npos)
      << replaced[0].dump();
  EXPECT_TRUE(of_type(job.events, "restart").empty());
  const nlohmann::json one = rank_of(last_ranks(job), 1);
  EXPECT_EQ(one.value("state", ""), "done") << one.dump();
  EXPECT_EQ(one.value("step", -1), kSteps) << one.dump();
}

TEST_F(LaunchPsWorkers, AWorkerThatKeepsDyingSpendsTheRestartsAndTheRunFails) {
  std::vector<long> hit;
  const auto job = launch("dies", fault(2, SIGKILL, 1000, &hit, true), {"--max-restarts", "1"});
  EXPECT_EQ(job.exit_code, 1) << job.err;
  EXPECT_EQ(of_type(job.events, "replace").size(), 1u);
  const auto failure = of_type(job.events, "launch_failure");
  ASSERT_EQ(failure.size(), 1u) << job.err;
  EXPECT_NE(failure[0].value("cause", "").find("no restart left"), std::string::npos)
      << failure[0].dump();
  EXPECT_EQ(hit.size(), 2u);
  HistoryStore store(db(), HistoryStore::Open::kExisting);
  EXPECT_EQ(store.run(store.resolve("dies")).status, "failed");
}

TEST_F(LaunchPsWorkers, AKilledServerRestartsTheWholeJobFromItsCheckpoint) {
  std::vector<long> hit;
  const auto job = launch("server", fault(3, SIGKILL, 2000, &hit, false, 0));
  ASSERT_EQ(job.exit_code, 0) << job.err;
  ASSERT_EQ(hit.size(), 1u);
  const auto restarts = of_type(job.events, "restart");
  ASSERT_EQ(restarts.size(), 1u) << job.err;
  EXPECT_EQ(restarts[0].value("rank", -1), 3) << restarts[0].dump();
  EXPECT_TRUE(of_type(job.events, "replace").empty());
  const auto starts = of_type(job.events, "run_start");
  ASSERT_EQ(starts.size(), 2u);
  if (restarts[0].value("step", int64_t{0}) >= 600) {
    EXPECT_GT(starts[1].value("start_step", int64_t{0}), 0) << starts[1].dump();
  }
  const nlohmann::json ranks = last_ranks(job);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(rank_of(ranks, r).value("step", -1), kSteps) << ranks.dump();
  }
}

using net_test::other_address;

// Every task on this host: the servers listen on loopback only, and greet
// a connection there with the challenge that only the job's secret answers.
TEST_F(LaunchPsWorkers, AOneHostJobsServersListenOnLoopbackOnly) {
  const std::string other = other_address();
  if (other.empty()) GTEST_SKIP() << "this host has no address but loopback";
  std::vector<std::string> checked;
  std::string problems;
  const auto job =
      launch("loopback",
             [&](const nlohmann::json& e) {
               if (e.value("type", "") != "run_start" || !checked.empty()) return;
               for (const auto& s : e.value("ps_servers", nlohmann::json::array())) {
                 const std::string address = s.get<std::string>();
                 checked.push_back(address);
                 std::string host;
                 int port = 0;
                 tcp::split_address(address, &host, &port, "ps_servers");
                 if (host != "127.0.0.1") problems += address + " is not on loopback; ";
                 try {
                   tcp::connect_to(other, port, 0.2);
                   problems += "port " + std::to_string(port) + " answers on " + other + "; ";
                 } catch (const CommError&) {
                 }
                 const tcp::Socket local = tcp::connect_to("127.0.0.1", port, 5.0);
                 int64_t kind = 0;
                 if (!tcp::recv_all(local, &kind, sizeof(kind), address) || kind != 107) {
                   problems += address + " did not open with a challenge; ";
                 }
               }
             },
             {"--set", "train.steps=3000"});
  ASSERT_EQ(job.exit_code, 0) << job.err;
  EXPECT_EQ(checked.size(), 1u) << "no run_start naming the servers";
  EXPECT_EQ(problems, "");
  // The stranger that connected was dropped and logged with its address.
  EXPECT_NE(job.err.find("dropped 127.0.0.1:"), std::string::npos) << job.err;
}

// Workers on GPUs (strategy.devices "gpu_emulated", two emulated GPUs in
// every process): the chief on the GPU of its place on its host, the
// workers outside the MPI job on their index modulo the host's GPUs. A
// killed worker's replacement joins its servers on its GPU - their values
// into its host copy, then onto the GPU - and the run completes.
TEST_F(LaunchPsWorkers, AKilledWorkerOnAGpuIsReplacedOnItsGpu) {
  if (!fs::exists(fs::path(BATON_BINARY).parent_path().parent_path() / "lib" / "baton" /
                  "baton_cuda_emu.so")) {
    GTEST_SKIP() << "built without the GPU emulator (no CUDA toolkit headers)";
  }
  // Long enough that the replacement joins before the others end (the
  // emulated GPU's step is now a CPU step's few times over).
  constexpr int kGpuSteps = 1000;
  nlohmann::json cfg = nlohmann::json::parse(kConfig);
  cfg["model"]["layers"] = {64, 64, 10};
  cfg["train"]["steps"] = kGpuSteps;
  cfg["strategy"]["devices"] = "gpu_emulated";
  cfg["checkpoint"]["every_steps"] = 100;
  std::ofstream(config_) << cfg.dump(2);
  env_.push_back("BATON_SIMT_DEVICES=2");
  std::vector<long> hit;
  const auto job = launch("gpus", fault(1, SIGKILL, 100, &hit));
  ASSERT_EQ(job.exit_code, 0) << job.err;
  ASSERT_EQ(hit.size(), 1u) << "worker 1 was never seen running past step 100";
  ASSERT_EQ(of_type(job.events, "replace").size(), 1u) << job.err;
  const auto end = of_type(job.events, "launch_end");
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(end[0].value("status", ""), "completed");
  const nlohmann::json ranks = last_ranks(job);
  for (int r = 0; r < 3; ++r) {
    const nlohmann::json one = rank_of(ranks, r);
    ASSERT_FALSE(one.is_null()) << ranks.dump();
    EXPECT_EQ(one.value("state", ""), "done") << one.dump();
    EXPECT_EQ(one.value("step", -1), kGpuSteps) << one.dump();
  }
  // The chief's GPU, sampled as it trained.
  const auto devices = of_type(job.events, "device");
  ASSERT_FALSE(devices.empty()) << job.err;
  for (const auto& d : devices) {
    EXPECT_EQ(d.value("device", ""), "gpu_emulated:0") << d.dump();
    EXPECT_TRUE(d.value("emulated", false)) << d.dump();
  }
}

}  // namespace
}  // namespace baton
