// Cluster specs: TF_CONFIG reading and writing, rank order, strategy checks,
// and OpenMPI hostfiles. Every malformed case checks that the message names
// the place (key path, or path:line).
#include <baton/cluster/cluster_spec.h>
#include <baton/core/error.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "input_error_util.h"

using baton_test::contains;
using baton_test::input_error;
using baton_test::starts_with;

namespace fs = std::filesystem;
using baton::ClusterSpec;
using baton::HostfileEntry;
using baton::HostPort;
using baton::TaskId;
using baton::TaskRole;

namespace {

// The message for a TF_CONFIG text read from the "TF_CONFIG" variable.
std::string tf_error(const std::string& text) {
  return input_error([&] { (void)baton::parse_tf_config(text, "TF_CONFIG"); });
}

std::string hostfile_error(const std::string& text) {
  return input_error([&] { (void)baton::parse_hostfile(text, "hosts.txt"); });
}

ClusterSpec example_spec() {
  return baton::parse_tf_config(
      R"({"cluster": {"chief": ["chief0:2222"],
                      "worker": ["w0:2222", "w1:2222", "w2:2222"],
                      "ps": ["ps0:2222", "ps1:2222"],
                      "evaluator": ["eval0:2222"]},
          "task": {"type": "worker", "index": 2}})",
      "TF_CONFIG");
}

}  // namespace

// ------------------------------------------------------------- valid specs

TEST(TfConfigTest, ChiefAndWorkers) {
  const ClusterSpec s = baton::parse_tf_config(
      R"({"cluster": {"chief": ["host0:2222"], "worker": ["host1:2222", "host2:2223"]},
          "task": {"type": "chief", "index": 0}})",
      "TF_CONFIG");
  ASSERT_EQ(s.chief.size(), 1u);
  EXPECT_EQ(s.chief[0], (HostPort{"host0", 2222}));
  ASSERT_EQ(s.worker.size(), 2u);
  EXPECT_EQ(s.worker[1], (HostPort{"host2", 2223}));
  EXPECT_TRUE(s.ps.empty());
  EXPECT_TRUE(s.evaluator.empty());
  EXPECT_EQ(s.task_type, TaskRole::kChief);
  EXPECT_EQ(s.task_index, 0);
  EXPECT_EQ(s.num_tasks(), 3);
}

TEST(TfConfigTest, ParameterServerClusterAndTaskTypes) {
  const ClusterSpec s = example_spec();
  EXPECT_EQ(s.worker.size(), 3u);
  EXPECT_EQ(s.ps.size(), 2u);
  EXPECT_EQ(s.evaluator.size(), 1u);
  EXPECT_EQ(s.num_tasks(), 6) << "the evaluator has no rank";
  EXPECT_EQ(s.task_type, TaskRole::kWorker);
  EXPECT_EQ(s.task_index, 2);

  for (const char* type : {"chief", "worker", "ps", "evaluator"}) {
    const std::string text =
        std::string(R"({"cluster": {"chief": ["c:1"], "worker": ["w:1"], "ps": ["p:1"],)") +
        R"( "evaluator": ["e:1"]}, "task": {"type": ")" + type + R"("}})";
    const ClusterSpec t = baton::parse_tf_config(text, "TF_CONFIG");
    EXPECT_STREQ(baton::to_string(t.task_type), type);
    EXPECT_EQ(t.task_index, 0) << "index defaults to 0";
  }
}

TEST(TfConfigTest, NoTaskAndAddressForms) {
  const ClusterSpec s = baton::parse_tf_config(
      R"({"cluster": {"worker": ["10.0.0.1:1", "[::1]:65535", "[fe80::1:2]:80",
                                 "node-1.example.com:2222", "svc_name:3"]}})",
      "TF_CONFIG");
  EXPECT_EQ(s.task_type, TaskRole::kUnset);
  ASSERT_EQ(s.worker.size(), 5u);
  EXPECT_EQ(s.worker[0], (HostPort{"10.0.0.1", 1}));
  EXPECT_EQ(s.worker[1], (HostPort{"::1", 65535})) << "IPv6 is stored without brackets";
  EXPECT_EQ(baton::to_string(s.worker[1]), "[::1]:65535");
  EXPECT_EQ(s.worker[3].host, "node-1.example.com");
  EXPECT_EQ(baton::to_string(s.worker[3]), "node-1.example.com:2222");
}

TEST(TfConfigTest, KnownTfKeysAreAcceptedAndNullListsAreAbsent) {
  const ClusterSpec s = baton::parse_tf_config(
      R"({"cluster": {"worker": ["a:1"], "ps": null}, "task": {"type": "worker", "index": 0},
          "environment": "cloud", "rpc_layer": "grpc"})",
      "TF_CONFIG");
  EXPECT_EQ(s.worker.size(), 1u);
  EXPECT_TRUE(s.ps.empty());
  EXPECT_TRUE(starts_with(tf_error(R"({"cluster": {"worker": ["a:1"]}, "environment": 1})"),
                          "TF_CONFIG: environment: expected a string"));
}

TEST(TfConfigTest, ParsesAJsonValue) {
  const nlohmann::json doc = {{"cluster", {{"worker", {"a:1", "b:2"}}}},
                              {"task", {{"type", "worker"}, {"index", 1}}}};
  const ClusterSpec s = baton::parse_tf_config(doc, "cluster.json");
  EXPECT_EQ(s.worker.size(), 2u);
  EXPECT_EQ(s.task_index, 1);
  const std::string m = input_error([&] {
    (void)baton::parse_tf_config(nlohmann::json{{"cluster", {{"worker", {"a:0"}}}}},
                                 "cluster.json");
  });
  EXPECT_EQ(m,
            R"(cluster.json: cluster.worker[0]: "a:0" is not host:port (port must be 1..65535))");
}

// ------------------------------------------------------------- rank order

TEST(ClusterRankTest, ChiefThenWorkersThenPs) {
  const ClusterSpec s = example_spec();
  EXPECT_EQ(s.rank_of(TaskRole::kChief, 0), 0);
  EXPECT_EQ(s.rank_of(TaskRole::kWorker, 0), 1);
  EXPECT_EQ(s.rank_of(TaskRole::kWorker, 2), 3);
  EXPECT_EQ(s.rank_of(TaskRole::kPs, 0), 4);
  EXPECT_EQ(s.rank_of(TaskRole::kPs, 1), 5);
  for (int r = 0; r < s.num_tasks(); ++r) {
    const TaskId t = s.task_of(r);
    EXPECT_EQ(s.rank_of(t.role, t.index), r);
  }
  EXPECT_EQ(s.task_of(0), (TaskId{TaskRole::kChief, 0}));
  EXPECT_EQ(s.task_of(3), (TaskId{TaskRole::kWorker, 2}));
  EXPECT_EQ(s.task_of(5), (TaskId{TaskRole::kPs, 1}));

  // Without a chief, worker 0 is rank 0.
  const ClusterSpec w =
      baton::parse_tf_config(R"({"cluster": {"worker": ["a:1", "b:1"], "ps": ["c:1"]}})", "t");
  EXPECT_EQ(w.rank_of(TaskRole::kWorker, 0), 0);
  EXPECT_EQ(w.rank_of(TaskRole::kPs, 0), 2);
  EXPECT_EQ(w.task_of(2), (TaskId{TaskRole::kPs, 0}));
}

TEST(ClusterRankTest, OutOfRange) {
  const ClusterSpec s = example_spec();
  EXPECT_TRUE(contains(input_error([&] { (void)s.rank_of(TaskRole::kEvaluator, 0); }),
                       "evaluator tasks have no rank"));
  EXPECT_TRUE(contains(input_error([&] { (void)s.rank_of(TaskRole::kUnset, 0); }), "no rank"));
  EXPECT_EQ(input_error([&] { (void)s.rank_of(TaskRole::kWorker, 3); }),
            "cluster: worker index 3 is out of range (cluster.worker has 3 entries)");
  EXPECT_TRUE(contains(input_error([&] { (void)s.rank_of(TaskRole::kPs, -1); }), "out of range"));
  EXPECT_EQ(input_error([&] { (void)s.task_of(6); }),
            "cluster: rank 6 is out of range (6 ranked tasks, so 0..5)");
  EXPECT_TRUE(contains(input_error([&] { (void)s.task_of(-1); }), "rank -1 is out of range"));
}

// ------------------------------------------------------------- round trips

TEST(TfConfigTest, RoundTripEveryTask) {
  const ClusterSpec s = example_spec();
  for (TaskRole role : {TaskRole::kChief, TaskRole::kWorker, TaskRole::kPs, TaskRole::kEvaluator}) {
    for (int i = 0; i < static_cast<int>(s.tasks(role).size()); ++i) {
      const std::string text = baton::to_tf_config(s, role, i);
      const ClusterSpec back = baton::parse_tf_config(text, "written");
      ClusterSpec expected = s;
      expected.task_type = role;
      expected.task_index = i;
      EXPECT_EQ(back, expected) << text;
    }
  }
  // No task: the cluster alone.
  const std::string text = baton::to_tf_config(s, TaskRole::kUnset, 0);
  EXPECT_FALSE(contains(text, "\"task\"")) << text;
  ClusterSpec expected = s;
  expected.task_type = TaskRole::kUnset;
  expected.task_index = 0;
  EXPECT_EQ(baton::parse_tf_config(text, "written"), expected);
}

TEST(TfConfigTest, RoundTripIpv6AndWrittenForm) {
  ClusterSpec s;
  s.worker = {{"::1", 2222}, {"10.1.2.3", 80}};
  const std::string text = baton::to_tf_config(s, TaskRole::kWorker, 1);
  EXPECT_EQ(
      text,
      R"({"cluster":{"worker":["[::1]:2222","10.1.2.3:80"]},"task":{"index":1,"type":"worker"}})");
  const ClusterSpec back = baton::parse_tf_config(text, "written");
  EXPECT_EQ(back.worker, s.worker);
  EXPECT_EQ(back.task_type, TaskRole::kWorker);
  EXPECT_EQ(back.task_index, 1);
}

TEST(TfConfigTest, WritingRefusesAnInvalidSpecOrTask) {
  const ClusterSpec s = example_spec();
  EXPECT_TRUE(contains(input_error([&] { (void)baton::to_tf_config(s, TaskRole::kPs, 2); }),
                       "task.index: 2 is out of range (cluster.ps has 2 entries, so 0..1)"));
  ClusterSpec bad;
  bad.worker = {{"a", 70000}};
  EXPECT_TRUE(contains(input_error([&] { (void)baton::to_tf_config(bad, TaskRole::kWorker, 0); }),
                       R"(cluster.worker[0]: "a:70000" is not host:port (port must be 1..65535))"));
  ClusterSpec dup;
  dup.worker = {{"A", 1}, {"a", 1}};
  EXPECT_TRUE(contains(input_error([&] { baton::validate_cluster(dup, "code"); }),
                       R"(code: cluster.worker[1]: "a:1" is already used by cluster.worker[0])"));
}

// ------------------------------------------------------------- malformed TF_CONFIG

TEST(TfConfigErrorTest, DocumentShape) {
  EXPECT_TRUE(starts_with(tf_error(""), "TF_CONFIG: is empty")) << tf_error("");
  const std::string syntax = tf_error(R"({"cluster": )");
  EXPECT_TRUE(starts_with(syntax, "TF_CONFIG: invalid JSON: parse error at line 1")) << syntax;
  EXPECT_TRUE(
      starts_with(tf_error("[1]"), "TF_CONFIG: document: expected an object, got an array"));
  EXPECT_EQ(tf_error("{}"), "TF_CONFIG: cluster: is required but missing");
  EXPECT_TRUE(starts_with(tf_error(R"({"cluster": ["a:1"]})"),
                          "TF_CONFIG: cluster: expected an object, got an array"));
  EXPECT_TRUE(starts_with(tf_error(R"({"cluster": {"worker": ["a:1"]}, "task": "worker"})"),
                          "TF_CONFIG: task: expected an object, got a string"));
}

TEST(TfConfigErrorTest, UnknownKeysAtEveryLevel) {
  std::string m = tf_error(R"({"cluster": {"worker": ["a:1"]}, "tsak": {}})");
  EXPECT_TRUE(starts_with(m, "TF_CONFIG: tsak: unknown key (known keys here: ")) << m;
  EXPECT_TRUE(contains(m, "cluster") && contains(m, "task")) << m;
  m = tf_error(R"({"cluster": {"workers": ["a:1"]}})");
  EXPECT_EQ(m,
            "TF_CONFIG: cluster.workers: unknown key (known keys here: chief, evaluator, ps, "
            "worker)");
  m = tf_error(R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "idx": 0}})");
  EXPECT_TRUE(starts_with(m, "TF_CONFIG: task.idx: unknown key")) << m;
}

TEST(TfConfigErrorTest, ListsAndEntries) {
  EXPECT_EQ(
      tf_error(R"({"cluster": {"worker": "a:1"}})"),
      R"(TF_CONFIG: cluster.worker: expected an array of "host:port" strings, got a string "a:1")");
  EXPECT_EQ(tf_error(R"({"cluster": {"worker": ["a:1", 2222]}})"),
            R"(TF_CONFIG: cluster.worker[1]: expected a "host:port" string, got an integer 2222)");
  EXPECT_EQ(
      tf_error(R"({"cluster": {"worker": ["a:1", "host:99999"]}})"),
      R"(TF_CONFIG: cluster.worker[1]: "host:99999" is not host:port (port must be 1..65535))");
  EXPECT_EQ(tf_error(R"({"cluster": {"ps": ["host"]}})"),
            R"(TF_CONFIG: cluster.ps[0]: "host" is not host:port (no port))");
  EXPECT_EQ(tf_error(R"({"cluster": {"chief": [":2222"]}})"),
            R"(TF_CONFIG: cluster.chief[0]: ":2222" is not host:port (empty host))");
  for (const char* port : {"0", "-1", "abc", "", "22x", "+22", "65536"}) {
    const std::string m =
        tf_error(std::string(R"({"cluster": {"worker": ["h:)") + port + R"("]}})");
    EXPECT_TRUE(starts_with(m, "TF_CONFIG: cluster.worker[0]: ")) << m;
    EXPECT_TRUE(contains(m, "(port must be 1..65535)")) << m;
  }
  std::string m = tf_error(R"({"cluster": {"worker": ["bad host!:1"]}})");
  EXPECT_TRUE(starts_with(
      m,
      R"(TF_CONFIG: cluster.worker[0]: "bad host!:1" is not host:port (host "bad host!" is not a valid host name)"))
      << m;
  m = tf_error(R"({"cluster": {"worker": ["a..b:1"]}})");
  EXPECT_TRUE(contains(m, "(empty label)")) << m;
  m = tf_error(R"({"cluster": {"worker": ["-a:1"]}})");
  EXPECT_TRUE(contains(m, "starts or ends with '-'")) << m;
  m = tf_error(R"({"cluster": {"worker": ["10.0.0.256:1"]}})");
  EXPECT_EQ(
      m,
      R"(TF_CONFIG: cluster.worker[0]: "10.0.0.256:1" is not host:port (host "10.0.0.256" is not a valid IPv4 address))");
  m = tf_error(R"({"cluster": {"worker": ["::1:2222"]}})");
  EXPECT_TRUE(contains(m,
                       "cluster.worker[0]: \"::1:2222\" is not host:port (an IPv6 host must "
                       "be in brackets"))
      << m;
  m = tf_error(R"({"cluster": {"worker": ["[::g]:1"]}})");
  EXPECT_TRUE(contains(m, R"(host "::g" is not a valid IPv6 address)")) << m;
  m = tf_error(R"({"cluster": {"worker": ["[::1]2222"]}})");
  EXPECT_TRUE(contains(m, "no :port after the ]")) << m;
  m = tf_error(R"({"cluster": {"worker": ["[::1:2222"]}})");
  EXPECT_TRUE(contains(m, "no closing ]")) << m;
  m = tf_error(R"({"cluster": {"worker": ["[host]:2222"]}})");
  EXPECT_TRUE(contains(m, "brackets are only for an IPv6 address")) << m;
}

TEST(TfConfigErrorTest, ClusterRules) {
  EXPECT_TRUE(starts_with(tf_error(R"({"cluster": {}})"), "TF_CONFIG: cluster: is empty"));
  EXPECT_TRUE(starts_with(tf_error(R"({"cluster": {"worker": [], "ps": []}})"),
                          "TF_CONFIG: cluster: is empty"));
  EXPECT_TRUE(starts_with(tf_error(R"({"cluster": {"evaluator": ["e:1"]}})"),
                          "TF_CONFIG: cluster: has only an evaluator"));
  EXPECT_EQ(tf_error(R"({"cluster": {"chief": ["a:1", "b:1"], "worker": ["c:1"]}})"),
            "TF_CONFIG: cluster.chief: has 2 entries (at most one chief is allowed)");
  EXPECT_EQ(tf_error(R"({"cluster": {"worker": ["c:1"], "evaluator": ["a:1", "b:1"]}})"),
            "TF_CONFIG: cluster.evaluator: has 2 entries (at most one evaluator is allowed)");
  // The same address in two lists, and twice in one list (names compare
  // case-insensitively, IPv6 by value).
  EXPECT_EQ(tf_error(R"({"cluster": {"chief": ["a:1"], "worker": ["b:1"], "ps": ["b:2", "a:1"]}})"),
            R"(TF_CONFIG: cluster.ps[1]: "a:1" is already used by cluster.chief[0])");
  EXPECT_EQ(tf_error(R"({"cluster": {"worker": ["Node:1", "node:1"]}})"),
            R"(TF_CONFIG: cluster.worker[1]: "node:1" is already used by cluster.worker[0])");
  EXPECT_TRUE(contains(tf_error(R"({"cluster": {"worker": ["[::1]:5", "[0:0::1]:5"]}})"),
                       "cluster.worker[1]: \"[0:0::1]:5\" is already used by cluster.worker[0]"));
  // Same host, other port: fine.
  EXPECT_EQ(baton::parse_tf_config(R"({"cluster": {"worker": ["a:1", "a:2"]}})", "t").worker.size(),
            2u);
}

TEST(TfConfigErrorTest, Task) {
  const std::string base = R"({"cluster": {"chief": ["c:1"], "worker": ["a:1", "b:1"]}, "task": )";
  EXPECT_EQ(tf_error(base + R"({"type": "worker", "index": 2}})"),
            "TF_CONFIG: task.index: 2 is out of range (cluster.worker has 2 entries, so 0..1)");
  EXPECT_EQ(tf_error(base + R"({"type": "chief", "index": 1}})"),
            "TF_CONFIG: task.index: 1 is out of range (cluster.chief has 1 entry, so 0)");
  EXPECT_EQ(tf_error(base + R"({"type": "ps", "index": 0}})"),
            R"(TF_CONFIG: task.type: "ps" but cluster.ps is missing or empty)");
  EXPECT_EQ(tf_error(base + R"({"type": "evaluator"}})"),
            R"(TF_CONFIG: task.type: "evaluator" but cluster.evaluator is missing or empty)");
  EXPECT_EQ(tf_error(base + R"({"type": "boss", "index": 0}})"),
            R"(TF_CONFIG: task.type: "boss" is not one of chief, worker, ps, evaluator)");
  EXPECT_EQ(tf_error(base + R"({"index": 0}})"), "TF_CONFIG: task.type: is required but missing");
  EXPECT_TRUE(starts_with(tf_error(base + R"({"type": "worker", "index": -1}})"),
                          "TF_CONFIG: task.index: expected an integer between 0 and"));
  EXPECT_TRUE(starts_with(tf_error(base + R"({"type": "worker", "index": "1"}})"),
                          "TF_CONFIG: task.index: expected an integer, got a string"));
}

// ------------------------------------------------------------- strategies

TEST(StrategyClusterTest, ParameterServer) {
  const ClusterSpec ok = example_spec();
  EXPECT_NO_THROW(baton::validate_for_strategy(ok, "parameter_server", "TF_CONFIG"));
  const ClusterSpec no_ps = baton::parse_tf_config(
      R"({"cluster": {"chief": ["c:1"], "worker": ["a:1", "b:1"]}})", "TF_CONFIG");
  EXPECT_EQ(
      input_error([&] { baton::validate_for_strategy(no_ps, "parameter_server", "TF_CONFIG"); }),
      "TF_CONFIG: cluster.ps: parameter_server needs at least one ps task, got none");
  const ClusterSpec no_worker =
      baton::parse_tf_config(R"({"cluster": {"chief": ["c:1"], "ps": ["p:1"]}})", "TF_CONFIG");
  EXPECT_EQ(input_error(
                [&] { baton::validate_for_strategy(no_worker, "parameter_server", "TF_CONFIG"); }),
            "TF_CONFIG: cluster.worker: parameter_server needs at least one worker task, got none");
}

TEST(StrategyClusterTest, MultiWorkerMirrored) {
  const ClusterSpec ok = baton::parse_tf_config(
      R"({"cluster": {"chief": ["c:1"], "worker": ["a:1"], "evaluator": ["e:1"]}})", "TF_CONFIG");
  EXPECT_NO_THROW(baton::validate_for_strategy(ok, "multi_worker_mirrored", "TF_CONFIG"));
  const std::string m = input_error(
      [&] { baton::validate_for_strategy(example_spec(), "multi_worker_mirrored", "TF_CONFIG"); });
  EXPECT_TRUE(starts_with(m,
                          "TF_CONFIG: cluster.ps: multi_worker_mirrored has no parameter "
                          "servers, got 2 ps task(s)"))
      << m;
}

TEST(StrategyClusterTest, LocalAndUnknownStrategies) {
  const ClusterSpec one = baton::parse_tf_config(R"({"cluster": {"worker": ["a:1"]}})", "t");
  for (const char* s : {"one_device", "mirrored", "central_storage"}) {
    EXPECT_NO_THROW(baton::validate_for_strategy(one, s, "t")) << s;
  }
  EXPECT_EQ(input_error([&] { baton::validate_for_strategy(example_spec(), "mirrored", "t"); }),
            "t: cluster: mirrored runs on one machine, but the cluster has 6 tasks (use "
            "multi_worker_mirrored or parameter_server)");
  EXPECT_TRUE(contains(input_error([&] { baton::validate_for_strategy(one, "tpu", "t"); }),
                       "no TPU backend"));
  EXPECT_TRUE(starts_with(input_error([&] { baton::validate_for_strategy(one, "ring", "t"); }),
                          "t: strategy \"ring\" is not one of one_device"));
}

// ------------------------------------------------------------- hostfiles

TEST(HostfileTest, ParsesOpenMpiSyntax) {
  const auto entries = baton::parse_hostfile(
      "# the cluster\n"
      "\n"
      "node1 slots=4 max_slots=8\n"
      "  node2\tslots=2   # trailing comment\r\n"
      "10.0.0.7 max-slots=3\n"
      "fe80::1 slots=1\n",
      "hosts.txt");
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0], (HostfileEntry{"node1", 4, 8}));
  EXPECT_EQ(entries[1], (HostfileEntry{"node2", 2, 0}));
  EXPECT_EQ(entries[2], (HostfileEntry{"10.0.0.7", 1, 3})) << "slots defaults to 1";
  EXPECT_EQ(entries[3], (HostfileEntry{"fe80::1", 1, 0}));
}

TEST(HostfileTest, Errors) {
  EXPECT_EQ(hostfile_error("a\nb cpus=4\n"),
            "hosts.txt:2: unknown attribute \"cpus=4\" (expected slots=N, max_slots=N or "
            "max-slots=N)");
  EXPECT_TRUE(
      starts_with(hostfile_error("a slots:4\n"), "hosts.txt:1: unknown attribute \"slots:4\""));
  EXPECT_TRUE(starts_with(hostfile_error("a 4\n"), "hosts.txt:1: unknown attribute \"4\""));
  EXPECT_EQ(hostfile_error("a slots=0\n"),
            "hosts.txt:1: slots: expected a positive integer, got \"0\"");
  EXPECT_EQ(hostfile_error("#\na slots=-2\n"),
            "hosts.txt:2: slots: expected a positive integer, got \"-2\"");
  EXPECT_EQ(hostfile_error("a slots=2.5\n"),
            "hosts.txt:1: slots: expected a positive integer, got \"2.5\"");
  EXPECT_EQ(hostfile_error("a slots=\n"),
            "hosts.txt:1: slots: expected a positive integer, got \"\"");
  EXPECT_TRUE(starts_with(hostfile_error("a slots=99999999999\n"), "hosts.txt:1: slots: expected"));
  EXPECT_EQ(hostfile_error("a max-slots=x\n"),
            "hosts.txt:1: max-slots: expected a positive integer, got \"x\"");
  EXPECT_EQ(hostfile_error("a\n\nb slots=4 max_slots=2\n"),
            "hosts.txt:3: max_slots: 2 is less than slots (4)");
  EXPECT_EQ(hostfile_error("a slots=1 slots=2\n"), "hosts.txt:1: slots is given twice");
  EXPECT_EQ(hostfile_error("a max_slots=2 max-slots=2\n"), "hosts.txt:1: max_slots is given twice");
  EXPECT_EQ(hostfile_error("node1\n# x\nNODE1 slots=2\n"),
            "hosts.txt:3: host \"NODE1\" is already listed on line 1");
  EXPECT_TRUE(starts_with(hostfile_error("a\nnode_1!\n"),
                          "hosts.txt:2: host \"node_1!\" is not a valid host name"));
  EXPECT_TRUE(starts_with(hostfile_error("[::1] slots=2\n"),
                          "hosts.txt:1: host \"[::1]\" is not a valid IPv6 address"));
  EXPECT_EQ(hostfile_error("1.2.3\n"), "hosts.txt:1: host \"1.2.3\" is not a valid IPv4 address");
  const std::string empty = "hosts.txt: no hosts (expected lines like \"node1 slots=4\")";
  EXPECT_EQ(hostfile_error(""), empty);
  EXPECT_EQ(hostfile_error("# only comments\n\n   \n"), empty);
}

TEST(HostfileTest, ReadsAFile) {
  std::random_device rd;
  const fs::path dir =
      fs::temp_directory_path() /
      ("baton-cluster-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  fs::create_directories(dir);
  const std::string path = (dir / "hosts").string();
  std::ofstream(path) << "a slots=2\nb slots=x\n";
  EXPECT_EQ(input_error([&] { (void)baton::read_hostfile(path); }),
            path + ":2: slots: expected a positive integer, got \"x\"");
  std::ofstream(path) << "a slots=2\nb\n";
  EXPECT_EQ(baton::read_hostfile(path).size(), 2u);
  const std::string missing = (dir / "nope").string();
  EXPECT_TRUE(starts_with(input_error([&] { (void)baton::read_hostfile(missing); }),
                          missing + ": cannot open the file"));
  fs::remove_all(dir);
}

TEST(HostfileTest, RoundTrip) {
  const std::vector<HostfileEntry> entries = {
      {"node1", 4, 8}, {"node2", 1, 0}, {"10.0.0.7", 2, 2}, {"fe80::1", 3, 0}};
  const std::string text = baton::to_hostfile(entries);
  EXPECT_EQ(text,
            "node1 slots=4 max_slots=8\nnode2 slots=1\n10.0.0.7 slots=2 max_slots=2\n"
            "fe80::1 slots=3\n");
  EXPECT_EQ(baton::parse_hostfile(text, "written"), entries);
  EXPECT_EQ(baton::to_hostfile({}), "");
  EXPECT_TRUE(contains(input_error([] {
                         (void)baton::to_hostfile({{"a", 0, 0}});
                       }),
                       "hostfile entry 0: slots"));
  EXPECT_TRUE(contains(input_error([] {
                         (void)baton::to_hostfile({{"a", 2, 1}});
                       }),
                       "hostfile entry 0: max_slots"));
  EXPECT_TRUE(contains(input_error([] {
                         (void)baton::to_hostfile({{"a b", 1, 0}});
                       }),
                       "hostfile entry 0: host \"a b\""));
  EXPECT_TRUE(contains(input_error([] {
                         (void)baton::to_hostfile({{"a", 1, 0}, {"A", 1, 0}});
                       }),
                       "hostfile entry 1: host \"A\" is already entry 0"));
}

TEST(HostfileTest, FromClusterSpec) {
  const ClusterSpec s = baton::parse_tf_config(
      R"({"cluster": {"chief": ["n1:2222"], "worker": ["n1:2223", "n2:2222", "[::1]:1", "N2:2223"],
                      "ps": ["n3:2222"], "evaluator": ["n4:2222"]}})",
      "TF_CONFIG");
  const auto entries = baton::hostfile_from_spec(s);
  const std::vector<HostfileEntry> expected = {
      {"n1", 2, 0}, {"n2", 2, 0}, {"::1", 1, 0}, {"n3", 1, 0}};
  EXPECT_EQ(entries, expected) << "the evaluator's host is not in the hostfile";
  int slots = 0;
  for (const auto& e : entries) slots += e.slots;
  EXPECT_EQ(slots, s.num_tasks());
  EXPECT_EQ(baton::parse_hostfile(baton::to_hostfile(entries), "written"), entries);

  ClusterSpec none;
  none.evaluator = {{"e", 1}};
  EXPECT_TRUE(contains(input_error([&] { (void)baton::hostfile_from_spec(none); }),
                       "no chief, worker or ps tasks"));
}
