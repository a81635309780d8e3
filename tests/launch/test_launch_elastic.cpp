// `baton launch` elastic, end to end under mpirun: the hosts come from a
// discovery command the test rewrites while the job runs. The "hosts" are
// names (hostA, hostB, hostC) that OpenMPI reaches through an rsh agent
// that runs the command here, so mpirun treats them as separate nodes
// (TCP between them), the way the multi-host test bed's namespaces are
// reached. Checked:
//  - 3 -> 2 -> 3 workers (a host removed from the list, then returned):
//    the job stops at a checkpoint each time and goes on with the new
//    count, no restart is spent, and the sample logs show every sample of
//    every full epoch read exactly once (the run is then stopped);
//  - a host whose rank was killed sits out its cooldown (the next attempt
//    runs without it) and joins again when the cooldown ends;
//  - too few hosts for --min-workers within --start-timeout: failed, exit 1;
//  - bad elastic input: exit 2 naming the flag or the command's line.
#include <baton/core/child_process.h>
#include <baton/train/sample_log.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launch/launched_job.h"

namespace fs = std::filesystem;

namespace baton {
namespace {

using testing_launch::of_type;

// 1797 digits, a global batch of 60: 29 batches an epoch (the last of 57).
const std::string kConfig = testing_launch::digits_config(R"({
  "name": "elastic-test", "seed": 5,
  "model": {"type": "mlp", "layers": [64, 64, 10], "activation": "relu"},
  "train": {"steps": 1500, "global_batch_size": 60, "log_every_steps": 10},
  "strategy": {"type": "multi_worker_mirrored"},
  "checkpoint": {"every_steps": 100, "every_epoch": false, "keep": 2}
})");

// OpenMPI's rsh agent: "agent HOST COMMAND..." runs COMMAND here. Each
// host's daemon keeps its session files in a folder of its own under the
// test's: on one machine (one host name) the daemons otherwise share
// /tmp/ompi.<name>.<uid>/jf.<job family>, where a folder left by an earlier
// job's killed daemon of the same 16-bit job family ends the job ("mkdir:
// File exists", seen once in CI).
const char* kAgent = R"(#!/bin/sh
OMPI_MCA_orte_tmpdir_base="$(dirname "$0")/ompi/$1"
export OMPI_MCA_orte_tmpdir_base
mkdir -p "$OMPI_MCA_orte_tmpdir_base" || exit 1
shift
exec /bin/sh -c "$*"
)";

// FAULT_RANK is killed FAULT_DELAY s after it starts, in the first attempt only.
const char* kWrapper = R"(#!/bin/bash
if [ "$OMPI_COMM_WORLD_RANK" = "${FAULT_RANK:--1}" ] && mkdir "$FAULT_MARK" 2>/dev/null; then
  me=$$
  ( sleep "$FAULT_DELAY"; kill -KILL "$me" ) &
fi
exec "$@"
)";

class LaunchElastic : public testing::Test {
 protected:
  void SetUp() override {
    if (find_on_path("mpirun").empty()) GTEST_SKIP() << "mpirun is not on PATH";
    work_ = testing_launch::fresh_test_dir(BATON_TEST_WORK_DIR);
    config_ = path("config.json");
    std::ofstream(config_) << kConfig;
    for (const auto& [name, text] : {std::pair{"agent.sh", kAgent}, {"fault.sh", kWrapper}}) {
      std::ofstream(path(name)) << text;
      fs::permissions(path(name), fs::perms::owner_all);
    }
    set_hosts("hostA:1\nhostB:1\nhostC:1\n");
  }

  std::string path(const std::string& name) const { return (work_ / name).string(); }

  // Replaces the discovery command's list at once (a reader sees the old
  // file or the new one).
  void set_hosts(const std::string& text) {
    std::ofstream(path("hosts.new")) << text;
    fs::rename(path("hosts.new"), path("hosts"));
  }

  std::vector<std::string> env() const {
    return {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
            "OMPI_MCA_plm_rsh_agent=" + path("agent.sh"),
            // The agent's daemons all run here: each talks to mpirun directly.
            "OMPI_MCA_routed=direct", "FAULT_MARK=" + path("fault.mark")};
  }

  std::vector<std::string> args(std::vector<std::string> extra) const {
    std::vector<std::string> a = {"baton",
                                  "launch",
                                  config_,
                                  "--host-discovery",
                                  "cat " + path("hosts"),
                                  "--discovery-interval",
                                  "0.3",
                                  "--runs-dir",
                                  path("runs"),
                                  "--db",
                                  path("history.db"),
                                  "--run-id",
                                  "elastic",
                                  "--heartbeat",
                                  "0.2",
                                  "--heartbeat-timeout",
                                  "10",
                                  "--sample-log",
                                  path("samples"),
                                  "--events",
                                  "-",
                                  "-q"};
    a.insert(a.end(), extra.begin(), extra.end());
    a.insert(a.end(), {"--rank-wrapper", path("fault.sh")});  // takes what follows: last
    return a;
  }

  // Runs the launcher to its end; `on_event` sees each event line as it
  // comes (and may change the hosts). The events, in order.
  // With `interrupt`: the launcher gets a SIGINT once it is set (the run
  // then ends "interrupted" at a checkpoint).
  std::vector<nlohmann::json> launch(std::vector<std::string> extra,
                                     const std::function<void(const nlohmann::json&)>& on_event,
                                     std::vector<std::string> more_env = {},
                                     const bool* interrupt = nullptr) {
    auto e = env();
    e.insert(e.end(), more_env.begin(), more_env.end());
    auto job = testing_launch::run_launcher(BATON_BINARY, args(std::move(extra)), e, on_event, 300,
                                            interrupt);
    stderr_ = job.err;
    std::ofstream(path("launcher.stderr")) << stderr_;  // to read after a run
    exit_code_ = job.exit_code;
    return std::move(job.events);
  }

  // Every step of the run read by the attempt that ran it last; each full
  // epoch's samples are 0..n-1, each once.
  void expect_each_sample_once_per_epoch(int64_t steps) {
    const auto log = read_sample_logs(path("samples"));
    ASSERT_EQ(static_cast<int64_t>(log.size()), steps) << "steps in the sample logs";
    std::map<int64_t, std::vector<int64_t>> per_epoch;
    for (const auto& [step, st] : log) {
      auto& v = per_epoch[st.epoch];
      v.insert(v.end(), st.samples.begin(), st.samples.end());
    }
    const int64_t n = 1797, batches = 30;  // 29 full batches and one of 57
    int checked = 0;
    for (auto& [epoch, v] : per_epoch) {
      if (epoch == per_epoch.rbegin()->first) continue;  // the last may be cut by train.steps
      std::vector<int> seen(n, 0);
      for (const int64_t i : v) {
        ASSERT_TRUE(i >= 0 && i < n) << "sample " << i << " in epoch " << epoch;
        ++seen[static_cast<size_t>(i)];
      }
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(seen[static_cast<size_t>(i)], 1)
            << "sample " << i << " was read " << seen[static_cast<size_t>(i)] << " times in epoch "
            << epoch;
      }
      ++checked;
    }
    EXPECT_EQ(checked, static_cast<int>((steps + batches - 1) / batches) - 1);
    EXPECT_GE(checked, 5) << "too few full epochs to check";
  }

  fs::path work_;
  std::string config_;
  std::string stderr_;
  int exit_code_ = -1;
};

// Asynchronous parameter servers: the workers follow the hosts while the
// server goes on (no stop, no restart). Slots: 127.0.0.2 holds the chief
// and the server, .3 and .4 a worker each (the agent runs them all here;
// these addresses reach this machine). Host .4 leaves: its worker ends and
// the others train on; it comes back: a worker joins there, in the same
// slot, going on from that slot's last push.
TEST_F(LaunchElastic, ParameterServerWorkersLeaveAndJoinWithTheirHosts) {
  set_hosts("127.0.0.2:2\n127.0.0.3:1\n127.0.0.4:1\n");
  int phase = 0;  // 0: 3 workers; 1: .4 removed; 2: its worker left; 3: .4 back; 4: joined
  const auto events =
      launch({"--min-workers", "2", "--max-workers", "4", "--set", "train.steps=40000", "--set",
              "strategy.type=parameter_server", "--set", "strategy.num_ps=1", "--set",
              "strategy.mode=async", "--max-restarts", "0"},
             [&](const nlohmann::json& e) {
               const std::string type = e.value("type", "");
               if (phase == 0 && type == "ranks") {
                 for (const auto& r : e.value("ranks", nlohmann::json::array())) {
                   if (r.value("rank", -1) == 2 && r.value("state", "") == "running" &&
                       r.value("step", int64_t{-1}) >= 1000) {
                     set_hosts("127.0.0.2:2\n127.0.0.3:1\n");
                     phase = 1;
                   }
                 }
               } else if (phase == 1 && type == "scale" && e.value("change", "") == "left") {
                 phase = 2;
                 set_hosts("127.0.0.2:2\n127.0.0.3:1\n127.0.0.4:1\n");
                 phase = 3;
               } else if (phase == 3 && type == "scale" && e.value("change", "") == "joined") {
                 phase = 4;
               }
             });
  ASSERT_EQ(exit_code_, 0) << stderr_;
  EXPECT_EQ(phase, 4) << stderr_;
  const auto scale = of_type(events, "scale");
  ASSERT_EQ(scale.size(), 2u) << stderr_;
  EXPECT_EQ(scale[0].value("rank", -1), 2);
  EXPECT_EQ(scale[0].value("host", ""), "127.0.0.4");
  EXPECT_EQ(scale[0].value("workers", 0), 2);
  EXPECT_EQ(scale[1].value("rank", -1), 2);
  EXPECT_EQ(scale[1].value("workers", 0), 3);
  // The job itself never stopped.
  EXPECT_TRUE(of_type(events, "restart").empty());
  EXPECT_TRUE(of_type(events, "rescale").empty());
  EXPECT_EQ(of_type(events, "attempt_start").size(), 1u);
  // The worker that joined trained its slot to the end, from where the
  // slot's last push left off.
  const auto ranks = of_type(events, "ranks");
  ASSERT_FALSE(ranks.empty());
  int done = 0;
  for (const auto& r : ranks.back().value("ranks", nlohmann::json::array())) {
    if (r.value("rank", -1) < 3) {
      EXPECT_EQ(r.value("state", ""), "done") << r.dump();
      EXPECT_EQ(r.value("step", int64_t{-1}), 40000) << r.dump();
      ++done;
    }
  }
  EXPECT_EQ(done, 3);
  std::vector<int64_t> starts;
  for (const auto& f : fs::directory_iterator(path("samples"))) {
    const std::string name = f.path().filename().string();
    if (name.find("-replica2.") != std::string::npos) starts.push_back(std::stoll(name.substr(4)));
  }
  std::sort(starts.begin(), starts.end());
  ASSERT_EQ(starts.size(), 2u) << "slot 2's sample logs";
  EXPECT_EQ(starts[0], 0);
  EXPECT_GE(starts[1], 1000) << "the worker that joined started its slot over";
}

// The run ends with a stop (Ctrl-C) once it has gone on with 3 workers
// again: how long it takes follows the events, not the machine's speed.
TEST_F(LaunchElastic, ThreeTwoThreeWorkersSeeEverySampleOfEachEpochOnce) {
  int64_t removed_at = -1, rescaled_at = -1;
  int phase = 0;  // 0: 3 workers; 1: host C removed; 2: 2 workers; 3: back; 4: 3 workers again
  bool stop = false;
  const auto events = launch(
      {"--min-workers", "2", "--max-workers", "3", "--set", "train.steps=100000"},
      [&](const nlohmann::json& e) {
        const std::string type = e.value("type", "");
        const int64_t step = e.value("step", int64_t{-1});
        if (phase == 0 && type == "step" && step >= 150) {
          set_hosts("hostA:1\nhostB:1\n");
          removed_at = step;
          phase = 1;
        } else if (phase == 1 && type == "rescale") {
          rescaled_at = step;
          phase = 2;
        } else if (phase == 2 && type == "step" && step >= rescaled_at + 150) {
          set_hosts("hostA:1\nhostB:1\nhostC:1\n");
          phase = 3;
        } else if (phase == 3 && type == "rescale") {
          rescaled_at = step;
          phase = 4;
        } else if (phase == 4 && type == "step" && step >= rescaled_at + 150) {
          stop = true;
        }
      },
      {}, &stop);
  ASSERT_EQ(exit_code_, 130) << stderr_;
  EXPECT_EQ(phase, 4);
  const auto rescales = of_type(events, "rescale");
  ASSERT_EQ(rescales.size(), 2u) << stderr_;
  EXPECT_EQ(rescales[0].value("from", 0), 3);
  EXPECT_EQ(rescales[0].value("to", 0), 2);
  EXPECT_NE(rescales[0].value("cause", "").find("hostC left"), std::string::npos);
  EXPECT_GE(rescales[0].value("step", int64_t{0}), removed_at);
  EXPECT_EQ(rescales[1].value("from", 0), 2);
  EXPECT_EQ(rescales[1].value("to", 0), 3);
  for (const auto& r : of_type(events, "restart")) {
    ADD_FAILURE() << "a rescale is not a failure, but a restart was spent: " << r.dump() << "\n"
                  << stderr_;
  }
  const auto starts = of_type(events, "attempt_start");
  ASSERT_EQ(starts.size(), 3u);
  EXPECT_EQ(starts[0].value("workers", 0), 3);
  EXPECT_EQ(starts[1].value("workers", 0), 2);
  EXPECT_EQ(starts[2].value("workers", 0), 3);
  for (const auto& h : starts[1]["hosts"]) EXPECT_NE(h.value("host", ""), "hostC");
  // Each attempt resumed where the one before stopped.
  const auto runs = of_type(events, "run_start");
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[1].value("start_step", int64_t{-1}), rescales[0].value("step", int64_t{-2}));
  EXPECT_EQ(runs[2].value("start_step", int64_t{-1}), rescales[1].value("step", int64_t{-2}));
  const auto end = of_type(events, "launch_end");
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(end[0].value("status", ""), "interrupted");
  EXPECT_EQ(end[0].value("rescales", 0), 2);
  const int64_t last = of_type(events, "run_end").back().value("step", int64_t{0});
  std::printf(
      "rescaled at steps %lld (3 -> 2) and %lld (2 -> 3), stopped at %lld; 30 steps an "
      "epoch\n",
      static_cast<long long>(rescales[0].value("step", int64_t{0})),
      static_cast<long long>(rescales[1].value("step", int64_t{0})), static_cast<long long>(last));
  expect_each_sample_once_per_epoch(last);
  // The steps each attempt ran, with its worker count.
  const auto log = read_sample_logs(path("samples"));
  EXPECT_EQ(log.at(0).replicas, 3);
  EXPECT_EQ(log.at(rescales[0].value("step", int64_t{0})).replicas, 2);
  EXPECT_EQ(log.at(last - 1).replicas, 3);
}

TEST_F(LaunchElastic, AHostWhoseRankDiedSitsOutItsCooldownThenRejoins) {
  // Rank 2 runs on hostC; killed 1.5 s in, the next attempt runs on A and B
  // until hostC's cooldown (3 s) ends, then the job grows back to 3, and is
  // stopped (Ctrl-C) 100 steps later.
  bool stop = false;
  int64_t grown_at = -1;
  const auto events = launch(
      {"--min-workers", "2", "--host-cooldown", "3", "--set", "train.steps=100000"},
      [&](const nlohmann::json& e) {
        const std::string type = e.value("type", "");
        if (type == "rescale") grown_at = e.value("step", int64_t{0});
        if (grown_at >= 0 && type == "step" && e.value("step", int64_t{0}) >= grown_at + 100) {
          stop = true;
        }
      },
      {"FAULT_RANK=2", "FAULT_DELAY=1.5"}, &stop);
  ASSERT_EQ(exit_code_, 130) << stderr_;
  const auto restarts = of_type(events, "restart");
  ASSERT_EQ(restarts.size(), 1u) << stderr_;
  EXPECT_EQ(restarts[0].value("rank", -1), 2);
  EXPECT_EQ(restarts[0].value("host", ""), "hostC");
  const auto starts = of_type(events, "attempt_start");
  ASSERT_GE(starts.size(), 3u);
  EXPECT_EQ(starts[1].value("workers", 0), 2);
  for (const auto& h : starts[1]["hosts"]) EXPECT_NE(h.value("host", ""), "hostC");
  const auto rescales = of_type(events, "rescale");
  ASSERT_EQ(rescales.size(), 1u);
  EXPECT_EQ(rescales[0].value("to", 0), 3);
  EXPECT_NE(rescales[0].value("cause", "").find("joined"), std::string::npos);
  // Not before the cooldown ended (a cooldown not applied, or shorter,
  // lets it back at the next reading of the host list, 0.3 s later).
  // Both are Unix times: a missing one (0) would make the difference vacuous.
  const double detected = restarts[0].value("detected", 0.0);
  const double rejoined = rescales[0].value("time", 0.0);
  ASSERT_GT(detected, 1e9) << restarts[0].dump();
  ASSERT_GT(rejoined, detected) << rescales[0].dump();
  EXPECT_GE(rejoined - detected, 3.0);
  expect_each_sample_once_per_epoch(of_type(events, "run_end").back().value("step", int64_t{0}));
}

TEST_F(LaunchElastic, TooFewHostsWithinTheStartTimeoutFails) {
  const auto events =
      launch({"--min-workers", "4", "--start-timeout", "1", "--max-restarts", "0"}, nullptr);
  EXPECT_EQ(exit_code_, 1) << stderr_;
  const auto end = of_type(events, "launch_end");
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(end[0].value("status", ""), "failed");
  EXPECT_EQ(end[0].value("attempts", -1), 0);
  const std::string reason = end[0].value("reason", "");
  EXPECT_NE(reason.find("3 usable slots"), std::string::npos) << reason;
  EXPECT_NE(reason.find("--min-workers is 4"), std::string::npos) << reason;
  EXPECT_FALSE(fs::exists(path("samples"))) << "a rank started";
}

// A TF_CONFIG file instead of a hostfile: a rank per task, on its host.
TEST_F(LaunchElastic, ATfConfigFileGivesTheRanksAndTheirHosts) {
  std::ofstream(path("tf_config.json"))
      << R"({"cluster": {"chief": ["hostA:2222"], "worker": ["hostB:2222", "hostC:2222"]}})";
  const auto job = testing_launch::run_launcher(
      BATON_BINARY,
      {"baton", "launch", config_, "--tf-config", path("tf_config.json"), "--runs-dir",
       path("runs"), "--db", path("history.db"), "--set", "train.steps=300", "--events", "-", "-q"},
      env(), nullptr);
  ASSERT_EQ(job.exit_code, 0) << job.err;
  const auto starts = of_type(job.events, "run_start");
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].value("replicas", 0), 3);
  const auto ranks = of_type(job.events, "ranks");
  ASSERT_FALSE(ranks.empty());
  EXPECT_EQ(ranks.back()["ranks"].size(), 3u);
}

// TF_CONFIG's tasks for asynchronous servers: each task on its own host
// (the chief and the server on .2, a worker each on .3 and .4), and a
// worker killed there is replaced on its host while the job goes on.
TEST_F(LaunchElastic, TfConfigParameterServerTasksRunOnTheirHostsAndAWorkerIsReplaced) {
  std::ofstream(path("tf_ps.json")) << R"({"cluster": {"chief": ["127.0.0.2:2222"],
      "worker": ["127.0.0.3:2222", "127.0.0.4:2222"], "ps": ["127.0.0.2:2223"]}})";
  long killed = 0;
  // The chief and worker 1 are held (SIGSTOP) from the kill until the
  // replacement beats: otherwise, on a loaded machine, they can take the
  // global step to its end before the replacement has a host (the failed
  // host's cooldown, then a process start), and nothing would show it ran.
  // Held, they still count as alive: 30 s without a beat is a hang.
  std::vector<pid_t> held;
  bool replacement_seen = false;
  const auto release = [&] {
    for (const pid_t p : held) ::kill(p, SIGCONT);
    held.clear();
  };
  const auto job = testing_launch::run_launcher(
      BATON_BINARY,
      {"baton",
       "launch",
       config_,
       "--tf-config",
       path("tf_ps.json"),
       "--runs-dir",
       path("runs"),
       "--db",
       path("history.db"),
       "--set",
       "train.steps=40000",
       "--set",
       "strategy.type=parameter_server",
       "--set",
       "strategy.num_ps=1",
       "--set",
       "strategy.mode=async",
       "--host-cooldown",
       "0.5",
       "--heartbeat",
       "0.2",
       "--events",
       "-",
       "-q"},
      env(), [&](const nlohmann::json& e) {
        if (e.value("type", "") != "ranks") return;
        if (killed != 0) {
          for (const auto& r : e["ranks"]) {
            const long pid = r.value("pid", 0L);
            if (r.value("rank", -1) == 2 && r.value("state", "") == "running" && pid != 0 &&
                pid != killed) {
              replacement_seen = true;
              release();
            }
          }
          return;
        }
        for (const auto& r : e["ranks"]) {
          if (r.value("rank", -1) == 2 && r.value("state", "") == "running" &&
              r.value("step", int64_t{-1}) >= 1000) {
            killed = r.value("pid", 0L);
          }
        }
        if (killed == 0) return;
        for (const auto& r : e["ranks"]) {
          const int rank = r.value("rank", -1);
          const long pid = r.value("pid", 0L);
          if ((rank == 0 || rank == 1) && pid > 0 && ::kill(static_cast<pid_t>(pid), SIGSTOP) == 0)
            held.push_back(static_cast<pid_t>(pid));
        }
        ::kill(static_cast<pid_t>(killed), SIGKILL);
      });
  release();
  ASSERT_EQ(job.exit_code, 0) << job.err;
  ASSERT_NE(killed, 0) << "worker 2 never seen running past step 1000";
  EXPECT_TRUE(replacement_seen) << "worker 2's replacement never seen running";
  const auto replaced = of_type(job.events, "replace");
  ASSERT_EQ(replaced.size(), 1u) << job.err;
  EXPECT_EQ(replaced[0].value("host", ""), "127.0.0.4");
  EXPECT_TRUE(of_type(job.events, "restart").empty());
  // Before the kill every task ran on its own host.
  nlohmann::json before;
  for (const auto& e : job.events) {
    if (e.value("type", "") == "replace") break;
    if (e.value("type", "") == "ranks") before = e;
  }
  ASSERT_FALSE(before.is_null());
  const std::map<int, std::string> want = {
      {0, "127.0.0.2"}, {1, "127.0.0.3"}, {2, "127.0.0.4"}, {3, "127.0.0.2"}};
  for (const auto& r : before["ranks"]) {
    const int rank = r.value("rank", -1);
    ASSERT_EQ(want.count(rank), 1u) << r.dump();
    EXPECT_EQ(r.value("host", ""), want.at(rank)) << r.dump();
  }
  // The replacement ran on a worker task's host: .4 again, or .3 once its
  // own worker was done there (.4 sits out its cooldown after the death).
  const auto ranks = of_type(job.events, "ranks");
  for (const auto& r : ranks.back()["ranks"]) {
    const int rank = r.value("rank", -1);
    if (rank == 2) {
      EXPECT_TRUE(r.value("host", "") == "127.0.0.4" || r.value("host", "") == "127.0.0.3")
          << r.dump();
    }
    if (rank < 3) {
      EXPECT_EQ(r.value("step", int64_t{-1}), 40000) << r.dump();
    }
  }
}

TEST_F(LaunchElastic, BadElasticInputIsExitTwoNamingWhatIsWrong) {
  const auto run = [&](std::vector<std::string> a) {
    a.insert(a.begin(), {"baton", "launch", config_});
    const ChildResult r = run_child(BATON_BINARY, a, env(), 60);
    return std::pair{WIFEXITED(r.status) ? WEXITSTATUS(r.status) : -1, r.err};
  };
  const auto expect = [&](std::vector<std::string> a, const std::string& said) {
    const auto [code, err] = run(a);
    EXPECT_EQ(code, 2) << err;
    EXPECT_NE(err.find(said), std::string::npos) << "wanted \"" << said << "\" in: " << err;
  };
  expect({"--host-discovery", "echo broken >&2; exit 4"}, "failed (exit 4): broken");
  expect({"--host-discovery", "echo 'hostA:1'; echo 'hostB slots=2'"},
         "output:2: expected one \"host:slots\"");
  expect({"--host-discovery", "echo hostA:zero"}, "output:1: slots");
  expect({"--host-discovery", "cat " + path("hosts"), "--min-workers", "3", "--max-workers", "2"},
         "--min-workers 3 is above --max-workers 2");
  expect({"--host-discovery", "cat " + path("hosts"), "--np", "2"}, "--np fixes the worker count");
  expect({"--min-workers", "2"}, "need the hosts");
  std::ofstream(path("nohosts")) << "# every host is gone\n";
  expect({"--hostfile", path("nohosts"), "--min-workers", "1"}, path("nohosts") + ": no hosts");
  std::ofstream(path("hostfile")) << "hostA slots=1\n";
  expect({"--host-discovery", "cat " + path("hosts"), "--hostfile", path("hostfile")},
         "give one of them");
  expect({"--host-discovery", "cat " + path("hosts"), "--host-cooldown", "0"}, "--host-cooldown");
  expect({"--host-discovery", "cat " + path("hosts"), "--elastic-bogus", "1"}, "--elastic-bogus");
  // TF_CONFIG: its tasks against --np and the config's servers.
  std::ofstream(path("tf.json")) << R"({"cluster": {"worker": ["hostA:1", "hostB:1"],
                                                   "ps": ["hostC:1"]}})";
  expect({"--tf-config", path("tf.json")},
         "1 ps task(s), but the config's strategy is "
         "multi_worker_mirrored");
  expect({"--tf-config", path("tf.json"), "--np", "2", "--set", "strategy.type=parameter_server",
          "--set", "strategy.num_ps=1"},
         "has 3 tasks");
  std::ofstream(path("bad_tf.json")) << R"({"cluster": {"worker": ["hostA"]}})";
  expect({"--tf-config", path("bad_tf.json")}, path("bad_tf.json"));
  expect({"--tf-config", path("tf.json"), "--min-workers", "2"}, "--tf-config fixes the tasks");
  EXPECT_FALSE(fs::exists(path("runs"))) << "a run started";
}

}  // namespace
}  // namespace baton
