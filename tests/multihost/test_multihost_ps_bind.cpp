// Where an asynchronous parameter server of a multi-host job listens, on
// the multi-host test bed (testbed.sh): only on the address the job places
// it on - its host as the hostfile or TF_CONFIG names it - and not on the
// other addresses of that host (a second address, and its loopback), while the job trains on; the
// chief names the servers to the workers by that same address. The second address is on an
// interface of its own (one end of a veth pair inside the host, outside the test
// bed's 10.77.0.0/24, where OpenMPI's own TCP is kept: a second address on eth0 confused OpenMPI's
// TCP transport about which address its peer has).
//  - a hostfile of addresses: the chief and the server on bt-b1 (the
//    workers on bt-b2);
//  - a TF_CONFIG file: the server on bt-b2, a host of its own apart from
//    the chief's.
// And without the test bed (mpirun on this host alone): a server placed on
// an address that is not its host's refuses to start, exit 2, saying so,
// rather than listening anywhere else.
// The test-bed cases need root and `ip netns`; reported as skipped, with
// the reason, where they are missing.
#include <baton/core/child_process.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "launch/launched_job.h"
#include "multihost/testbed_util.h"

namespace fs = std::filesystem;

namespace baton {
namespace {

using testing_launch::of_type;

const char* kPrefix = "bt-b";  // the hosts: bt-b1 (10.77.0.11), bt-b2 (10.77.0.12)
// Steps of the tiny MLP (about 2 s of a run here). The probes no longer
// depend on catching a window of steps: the trainers are held while they
// run (expect_bound_to_its_place); a 40000-step run once finished before
// any ranks event (one a second, or on a change) fell inside the old
// window of steps 200-20000.
constexpr int64_t kSteps = 40000;

const std::string kConfig = testing_launch::digits_config(R"({
  "name": "ps-bind", "seed": 5,
  "model": {"type": "mlp", "layers": [64, 32, 10], "activation": "relu"},
  "train": {"steps": 40000, "global_batch_size": 64, "log_every_steps": 5000},
  "strategy": {"type": "parameter_server", "num_ps": 1, "mode": "async"},
  "checkpoint": {"every_steps": 0, "every_epoch": false}
})");

fs::path work_dir() { return fs::path(BATON_TEST_WORK_DIR) / "multihost_ps_bind"; }

// A connection to address:port from inside host `ns`'s namespace:
// "connected", or what bash's connect said (e.g. "Connection refused").
std::string connect_from(const std::string& ns, const std::string& address, int port) {
  const ChildResult r =
      run_child(find_on_path("ip"),
                {"ip", "netns", "exec", ns, "bash", "-c",
                 "exec 3<>/dev/tcp/" + address + "/" + std::to_string(port) + " && echo connected"},
                {}, 10);
  return exited_ok(r.status) ? "connected" : r.err.substr(0, r.err.find('\n'));
}

class MultiHostPsBind : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    bed_ = testbed::TestBed(kPrefix, work_dir());
    if (bed_.up(2, "ip netns, veth, a bridge", {"ip", "mpirun", "bash"})) {
      std::ofstream(path("config.json")) << kConfig;
    }
  }

  static void TearDownTestSuite() { bed_.down(); }

  void SetUp() override {
    if (!bed_.skip().empty()) GTEST_SKIP() << bed_.skip();
  }

  static std::string path(const std::string& name) { return bed_.path(name); }
  static std::vector<std::string> env() { return bed_.env(); }

  // `ip ARGS...` in host `ns`'s namespace (its second address, added and
  // removed).
  static void ip_in(const std::string& ns, const std::vector<std::string>& args) {
    std::vector<std::string> a{"ip", "-n", ns};
    a.insert(a.end(), args.begin(), args.end());
    const ChildResult r = run_child(find_on_path("ip"), a, {}, 10);
    ASSERT_TRUE(exited_ok(r.status)) << r.err;
  }

  // Runs `baton launch` with `placement` (--hostfile FILE or --tf-config
  // FILE); the server is on host `ns`, placed at `placed`, and `other`
  // (added here) is a second address of that host. Once worker 2 runs (and
  // has not finished), with the chief and the workers held: the server's port (from the chief's
  // run_start) is at `placed` and reachable there from host `from`, and refused on the server's own
  // host at `other` and at 127.0.0.1. Then the job trains on to its end.
  void expect_bound_to_its_place(const std::string& run_id, std::vector<std::string> placement,
                                 const std::string& ns, const std::string& placed,
                                 const std::string& other, const std::string& from) {
    ip_in(ns, {"link", "add", "extra0", "type", "veth", "peer", "name", "extra1"});
    ip_in(ns, {"addr", "add", other + "/24", "dev", "extra0"});
    ip_in(ns, {"link", "set", "extra0", "up"});
    int port = 0;
    bool probed = false;
    std::string at_placed, at_other, at_loopback;
    // clang-format off
    std::vector<std::string> args = {
        "baton", "launch", path("config.json"),
        "--runs-dir", path("runs"), "--db", path("history.db"), "--run-id", run_id,
        "--heartbeat", "0.2", "--events", "-", "-q"};
    // clang-format on
    args.insert(args.end(), placement.begin(), placement.end());
    const auto job = testing_launch::run_launcher(
        BATON_BINARY, args, env(),
        [&](const nlohmann::json& e) {
          const std::string type = e.value("type", "");
          if (type == "run_start" && e.contains("ps_servers")) {
            const auto servers = e["ps_servers"];
            ASSERT_EQ(servers.size(), 1u) << e.dump();
            const std::string s = servers[0].get<std::string>();
            ASSERT_EQ(s.rfind(placed + ":", 0), 0u) << "the chief names the server " << s;
            port = std::stoi(s.substr(placed.size() + 1));
          }
          if (probed || port == 0 || type != "ranks") return;
          bool worker_running = false;
          std::vector<pid_t> trainers;  // the chief and the workers (ranks 0-2)
          for (const auto& r : e["ranks"]) {
            const int rank = r.value("rank", -1);
            const long pid = r.value("pid", 0L);
            if (rank == 2 && r.value("state", "") == "running" &&
                r.value("step", int64_t{-1}) < kSteps)
              worker_running = true;
            if (rank >= 0 && rank < 3 && pid > 0) trainers.push_back(static_cast<pid_t>(pid));
          }
          if (!worker_running) return;
          // Mid-run, held there while the probes run (SIGSTOP: the server
          // is not stopped and keeps listening; the job cannot reach its
          // end first, however fast it runs; 30 s without a beat would be
          // a hang, the probes take well under a second), then it trains
          // on to its end.
          std::vector<pid_t> held;
          for (const pid_t p : trainers)
            if (::kill(p, SIGSTOP) == 0) held.push_back(p);
          at_placed = connect_from(from, placed, port);
          at_other = connect_from(ns, other, port);
          at_loopback = connect_from(ns, "127.0.0.1", port);
          for (const pid_t p : held) ::kill(p, SIGCONT);
          probed = true;
        },
        120);
    ip_in(ns, {"link", "del", "extra0"});
    ASSERT_EQ(job.exit_code, 0) << job.err;
    ASSERT_TRUE(probed) << "worker 2 never seen running before the end\n" << job.err;
    std::printf("server port %d: at %s: %s; at %s: %s; at %s's 127.0.0.1: %s\n", port,
                placed.c_str(), at_placed.c_str(), other.c_str(), at_other.c_str(), ns.c_str(),
                at_loopback.c_str());
    EXPECT_EQ(at_placed, "connected");
    // Refused: the address is there, nothing listens on it.
    EXPECT_NE(at_other.find("Connection refused"), std::string::npos) << at_other;
    EXPECT_NE(at_loopback.find("Connection refused"), std::string::npos) << at_loopback;
    // The job trained on: no worker replaced or restarted, each to its end.
    EXPECT_TRUE(of_type(job.events, "replace").empty()) << job.err;
    EXPECT_TRUE(of_type(job.events, "restart").empty()) << job.err;
    const auto ranks = of_type(job.events, "ranks");
    ASSERT_FALSE(ranks.empty());
    for (const auto& r : ranks.back()["ranks"]) {
      if (r.value("rank", -1) < 3) {
        EXPECT_EQ(r.value("step", int64_t{-1}), kSteps) << r.dump();
      }
    }
  }

  static inline testbed::TestBed bed_;
};

// A hostfile of addresses: the chief and the server on bt-b1 (its first
// two slots), the two other workers on bt-b2.
TEST_F(MultiHostPsBind, AHostfileServerListensOnlyOnItsHostsListedAddress) {
  std::ofstream(path("hosts")) << "10.77.0.11 slots=2\n10.77.0.12 slots=2\n";
  expect_bound_to_its_place("hostfile", {"--hostfile", path("hosts"), "--np", "4"}, "bt-b1",
                            "10.77.0.11", "10.77.1.11", "bt-b2");
}

// TF_CONFIG: the chief and worker 1 on bt-b1, worker 2 and the ps task on
// bt-b2, apart from the chief.
TEST_F(MultiHostPsBind, ATfConfigServerListensOnlyOnItsTasksHost) {
  std::ofstream(path("tf.json")) << R"({"cluster": {"chief": ["10.77.0.11:2222"],
      "worker": ["10.77.0.11:2223", "10.77.0.12:2222"], "ps": ["10.77.0.12:2223"]}})";
  expect_bound_to_its_place("tfconfig", {"--tf-config", path("tf.json")}, "bt-b2", "10.77.0.12",
                            "10.77.1.12", "bt-b1");
}

// A server placed on an address that is not its host's (192.0.2.1,
// TEST-NET-1) refuses to start, exit 2, naming the address and this host's
// own, rather than listen on every address; a --ps-bind list of the wrong
// length is refused too. No test bed needed: mpirun on this host.
TEST(PsBind, AServerPlacedOffItsHostRefusesToStart) {
  if (find_on_path("mpirun").empty()) GTEST_SKIP() << "mpirun is not on PATH";
  fs::create_directories(work_dir());
  const std::string config = (work_dir() / "refuse.json").string();
  std::ofstream(config) << kConfig;
  const auto train = [&](const std::string& bind) {
    return run_child(find_on_path("mpirun"),
                     {"mpirun", "-n", "2", "--oversubscribe", BATON_BINARY, "train", config,
                      "--no-db", "--runs-dir", (work_dir() / "runs").string(), "--ps-workers", "2",
                      "--ps-bind", bind, "-q"},
                     {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                      "OMPI_MCA_rtc_hwloc_vmhole=none", "BATON_JOB_SECRET=" + std::string(64, 'a')},
                     60);
  };
  const ChildResult off = train("192.0.2.1");
  EXPECT_TRUE(WIFEXITED(off.status) && WEXITSTATUS(off.status) == 2)
      << describe_exit(off.status) << "\n"
      << off.err;
  EXPECT_NE(off.err.find("--ps-bind: the job places this server on \"192.0.2.1\""),
            std::string::npos)
      << off.err;
  EXPECT_NE(off.err.find("which is not an address of the host it runs on"), std::string::npos)
      << off.err;
  const ChildResult count = train("127.0.0.1,127.0.0.1");
  EXPECT_TRUE(WIFEXITED(count.status) && WEXITSTATUS(count.status) == 2)
      << describe_exit(count.status) << "\n"
      << count.err;
  EXPECT_NE(count.err.find("--ps-bind: 2 addresses for 1 server(s)"), std::string::npos)
      << count.err;
}

}  // namespace
}  // namespace baton
