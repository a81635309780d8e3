// The multi-host test bed (testbed.sh): two "hosts", each a network
// namespace with a hostname of its own (a UTS namespace per daemon), a
// veth to a bridge and an address of its own; OpenMPI reaches them through
// an rsh agent that enters the namespace, so it sees two nodes - TCP
// between them, shared memory within. On it:
//  - `baton probe --hostfile` lists both hosts;
//  - multi_worker_mirrored (2 ranks per host, Baton's ring) and
//    parameter_server train across the hosts, and the history and the
//    launcher's rank reports name both hosts;
//  - `baton launch` restarts a job when every process of one host is killed;
//  - an asynchronous parameter server's worker killed on the other host is
//    replaced there while the job goes on;
//  - with bt-t2's link shaped: the per-link figure is the shaped rate,
//    `baton calibrate --from-history` reads it back from the run, and
//    hierarchical beats ring; the scaling predictor is within 25%;
//  - the delay line (testbed.sh delay) delays both ways.
// Needs root and `ip netns` (iproute2); reported as skipped, with the reason,
// where they are missing. The hosts are removed after the tests, and
// before them in case an earlier run left some.
#include <baton/core/child_process.h>
#include <baton/history/store.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "launch/launched_job.h"
#include "multihost/testbed_util.h"

namespace fs = std::filesystem;

namespace baton {
namespace {

using testing_launch::of_type;

const char* kPrefix = "bt-t";  // the hosts: bt-t1, bt-t2
const std::string& kTestbed = testbed::kScript;

const std::string kConfig = testing_launch::digits_config(R"({
  "name": "multihost", "seed": 7,
  "model": {"type": "mlp", "layers": [64, 128, 10], "activation": "relu"},
  "train": {"steps": 400, "global_batch_size": 64, "log_every_steps": 50},
  "strategy": {"type": "multi_worker_mirrored", "allreduce": {"algorithm": "ring"}},
  "checkpoint": {"every_steps": 50, "every_epoch": false, "keep": 2}
})");

class MultiHost : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    bed_ = testbed::TestBed(kPrefix, fs::path(BATON_TEST_WORK_DIR) / "multihost");
    if (!bed_.up(2, "ip netns, veth, a bridge", {"ip", "mpirun"})) return;
    std::ofstream(path("hosts")) << bed_.hostfile();  // "bt-t1 slots=2" ...
    std::ofstream(path("config.json")) << kConfig;
    auto ps = nlohmann::json::parse(kConfig);
    ps["strategy"] = {{"type", "parameter_server"}, {"num_ps", 1}, {"mode", "sync"}};
    std::ofstream(path("config_ps.json")) << ps.dump();
    std::printf("test bed: %s", bed_.hostfile().c_str());
  }

  static void TearDownTestSuite() { bed_.down(); }

  void SetUp() override {
    if (!bed_.skip().empty()) GTEST_SKIP() << bed_.skip();
  }

  static std::string path(const std::string& name) { return bed_.path(name); }
  static std::vector<std::string> env() { return bed_.env(); }

  // `baton launch` to its end; its events (--events -) as they came.
  std::vector<nlohmann::json> launch(const std::string& run_id, std::vector<std::string> extra,
                                     const std::function<void(const nlohmann::json&)>& on_event,
                                     const std::string& config = "config.json",
                                     const std::string& hostfile = "hosts") {
    std::vector<std::string> args = {
        "baton",      "launch",      path(config), "--hostfile",       path(hostfile),
        "--runs-dir", path("runs"),  "--db",       path("history.db"), "--run-id",
        run_id,       "--heartbeat", "0.5",        "--events",         "-",
        "-q"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto job = testing_launch::run_launcher(BATON_BINARY, args, env(), on_event, 240);
    err_ = job.err;
    exit_code_ = job.exit_code;
    return job.events;
  }

  // The hosts the launcher's rank reports saw the ranks on.
  static std::set<std::string> rank_hosts(const std::vector<nlohmann::json>& events) {
    std::set<std::string> hosts;
    for (const auto& e : of_type(events, "ranks")) {
      for (const auto& r : e["ranks"]) {
        if (r.contains("pid")) hosts.insert(r.value("host", ""));
      }
    }
    return hosts;
  }

  static inline testbed::TestBed bed_;
  std::string err_;
  int exit_code_ = -1;
};

TEST_F(MultiHost, ProbeListsEveryHost) {
  const ChildResult r = run_child(
      BATON_BINARY, {"baton", "probe", "--hostfile", path("hosts"), "--timeout", "60"}, env(), 90);
  ASSERT_TRUE(exited_ok(r.status)) << r.err;
  EXPECT_NE(r.out.find("bt-t1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bt-t2"), std::string::npos) << r.out;
}

TEST_F(MultiHost, MultiWorkerMirroredTrainsAcrossHostsTwoRanksEach) {
  const auto events = launch("mwm", {"--np", "4"}, nullptr);
  ASSERT_EQ(exit_code_, 0) << err_;
  const auto starts = of_type(events, "run_start");
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_EQ(starts[0].value("replicas", 0), 4);
  EXPECT_EQ(rank_hosts(events), (std::set<std::string>{"bt-t1", "bt-t2"}));
  // Baton's ring measured every link it used, the two between the hosts too.
  std::set<std::pair<int, int>> measured;
  for (const auto& l : of_type(events, "link")) {
    if (!l.value("estimated", true) && l.value("bandwidth_gbps", 0.0) > 0) {
      measured.insert({l.value("src", -1), l.value("dst", -1)});
    }
  }
  EXPECT_TRUE(measured.count({1, 2}) == 1 && measured.count({3, 0}) == 1)
      << "no measured figure for the links between the hosts (ranks 1->2 and 3->0)";
  HistoryStore store(path("history.db"), HistoryStore::Open::kExisting);
  const RunRecord run = store.run(store.resolve("mwm"));
  EXPECT_EQ(run.status, "completed");
  EXPECT_EQ(std::set<std::string>(run.hosts.begin(), run.hosts.end()),
            (std::set<std::string>{"bt-t1", "bt-t2"}));
}

TEST_F(MultiHost, ParameterServerTrainsAcrossHosts) {
  // Two workers on bt-t1, the server on bt-t2.
  const auto events = launch("ps", {"--np", "3"}, nullptr, "config_ps.json");
  ASSERT_EQ(exit_code_, 0) << err_;
  EXPECT_EQ(rank_hosts(events), (std::set<std::string>{"bt-t1", "bt-t2"}));
  const auto ends = of_type(events, "run_end");
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].value("status", ""), "completed");
}

// Asynchronous servers across hosts, from a hostfile of addresses: the
// chief and the server on bt-t1, a worker job of its own for each of the
// other two workers on bt-t2, which reach the server at bt-t1's address.
// A worker on bt-t2 killed is replaced there while the job goes on.
TEST_F(MultiHost, AnAsyncServersWorkerKilledOnTheOtherHostIsReplaced) {
  std::ofstream(path("hosts_by_address")) << "10.77.0.11 slots=2\n10.77.0.12 slots=2\n";
  auto ps = nlohmann::json::parse(kConfig);
  ps["strategy"] = {{"type", "parameter_server"}, {"num_ps", 1}, {"mode", "async"}};
  ps["train"]["steps"] = 40000;
  ps["train"]["log_every_steps"] = 500;
  std::ofstream(path("config_ps_async.json")) << ps.dump();
  long killed = 0;
  const auto events = launch(
      "psasync", {"--np", "4", "--host-cooldown", "0.5", "--heartbeat-timeout", "20"},
      [&](const nlohmann::json& e) {
        if (killed != 0 || e.value("type", "") != "ranks") return;
        for (const auto& r : e["ranks"]) {
          if (r.value("rank", -1) == 2 && r.value("state", "") == "running" &&
              r.value("step", int64_t{-1}) >= 500) {
            killed = r.value("pid", 0L);
            ::kill(static_cast<pid_t>(killed), SIGKILL);
          }
        }
      },
      "config_ps_async.json", "hosts_by_address");
  ASSERT_EQ(exit_code_, 0) << err_;
  ASSERT_NE(killed, 0) << "worker 2 never seen running past step 500";
  const auto replaced = of_type(events, "replace");
  ASSERT_EQ(replaced.size(), 1u) << err_;
  EXPECT_EQ(replaced[0].value("rank", -1), 2);
  EXPECT_EQ(replaced[0].value("host", ""), "10.77.0.12");
  EXPECT_TRUE(of_type(events, "restart").empty());
  EXPECT_EQ(rank_hosts(events), (std::set<std::string>{"10.77.0.11", "10.77.0.12"}));
  const auto ranks = of_type(events, "ranks");
  ASSERT_FALSE(ranks.empty());
  for (const auto& r : ranks.back()["ranks"]) {
    if (r.value("rank", -1) < 3) {
      EXPECT_EQ(r.value("state", ""), "done") << r.dump();
      EXPECT_EQ(r.value("step", int64_t{-1}), 40000) << r.dump();
    }
  }
}

// Every process on bt-t2 killed (its daemon and its two ranks: the host is
// gone): the launcher restarts the job from its newest checkpoint.
TEST_F(MultiHost, LaunchRestartsTheJobWhenOneHostsRanksAreKilled) {
  bool killed = false;
  const auto events = launch(
      "hostkill", {"--np", "4", "--set", "train.steps=1000", "--heartbeat-timeout", "10"},
      [&](const nlohmann::json& e) {
        if (killed || e.value("type", "") != "checkpoint" || e.value("step", int64_t{0}) < 100) {
          return;
        }
        const ChildResult pids = run_child(
            find_on_path("ip"), {"ip", "netns", "pids", std::string(kPrefix) + "2"}, {}, 10);
        std::istringstream in(pids.out);
        for (long pid; in >> pid;) ::kill(static_cast<pid_t>(pid), SIGKILL);
        killed = true;
      });
  ASSERT_TRUE(killed) << err_;
  ASSERT_EQ(exit_code_, 0) << err_;
  const auto restarts = of_type(events, "restart");
  ASSERT_EQ(restarts.size(), 1u) << err_;
  // OpenMPI tells the launcher the host when a rank reports its lost peer,
  // otherwise only that a daemon was lost.
  const int rank = restarts[0].value("rank", -1);
  const std::string host = restarts[0].value("host", "");
  const std::string cause = restarts[0].value("cause", "");
  EXPECT_TRUE(host == "bt-t2" || rank == 2 || rank == 3 ||
              cause.find("lost a host's daemon") != std::string::npos)
      << restarts[0].dump() << "\n"
      << err_;
  std::printf("restart cause: %s\n", cause.c_str());
  const auto starts = of_type(events, "run_start");
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_GE(starts[1].value("start_step", int64_t{0}), 100) << starts[1].dump();
  const auto ends = of_type(events, "run_end");
  ASSERT_FALSE(ends.empty());
  EXPECT_EQ(ends.back().value("status", ""), "completed");
}

// bt-t2's link shaped to `rate` both ways ("-": unshaped).
void shape_link(const char* rate) {
  const ChildResult r = run_child(kTestbed, {"testbed.sh", "shape", "bt-t2", rate, "-"}, {}, 30);
  ASSERT_TRUE(exited_ok(r.status)) << r.err;
}

// The per-link figure of a link shaped to R is R: a 2-rank ring run across
// the hosts (4.3 MB of gradients a step, so the link is busy), bt-t2's
// link shaped to 200 Mbit/s. Both ways carry the ring's traffic at once;
// rank 0 reports what it received from rank 1 (measured: the receive's
// transfer time, not the wait for the peer). `baton calibrate
// --from-history` then takes the network's bandwidth from the recorded
// run: the same rate, its latency kept from the calibration file.
TEST_F(MultiHost, TheLinkFigureOfAShapedLinkIsWithinAFifthOfItsRate) {
  shape_link("200mbit");
  const double rate_gbps = 200e6 / 8 / 1e9;
  std::ofstream(path("hosts_1")) << "bt-t1 slots=1\nbt-t2 slots=1\n";
  auto big = nlohmann::json::parse(kConfig);
  big["model"]["layers"] = {64, 1024, 1024, 10};
  big["train"]["steps"] = 30;
  big["train"]["log_every_steps"] = 10;
  big["checkpoint"]["every_steps"] = 0;
  std::ofstream(path("config_big.json")) << big.dump();
  const ChildResult run =
      run_child(find_on_path("mpirun"),
                {"mpirun", "-n", "2", "--hostfile", path("hosts_1"), BATON_BINARY, "train",
                 path("config_big.json"), "--db", path("links.db"), "--run-id", "shaped",
                 "--runs-dir", path("runs"), "--events", "-", "-q"},
                env(), 240);
  shape_link("-");
  ASSERT_TRUE(exited_ok(run.status)) << run.err;
  std::vector<double> figures;  // GB/s, 1 -> 0, measured, after the first report
  std::istringstream lines(run.out);
  for (std::string line; std::getline(lines, line);) {
    const auto e = nlohmann::json::parse(line, nullptr, false);
    if (!e.is_object() || e.value("type", "") != "link" || e.value("estimated", true)) continue;
    if (e.value("eager", false)) continue;  // under MPI's eager limit: not the link's rate
    if (e.value("src", -1) == 1 && e.value("dst", -1) == 0 && e.value("step", 0) > 10) {
      figures.push_back(e.value("bandwidth_gbps", 0.0));
    }
  }
  ASSERT_FALSE(figures.empty()) << "no measured figure for the link 1 -> 0\n" << run.out;
  for (const double f : figures) {
    std::printf("link 1 -> 0 shaped to %.4f GB/s: Baton reports %.4f GB/s (%.0f%%)\n", rate_gbps, f,
                100 * f / rate_gbps);
    EXPECT_NEAR(f, rate_gbps, 0.2 * rate_gbps);
  }

  std::ofstream(path("cal_runs.json"))
      << R"({"version": 1, "links": {"network": {"alpha_us": 42, "gbps": 1, "source": "ping"}}})";
  const ChildResult cal =
      run_child(BATON_BINARY,
                {"baton", "calibrate", "--from-history", "--db", path("links.db"), "--run",
                 "shaped", "--out", path("cal_runs.json")},
                {}, 60);
  ASSERT_TRUE(exited_ok(cal.status)) << cal.out << cal.err;
  std::printf("%s", cal.out.c_str());
  const auto net = nlohmann::json::parse(std::ifstream(path("cal_runs.json")))["links"]["network"];
  EXPECT_NEAR(net.value("gbps", 0.0), rate_gbps, 0.2 * rate_gbps) << net.dump();
  EXPECT_EQ(net.value("alpha_us", 0.0), 42.0) << "the latency is the calibration's";
  EXPECT_NE(net.value("source", "").find("measured link samples of run"), std::string::npos)
      << net.dump();
}

// With a slow link between the hosts and shared memory inside them,
// hierarchical (each host rank's chunk crosses once, both host ranks'
// rings at once) beats the flat ring (1.5x the bytes over the slow link),
// measured in one job: `baton bench allreduce --algorithm ring,hierarchical`.
TEST_F(MultiHost, HierarchicalBeatsRingOverASlowLinkBetweenHosts) {
  shape_link("200mbit");
  const ChildResult bench =
      run_child(find_on_path("mpirun"),
                {"mpirun", "-n", "4", "--hostfile", path("hosts"), BATON_BINARY, "bench",
                 "allreduce", "--algorithm", "ring,hierarchical", "--min-bytes", "4M",
                 "--max-bytes", "4M", "--iters", "4", "--warmup", "1", "--json"},
                env(), 240);
  shape_link("-");
  ASSERT_TRUE(exited_ok(bench.status)) << bench.out << bench.err;
  const auto docs = nlohmann::json::parse(bench.out);
  ASSERT_TRUE(docs.is_array() && docs.size() == 2) << bench.out;
  double ms[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(docs[k].value("wrong", int64_t{-1}), 0) << docs[k].dump();
    ms[k] = docs[k]["rows"][0]["in_place"].value("time_us", 0.0) / 1e3;
  }
  EXPECT_EQ(docs[1].value("communicator", ""), "mpi/hierarchical");
  std::printf(
      "4 MiB over 2 hosts x 2 ranks, 200 Mbit/s between them: ring %.1f ms, "
      "hierarchical %.1f ms (%.2fx)\n",
      ms[0], ms[1], ms[0] / ms[1]);
  EXPECT_LT(ms[1], ms[0]) << "hierarchical did not beat ring";
}

// The round trip of a TCP connect from bt-t1 to bt-t2 (SYN, SYN-ACK), the
// best of 20, in milliseconds.
double connect_rtt_ms() {
  const char* probe = R"(
import socket, sys, time
if sys.argv[1] == "serve":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("10.77.0.12", 5990)); s.listen(64); print("ready", flush=True)
    for _ in range(21): s.accept()[0].close()
else:
    best = 1e9
    for _ in range(20):
        t0 = time.perf_counter(); c = socket.create_connection(("10.77.0.12", 5990))
        best = min(best, time.perf_counter() - t0); c.close()
    print("%.3f" % (best * 1e3))
)";
  const std::string ip = find_on_path("ip"), py = find_on_path("python3");
  std::vector<std::string> serve = {"ip", "netns", "exec", "bt-t2", py, "-c", probe, "serve"};
  std::thread server([&] { run_child(ip, serve, {}, 60); });
  // The server prints "ready" once it listens; the client's retries cover
  // the moment before that.
  ChildResult client;
  for (int attempt = 0; attempt < 50; ++attempt) {
    client = run_child(ip, {"ip", "netns", "exec", "bt-t1", py, "-c", probe, "connect"}, {}, 60);
    if (exited_ok(client.status)) break;
  }
  run_child(ip,
            {"ip", "netns", "exec", "bt-t1", py, "-c",
             "import socket; socket.create_connection(('10.77.0.12', 5990)).close()"},
            {}, 10);  // the 21st accept: the server ends
  server.join();
  return exited_ok(client.status) ? std::stod(client.out) : -1;
}

// The delay line (testbed.sh delay: two TAP devices and a relay in user
// space, where the kernel has no netem) adds its delay both ways: a TCP
// connect's round trip grows by twice it.
TEST_F(MultiHost, TheDelayLineDelaysBothWays) {
  if (find_on_path("python3").empty()) GTEST_SKIP() << "python3 is not on PATH";
  const double before = connect_rtt_ms();
  ASSERT_GT(before, 0);
  const ChildResult on =
      run_child(kTestbed, {"testbed.sh", "delay", "bt-t2", "5", BATON_DELAY_LINE}, {}, 30);
  ASSERT_TRUE(exited_ok(on.status)) << on.out << on.err;
  const double delayed = connect_rtt_ms();
  const ChildResult off = run_child(kTestbed, {"testbed.sh", "delay", "bt-t2", "-"}, {}, 30);
  ASSERT_TRUE(exited_ok(off.status)) << off.err;
  const double after = connect_rtt_ms();
  std::printf(
      "TCP connect round trip bt-t1 -> bt-t2: %.3f ms, with a 5 ms delay line %.3f ms, "
      "without it again %.3f ms\n",
      before, delayed, after);
  EXPECT_GE(delayed - before, 10.0 * 0.9);
  EXPECT_LE(delayed - before, 10.0 * 1.5);
  EXPECT_GT(after, 0);
  EXPECT_LT(after, before + 2.0) << "the host's own link did not come back";
}

// A delay shows as latency, not bandwidth: `baton calibrate` across the
// hosts through the delay line at 200 Mbit/s, with no delay and with 5 ms
// each way. The latency (a ping-pong's half round trip) grows by the
// delay; the bandwidth (the slope between two one-message sizes) stays
// the rate. OpenMPI's TCP transport is told to send the calibration's
// messages eagerly: its rendezvous keeps about 120 KB in flight, so over
// a 10 ms round trip MPI itself moves 12 MB/s of the 25 (raw TCP: 23-25
// both ways) - printed first, as Baton reports it with MPI's defaults.
TEST_F(MultiHost, ADelayShowsAsLatencyNotBandwidth) {
  std::ofstream(path("hosts_1")) << "bt-t1 slots=1\nbt-t2 slots=1\n";
  const double rate_gbps = 200e6 / 8 / 1e9;
  auto calibrate = [&](const char* ms, bool eager) {
    const ChildResult on =
        run_child(kTestbed, {"testbed.sh", "delay", "bt-t2", ms, BATON_DELAY_LINE, "200"}, {}, 30);
    EXPECT_TRUE(exited_ok(on.status)) << on.out << on.err;
    fs::remove(path("cal_delay.json"));
    auto vars = env();
    if (eager) vars.push_back("OMPI_MCA_btl_tcp_eager_limit=1048576");
    const ChildResult cal =
        run_child(find_on_path("mpirun"),
                  {"mpirun", "-n", "2", "--hostfile", path("hosts_1"), BATON_BINARY, "calibrate",
                   "--out", path("cal_delay.json"), "--max-bytes", "1048576"},
                  vars, 180);
    run_child(kTestbed, {"testbed.sh", "delay", "bt-t2", "-"}, {}, 30);
    EXPECT_TRUE(exited_ok(cal.status)) << cal.out << cal.err;
    std::printf("%s", cal.out.c_str());
    return nlohmann::json::parse(std::ifstream(path("cal_delay.json")), nullptr, false)["links"]
        .value("network", nlohmann::json::object());
  };
  const auto mpi_default = calibrate("5", false);
  std::printf("with MPI's rendezvous, 5 ms each way: latency %.1f us, %.4f GB/s\n",
              mpi_default.value("alpha_us", 0.0), mpi_default.value("gbps", 0.0));
  const auto plain = calibrate("0", true);
  const auto delayed = calibrate("5", true);
  const double added_us = delayed.value("alpha_us", 0.0) - plain.value("alpha_us", 0.0);
  std::printf(
      "through the delay line at 200 Mbit/s: latency %.1f us, %.4f GB/s; with 5 ms each "
      "way: %.1f us, %.4f GB/s\n",
      plain.value("alpha_us", 0.0), plain.value("gbps", 0.0), delayed.value("alpha_us", 0.0),
      delayed.value("gbps", 0.0));
  EXPECT_NEAR(added_us, 5000, 1000) << "the delay is not the latency's";
  EXPECT_NEAR(plain.value("gbps", 0.0), rate_gbps, 0.2 * rate_gbps);
  EXPECT_NEAR(delayed.value("gbps", 0.0), rate_gbps, 0.2 * rate_gbps)
      << "the delay showed as bandwidth";
}

// The scaling predictor on the test bed: bt-t2's link shaped to 200
// Mbit/s (tbf; netem's delay is not in every kernel here), one rank per
// host. `baton calibrate`
// measures the link between the hosts (its "network" class), `baton
// predict` predicts a 2-host step from it and the model's step measured
// here, and a multi_worker_mirrored run across the hosts measures it:
// within 25%. Up to three calibration/prediction/run rounds (a busy shared
// machine is noise; a wrong model is wrong every time), each printed.
TEST_F(MultiHost, PredictedStepIsWithinAQuarterOfTheMeasured) {
  shape_link("200mbit");
  std::ofstream(path("hosts_1")) << "bt-t1 slots=1\nbt-t2 slots=1\n";
  std::ofstream(path("topology_2.json")) << R"({"hosts": 2, "devices_per_host": 1})";
  const std::string mpirun = find_on_path("mpirun");
  bool close = false;
  for (int attempt = 1; attempt <= 3 && !close; ++attempt) {
    // Calibrated again each attempt: the calibration is measured too, and
    // a neighbour's burst can spoil it (seen in CI: 32-byte messages at
    // 3.9 ms, so a fitted line 50% off the link's real cost).
    const ChildResult cal =
        run_child(mpirun,
                  {"mpirun", "-n", "2", "--hostfile", path("hosts_1"), BATON_BINARY, "calibrate",
                   "--out", path("cal.json"), "--max-bytes", "1048576"},
                  env(), 180);
    ASSERT_TRUE(exited_ok(cal.status)) << cal.out << cal.err;
    std::printf("%s", cal.out.c_str());
    const auto links = nlohmann::json::parse(std::ifstream(path("cal.json")))["links"];
    ASSERT_TRUE(links.contains("network")) << links.dump();
    const ChildResult pred = run_child(
        BATON_BINARY,
        {"baton", "predict", path("config.json"), "--topology", path("topology_2.json"),
         "--calibration", path("cal.json"), "--devices", "2", "--per-device-batch", "32", "--json"},
        env(), 180);
    ASSERT_TRUE(exited_ok(pred.status)) << pred.err;
    const auto p = nlohmann::json::parse(pred.out)["predictions"][0]["configured"];
    const ChildResult run = run_child(mpirun,
                                      {"mpirun",
                                       "-n",
                                       "2",
                                       "--hostfile",
                                       path("hosts_1"),
                                       BATON_BINARY,
                                       "train",
                                       path("config.json"),
                                       "--no-db",
                                       "--runs-dir",
                                       path("runs"),
                                       "--events",
                                       "-",
                                       "-q",
                                       "--set",
                                       "train.steps=200",
                                       "--set",
                                       "train.log_every_steps=10",
                                       "--set",
                                       "checkpoint.every_steps=0"},
                                      env(), 240);
    ASSERT_TRUE(exited_ok(run.status)) << run.err;
    // The step's period: the chief's wall clock between step events over
    // the steps between them (its step_time_ms leaves out the small
    // collective for the loss and what follows it).
    std::vector<double> steps;
    std::istringstream lines(run.out);
    double last_wall = -1;
    int64_t last_step = -1;
    for (std::string line; std::getline(lines, line);) {
      const auto e = nlohmann::json::parse(line, nullptr, false);
      if (!e.is_object() || e.value("type", "") != "step" || e.value("rank", -1) != 0) continue;
      const double wall = e.value("wall_time_s", 0.0);
      const int64_t step = e.value("step", int64_t{0});
      if (last_step >= 0 && step > last_step) {
        steps.push_back(1e3 * (wall - last_wall) / static_cast<double>(step - last_step));
      }
      last_wall = wall;
      last_step = step;
    }
    ASSERT_GE(steps.size(), 10u);
    steps.erase(steps.begin(), steps.begin() + 2);  // the first windows: warm-up
    std::sort(steps.begin(), steps.end());
    const double measured = steps[steps.size() / 2];
    const double predicted = p.value("step_ms", 0.0);
    const double ratio = predicted / measured;
    std::printf(
        "attempt %d: 2 hosts (200 Mbit/s): predicted %.3f ms a step (communication %.3f ms, "
        "%s), measured %.3f ms: ratio %.2f\n",
        attempt, predicted, p.value("comm_ms", 0.0), p.value("bound", "").c_str(), measured, ratio);
    close = ratio >= 0.75 && ratio <= 1.25;
  }
  shape_link("-");
  EXPECT_TRUE(close) << "every prediction was more than 25% from the measured step";
}

}  // namespace
}  // namespace baton
