// Strict config reading: ConfigNode's typed reads and messages, --set
// overrides, JSON files with syntax errors, and the run config schema.
#include <baton/core/config.h>
#include <baton/core/error.h>
#include <baton/train/run_config.h>
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
using baton::ConfigNode;
using nlohmann::json;

namespace {

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() /
            ("baton-config-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = (path_ / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

}  // namespace

// ---------------------------------------------------------------- ConfigNode

TEST(ConfigNodeTest, RequiredMissingKeyNamesFileAndPath) {
  const json doc = {{"a", json::object()}};
  ConfigNode root(doc, "file.json");
  const ConfigNode a = root.child("a");
  EXPECT_EQ(a.path(), "a");
  EXPECT_EQ(a.file(), "file.json");
  const std::string msg = input_error([&] { (void)a.integer("b"); });
  EXPECT_TRUE(starts_with(msg, "file.json: a.b: is required")) << msg;

  const std::string top = input_error([&] { (void)root.string("name"); });
  EXPECT_TRUE(starts_with(top, "file.json: name: is required")) << top;

  // A null value counts as missing.
  const json with_null = {{"x", nullptr}};
  ConfigNode n(with_null, "f.json");
  EXPECT_FALSE(n.has("x"));
  EXPECT_TRUE(starts_with(input_error([&] { (void)n.number("x"); }), "f.json: x: is required"));
  EXPECT_EQ(n.integer_or("x", 7), 7);
}

TEST(ConfigNodeTest, WrongTypeMessages) {
  const json doc = {{"s", "text"}, {"i", 5},        {"b", true},
                    {"f", 2.5},    {"arr", {1, 2}}, {"obj", {{"k", 1}}}};
  ConfigNode n(doc, "cfg.json");
  std::string m = input_error([&] { (void)n.integer("s"); });
  EXPECT_EQ(m, "cfg.json: s: expected an integer, got a string \"text\"");
  m = input_error([&] { (void)n.integer("f"); });
  EXPECT_EQ(m, "cfg.json: f: expected an integer, got a number 2.5");
  m = input_error([&] { (void)n.number("b"); });
  EXPECT_EQ(m, "cfg.json: b: expected a number, got a boolean true");
  m = input_error([&] { (void)n.string("i"); });
  EXPECT_EQ(m, "cfg.json: i: expected a string, got an integer 5");
  m = input_error([&] { (void)n.boolean_or("s", false); });
  EXPECT_TRUE(starts_with(m, "cfg.json: s: expected true or false, got a string")) << m;
  m = input_error([&] { (void)n.child("arr"); });
  EXPECT_TRUE(starts_with(m, "cfg.json: arr: expected an object, got an array")) << m;
  m = input_error([&] { (void)n.integer_list("obj"); });
  EXPECT_TRUE(starts_with(m, "cfg.json: obj: expected an array of integers")) << m;

  // And the right types read back.
  EXPECT_EQ(n.string("s"), "text");
  EXPECT_EQ(n.integer("i"), 5);
  EXPECT_DOUBLE_EQ(n.number("i"), 5.0) << "an integer is a number";
  EXPECT_DOUBLE_EQ(n.number("f"), 2.5);
  EXPECT_TRUE(n.boolean_or("b", false));
  EXPECT_EQ(n.integer_list("arr"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(n.child("obj").integer("k"), 1);

  // A whole-valued float is an integer.
  const json whole = {{"n", 3.0}};
  EXPECT_EQ(ConfigNode(whole, "w.json").integer("n"), 3);

  const std::string not_object = input_error([&] { ConfigNode(json::array(), "top.json"); });
  EXPECT_TRUE(starts_with(not_object, "top.json: document: expected an object")) << not_object;
}

TEST(ConfigNodeTest, IntegerRanges) {
  const json doc = {{"n", 11}, {"neg", -3}};
  ConfigNode node(doc, "r.json");
  EXPECT_EQ(input_error([&] { (void)node.integer("n", 1, 10); }),
            "r.json: n: expected an integer between 1 and 10, got 11");
  EXPECT_EQ(input_error([&] { (void)node.integer("neg", 0); }),
            "r.json: neg: expected an integer >= 0, got -3");
  EXPECT_EQ(input_error([&] { (void)node.integer("n", std::numeric_limits<int64_t>::min(), 5); }),
            "r.json: n: expected an integer <= 5, got 11");
  EXPECT_EQ(node.integer("n", 11, 11), 11) << "ranges are inclusive";
  EXPECT_EQ(node.integer_or("missing", 4, 1, 10), 4) << "the fallback is not range-checked";
  EXPECT_EQ(input_error([&] { (void)node.integer_or("neg", 4, 1, 10); }),
            "r.json: neg: expected an integer between 1 and 10, got -3");

  const json lst = {{"sizes", {4, 0, 2}}};
  const std::string m =
      input_error([&] { (void)ConfigNode(lst, "l.json").integer_list("sizes", 1); });
  EXPECT_TRUE(starts_with(m, "l.json: sizes[1]: expected an integer >= 1, got 0")) << m;
}

TEST(ConfigNodeTest, NumberRanges) {
  const json doc = {{"x", 1.5}, {"zero", 0}, {"neg", -2.0}};
  ConfigNode node(doc, "n.json");
  EXPECT_EQ(input_error([&] { (void)node.number("x", 0.0, 1.0); }),
            "n.json: x: expected a number between 0 and 1, got 1.5");
  EXPECT_EQ(input_error([&] { (void)node.number("neg", 0.0); }),
            "n.json: neg: expected a number >= 0, got -2.0");
  EXPECT_EQ(
      input_error([&] { (void)node.number("x", -std::numeric_limits<double>::infinity(), 1.0); }),
      "n.json: x: expected a number <= 1, got 1.5");
  EXPECT_DOUBLE_EQ(node.number("x", 1.5, 1.5), 1.5);
  EXPECT_EQ(input_error([&] { (void)node.positive_or("zero", 1.0); }),
            "n.json: zero: expected a number > 0, got 0");
  EXPECT_DOUBLE_EQ(node.positive_or("missing", 0.25), 0.25);
  EXPECT_DOUBLE_EQ(node.number_or("missing", -1.0, 0.0, 1.0), -1.0);
}

TEST(ConfigNodeTest, ChoiceListsTheOptions) {
  const json doc = {{"kind", "mirored"}, {"good", "beta"}};
  ConfigNode node(doc, "c.json");
  EXPECT_EQ(input_error([&] {
              (void)node.choice("kind", {"alpha", "beta", "gamma"});
            }),
            "c.json: kind: \"mirored\" is not one of alpha, beta, gamma");
  EXPECT_EQ(node.choice("good", {"alpha", "beta"}), "beta");
  EXPECT_EQ(node.choice_or("absent", "alpha", {"alpha", "beta"}), "alpha");
  const std::string m = input_error([&] {
    (void)node.choice_or("kind", "alpha", {"alpha", "beta"});
  });
  EXPECT_TRUE(contains(m, "alpha, beta")) << m;
}

TEST(ConfigNodeTest, FinishNamesTheUnknownKey) {
  const json doc = {{"known", 1}, {"typo", 2}};
  ConfigNode node(doc, "f.json");
  (void)node.integer("known");
  const std::string m = input_error([&] { node.finish(); });
  EXPECT_TRUE(starts_with(m, "f.json: typo: unknown key")) << m;
  EXPECT_TRUE(contains(m, "known")) << "the message lists the known keys: " << m;

  // Optional reads of absent keys and accept() count as read.
  const json ok = {{"a", 1}, {"elsewhere", 3}};
  ConfigNode n2(ok, "f.json");
  (void)n2.integer_or("a", 0);
  (void)n2.integer_or("b", 0);
  n2.accept("elsewhere");
  EXPECT_NO_THROW(n2.finish());
}

TEST(ConfigNodeTest, NestedPathsInMessages) {
  const json doc = {{"outer", {{"inner", {{"value", "x"}, {"extra", 1}}}}}};
  ConfigNode root(doc, "nest.json");
  const ConfigNode inner = root.child("outer").child("inner");
  EXPECT_EQ(inner.path(), "outer.inner");
  EXPECT_EQ(inner.where("value"), "nest.json: outer.inner.value");
  EXPECT_EQ(input_error([&] { (void)inner.integer("value"); }),
            "nest.json: outer.inner.value: expected an integer, got a string \"x\"");
  const std::string m = input_error([&] { inner.finish(); });
  EXPECT_TRUE(starts_with(m, "nest.json: outer.inner.extra: unknown key")) << m;
  EXPECT_EQ(input_error([&] { inner.fail("value", "is odd"); }),
            "nest.json: outer.inner.value: is odd");

  // A missing optional child reads as an empty object at the right path.
  const ConfigNode absent = root.child_or_empty("opt");
  EXPECT_EQ(absent.path(), "opt");
  EXPECT_EQ(absent.integer_or("k", 9), 9);
  EXPECT_TRUE(starts_with(input_error([&] { (void)absent.string("name"); }),
                          "nest.json: opt.name: is required"));
}

// ---------------------------------------------------------------- apply_override

TEST(ApplyOverride, CreatesNestedObjects) {
  json doc = json::object();
  baton::apply_override(doc, "a.b.c=1");
  ASSERT_TRUE(doc["a"]["b"]["c"].is_number_integer()) << doc.dump();
  EXPECT_EQ(doc["a"]["b"]["c"].get<int>(), 1);

  json existing = {{"train", {{"epochs", 3}, {"steps", 10}}}};
  baton::apply_override(existing, "train.epochs=5");
  EXPECT_EQ(existing["train"]["epochs"], 5);
  EXPECT_EQ(existing["train"]["steps"], 10) << "siblings stay";
  baton::apply_override(existing, "train.new.deep=x");
  EXPECT_EQ(existing["train"]["new"]["deep"], "x");
}

TEST(ApplyOverride, JsonValuesVersusStrings) {
  json doc = json::object();
  baton::apply_override(doc, "i=42");
  baton::apply_override(doc, "f=0.5");
  baton::apply_override(doc, "b=true");
  baton::apply_override(doc, "n=null");
  baton::apply_override(doc, "arr=[1,2,3]");
  baton::apply_override(doc, "obj={\"k\":\"v\"}");
  baton::apply_override(doc, "word=relu");
  baton::apply_override(doc, "quoted=\"7\"");
  baton::apply_override(doc, "path=data/x.csv");
  baton::apply_override(doc, "empty=");
  baton::apply_override(doc, "eq=a=b");
  EXPECT_TRUE(doc["i"].is_number_integer());
  EXPECT_EQ(doc["i"], 42);
  EXPECT_TRUE(doc["f"].is_number_float());
  EXPECT_DOUBLE_EQ(doc["f"].get<double>(), 0.5);
  EXPECT_TRUE(doc["b"].is_boolean());
  EXPECT_EQ(doc["b"], true);
  EXPECT_TRUE(doc["n"].is_null());
  EXPECT_EQ(doc["arr"], json({1, 2, 3}));
  EXPECT_EQ(doc["obj"], json({{"k", "v"}}));
  EXPECT_EQ(doc["word"], "relu") << "not valid JSON: taken as a string";
  EXPECT_TRUE(doc["quoted"].is_string());
  EXPECT_EQ(doc["quoted"], "7") << "a JSON string stays a string";
  EXPECT_EQ(doc["path"], "data/x.csv");
  EXPECT_EQ(doc["empty"], "");
  EXPECT_EQ(doc["eq"], "a=b") << "the value starts after the first '='";
}

TEST(ApplyOverride, MalformedAssignmentsThrow) {
  json doc = {{"scalar", 5}};
  for (const char* bad : {"novalue", "=5", "a..b=1", ".a=1", "a.=1", "scalar.x=1"}) {
    json copy = doc;
    const std::string m = input_error([&] { baton::apply_override(copy, bad); });
    EXPECT_TRUE(contains(m, "--set")) << bad << ": " << m;
  }
}

// ---------------------------------------------------------------- read_json_file

TEST(ReadJsonFile, ReadsAValidFile) {
  TempDir dir;
  const std::string p = dir.write("ok.json", "{\n  \"a\": 1,\n  \"b\": [true, \"x\"]\n}\n");
  const json j = baton::read_json_file(p);
  EXPECT_EQ(j["a"], 1);
  EXPECT_EQ(j["b"][1], "x");
}

TEST(ReadJsonFile, SyntaxErrorNamesFileAndLine) {
  TempDir dir;
  struct Case {
    std::string text;
    int line;
  };
  const std::vector<Case> cases = {
      {"{\n  \"a\": 1,\n  \"b\": ,\n  \"c\": 3\n}\n", 3},  // a missing value
      {"{\n  \"a\": 1\n  \"b\": 2\n}\n", 3},               // a missing comma, seen at "b"
      {"{\n  \"a\": 1,\n  \"b\": 2,\n}\n", 4},             // a trailing comma, seen at }
      {"{\"a\": tru}\n", 1},                               // a bad literal on line 1
      {"\n\n\n\n{\n\"x\": [1, 2,, 3]\n}\n", 6},            // after blank lines
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string p = dir.write("bad" + std::to_string(i) + ".json", cases[i].text);
    const std::string m = input_error([&] { (void)baton::read_json_file(p); });
    EXPECT_TRUE(starts_with(m, p + ":" + std::to_string(cases[i].line) + ": invalid JSON"))
        << "case " << i << ": " << m;
  }
}

TEST(ReadJsonFile, MissingFileThrowsInputError) {
  TempDir dir;
  const std::string p = dir.file("does-not-exist.json");
  const std::string m = input_error([&] { (void)baton::read_json_file(p); });
  EXPECT_TRUE(contains(m, p)) << m;
}

// ---------------------------------------------------------------- run config

namespace {

json minimal_run() {
  return {{"model", {{"type", "mlp"}, {"layers", {4, 3}}}},
          {"data", {{"train", {{"type", "csv"}, {"path", "x.csv"}}}}}};
}

std::string run_error(const json& doc, const std::string& file = "runs/exp.json") {
  return input_error([&] { (void)baton::parse_run_config(doc, file); });
}

}  // namespace

// `deterministic` changed nothing (runs are always deterministic): the key
// is refused with a message that says so.
TEST(RunConfig, TheRemovedDeterministicKeyIsExplained) {
  json doc = minimal_run();
  doc["deterministic"] = true;
  const std::string e = run_error(doc);
  EXPECT_TRUE(starts_with(e, "runs/exp.json: deterministic: ")) << e;
  EXPECT_TRUE(contains(e, "every run is deterministic")) << e;
}

TEST(RunConfig, MinimalConfigTakesDefaults) {
  const baton::RunConfig rc = baton::parse_run_config(minimal_run(), "configs/exp1.json");
  EXPECT_EQ(rc.file, "configs/exp1.json");
  EXPECT_EQ(rc.base_dir, "configs");
  EXPECT_EQ(rc.name, "exp1") << "the name defaults to the file's stem";
  EXPECT_EQ(rc.seed, 0u);
  EXPECT_EQ(rc.threads, 1);
  EXPECT_EQ(rc.model["type"], "mlp");
  EXPECT_EQ(rc.model["layers"], json({4, 3})) << "the model object is kept for its plugin";
  EXPECT_EQ(rc.data.train["type"], "csv");
  EXPECT_FALSE(rc.data.validation.has_value());
  EXPECT_EQ(rc.data.validation_split, 0.0);
  EXPECT_FALSE(rc.data.standardize);
  EXPECT_FALSE(rc.data.cache);
  EXPECT_EQ(rc.data.prefetch, 2);
  EXPECT_EQ(rc.data.shard_policy, baton::ShardPolicy::kAuto);
  EXPECT_FALSE(rc.data.drop_remainder);
  EXPECT_EQ(rc.loss, "softmax_cross_entropy");
  EXPECT_EQ(rc.optimizer.kind, baton::OptimizerKind::kAdam);
  EXPECT_FLOAT_EQ(rc.optimizer.lr, 1e-3f);
  EXPECT_EQ(rc.schedule.kind, baton::ScheduleKind::kConstant);
  EXPECT_EQ(rc.epochs, 1);
  EXPECT_EQ(rc.max_steps, 0);
  EXPECT_EQ(rc.global_batch, 32);
  EXPECT_EQ(rc.log_every_steps, 10);
  EXPECT_EQ(rc.strategy.type, "one_device");
  EXPECT_EQ(rc.strategy.devices, "auto");
  EXPECT_EQ(rc.precision, "fp32");
  EXPECT_EQ(rc.checkpoint.dir, "");
  EXPECT_EQ(rc.checkpoint.every_steps, 0);
  EXPECT_TRUE(rc.checkpoint.every_epoch);
  EXPECT_EQ(rc.checkpoint.keep, 3);

  const baton::RunConfig bare = baton::parse_run_config(minimal_run(), "plain.json");
  EXPECT_EQ(bare.base_dir, ".");
  EXPECT_EQ(bare.name, "plain");
}

TEST(RunConfig, ExplicitValues) {
  json doc = minimal_run();
  doc["name"] = "named";
  doc["seed"] = 17;
  doc["threads"] = 4;
  doc["loss"] = "mse";
  doc["optimizer"] = {{"type", "sgd"}, {"lr", 0.5}, {"momentum", 0.9}};
  doc["schedule"] = {{"type", "cosine"}, {"warmup_steps", 5}};
  doc["train"] = {{"epochs", 7}, {"steps", 100}, {"global_batch_size", 64}, {"log_every_steps", 3}};
  doc["checkpoint"] = {{"dir", "ckpt"}, {"keep", 2}, {"every_steps", 50}};
  doc["data"]["validation_split"] = 0.25;
  const baton::RunConfig rc = baton::parse_run_config(doc, "base/run.json");
  EXPECT_EQ(rc.name, "named");
  EXPECT_EQ(rc.seed, 17u);
  EXPECT_EQ(rc.threads, 4);
  EXPECT_EQ(rc.loss, "mse");
  EXPECT_EQ(rc.optimizer.kind, baton::OptimizerKind::kSgd);
  EXPECT_FLOAT_EQ(rc.optimizer.lr, 0.5f);
  EXPECT_FLOAT_EQ(rc.optimizer.momentum, 0.9f);
  EXPECT_EQ(rc.schedule.kind, baton::ScheduleKind::kCosine);
  EXPECT_EQ(rc.schedule.warmup_steps, 5);
  EXPECT_EQ(rc.epochs, 7);
  EXPECT_EQ(rc.max_steps, 100);
  EXPECT_EQ(rc.global_batch, 64);
  EXPECT_EQ(rc.log_every_steps, 3);
  EXPECT_EQ(rc.checkpoint.dir, (fs::path("base") / "ckpt").string())
      << "a relative checkpoint dir resolves against the config's directory";
  EXPECT_EQ(rc.checkpoint.keep, 2);
  EXPECT_EQ(rc.checkpoint.every_steps, 50);
  EXPECT_DOUBLE_EQ(rc.data.validation_split, 0.25);
}

TEST(RunConfig, UnknownTopLevelKey) {
  json doc = minimal_run();
  doc["epochs"] = 3;  // belongs in "train"
  const std::string m = run_error(doc);
  EXPECT_TRUE(starts_with(m, "runs/exp.json: epochs: unknown key")) << m;
}

TEST(RunConfig, UnknownKeyInTrain) {
  json doc = minimal_run();
  doc["train"] = {{"epoch", 3}};
  const std::string m = run_error(doc);
  EXPECT_TRUE(starts_with(m, "runs/exp.json: train.epoch: unknown key")) << m;
}

// Each in-process replica takes a row or more of the global batch: fewer
// rows is the config's error, naming the key, before anything runs.
TEST(RunConfig, AGlobalBatchSmallerThanTheReplicasNamesTheKey) {
  json doc = minimal_run();
  doc["train"] = {{"global_batch_size", 3}};
  doc["strategy"] = {{"type", "central_storage"}, {"replicas", 4}};
  const std::string m = run_error(doc);
  EXPECT_TRUE(starts_with(m, "runs/exp.json: train.global_batch_size: expected at least the 4 "))
      << m;
  EXPECT_TRUE(contains(m, "got 3")) << m;
  doc["train"] = {{"global_batch_size", 4}};
  EXPECT_EQ(baton::parse_run_config(doc, "runs/exp.json").global_batch, 4);
}

// central_storage runs no allreduce and holds one parameter copy: the
// allreduce keys and the drift check would change nothing, so each is
// refused, naming the file and the key and saying why.
TEST(RunConfig, CentralStorageRefusesKeysThatChangeNothing) {
  const std::pair<const char*, json> keys[] = {{"algorithm", "ring"},    {"bucket_mb", 4},
                                               {"first_bucket_mb", 0.5}, {"overlap", false},
                                               {"timeout_s", 10},        {"backend", "local"}};
  for (const auto& [key, value] : keys) {
    json doc = minimal_run();
    doc["strategy"] = {{"type", "central_storage"}, {"replicas", 2}, {"allreduce", {{key, value}}}};
    const std::string m = run_error(doc);
    EXPECT_TRUE(starts_with(m, std::string("runs/exp.json: strategy.allreduce.") + key +
                                   ": does not apply to central_storage"))
        << m;
    EXPECT_TRUE(contains(m, "runs no allreduce")) << m;
  }
  json doc = minimal_run();
  doc["strategy"] = {{"type", "central_storage"}, {"replicas", 2}, {"allreduce", json::object()}};
  EXPECT_TRUE(starts_with(run_error(doc), "runs/exp.json: strategy.allreduce: does not apply"));
  doc["strategy"] = {{"type", "central_storage"}, {"replicas", 2}, {"drift_check_steps", 5}};
  const std::string m = run_error(doc);
  EXPECT_TRUE(starts_with(m, "runs/exp.json: strategy.drift_check_steps: does not apply")) << m;
  // Without them it parses, with no drift check; mirrored still takes them.
  doc["strategy"] = {{"type", "central_storage"}, {"replicas", 2}};
  EXPECT_EQ(baton::parse_run_config(doc, "runs/exp.json").strategy.drift_check_steps, 0);
  doc["strategy"] = {{"type", "mirrored"},
                     {"replicas", 2},
                     {"allreduce", {{"algorithm", "ring"}, {"bucket_mb", 4}}},
                     {"drift_check_steps", 5}};
  const baton::RunConfig rc = baton::parse_run_config(doc, "runs/exp.json");
  EXPECT_EQ(rc.strategy.algorithm, "ring");
  EXPECT_EQ(rc.strategy.drift_check_steps, 5);
}

TEST(RunConfig, NegativeEpochs) {
  json doc = minimal_run();
  doc["train"] = {{"epochs", -2}};
  const std::string m = run_error(doc);
  EXPECT_TRUE(starts_with(m, "runs/exp.json: train.epochs: expected an integer")) << m;
  EXPECT_TRUE(contains(m, "-2")) << m;
  doc["train"] = {{"epochs", 0}};
  EXPECT_TRUE(contains(run_error(doc), "train.epochs"));
}

TEST(RunConfig, NonPositiveLearningRate) {
  for (double lr : {0.0, -0.1}) {
    json doc = minimal_run();
    doc["optimizer"] = {{"lr", lr}};
    const std::string m = run_error(doc);
    EXPECT_TRUE(starts_with(m, "runs/exp.json: optimizer.lr: expected a number > 0")) << m;
  }
}

TEST(RunConfig, MisspelledStrategyListsTheChoices) {
  json doc = minimal_run();
  doc["strategy"] = {{"type", "mirored"}};
  const std::string m = run_error(doc);
  EXPECT_TRUE(starts_with(m, "runs/exp.json: strategy.type:")) << m;
  EXPECT_TRUE(contains(m, "\"mirored\"")) << m;
  for (const char* choice : {"one_device", "mirrored", "central_storage", "multi_worker_mirrored",
                             "parameter_server", "tpu"}) {
    EXPECT_TRUE(contains(m, choice)) << "missing choice " << choice << ": " << m;
  }
}

TEST(RunConfig, TpuIsUnavailable) {
  json doc = minimal_run();
  doc["strategy"] = {{"type", "tpu"}};
  const std::string m = run_error(doc);
  EXPECT_TRUE(starts_with(m, "runs/exp.json: strategy.type:")) << m;
  EXPECT_TRUE(contains(m, "not available")) << m;
}

TEST(RunConfig, ParameterServerKeys) {
  json doc = minimal_run();
  doc["strategy"] = {{"type", "parameter_server"}};
  baton::RunConfig rc = baton::parse_run_config(doc, "runs/exp.json");
  EXPECT_EQ(rc.strategy.num_ps, 0);  // 0: TF_CONFIG's ps count, else 1
  EXPECT_EQ(rc.strategy.mode, "async");
  doc["strategy"] = {{"type", "parameter_server"}, {"num_ps", nullptr}};
  EXPECT_EQ(baton::parse_run_config(doc, "runs/exp.json").strategy.num_ps, 0);
  doc["strategy"] = {{"type", "parameter_server"}, {"num_ps", 2}, {"mode", "sync"}};
  rc = baton::parse_run_config(doc, "runs/exp.json");
  EXPECT_EQ(rc.strategy.num_ps, 2);
  EXPECT_EQ(rc.strategy.mode, "sync");
  doc["strategy"] = {{"type", "parameter_server"}, {"num_ps", 0}};
  EXPECT_TRUE(starts_with(run_error(doc), "runs/exp.json: strategy.num_ps:")) << run_error(doc);
  doc["strategy"] = {{"type", "parameter_server"}, {"mode", "eventual"}};
  EXPECT_TRUE(starts_with(run_error(doc), "runs/exp.json: strategy.mode:")) << run_error(doc);
  doc["strategy"] = {{"type", "parameter_server"}, {"allreduce", {{"algorithm", "ring"}}}};
  EXPECT_TRUE(contains(run_error(doc), "allreduce")) << run_error(doc);
}

TEST(RunConfig, OtherErrorsNameTheirKeys) {
  {
    json doc = minimal_run();
    doc.erase("model");
    EXPECT_TRUE(starts_with(run_error(doc), "runs/exp.json: model: is required"));
  }
  {
    json doc = minimal_run();
    doc["data"]["train"].erase("type");
    EXPECT_TRUE(starts_with(run_error(doc), "runs/exp.json: data.train.type: is required"));
  }
  {
    json doc = minimal_run();
    doc["data"]["shufle_buffer"] = 10;
    EXPECT_TRUE(starts_with(run_error(doc), "runs/exp.json: data.shufle_buffer: unknown key"));
  }
  {
    json doc = minimal_run();
    doc["optimizer"] = {{"type", "adam"}, {"momentum", 0.9}};
    EXPECT_TRUE(starts_with(run_error(doc), "runs/exp.json: optimizer.momentum: unknown key"));
  }
  {
    json doc = minimal_run();
    doc["loss"] = "hinge";
    const std::string m = run_error(doc);
    EXPECT_TRUE(starts_with(m, "runs/exp.json: loss:")) << m;
    EXPECT_TRUE(contains(m, "mse")) << m;
  }
  {
    json doc = minimal_run();
    doc["train"] = {{"global_batch_size", 0}};
    EXPECT_TRUE(contains(run_error(doc), "train.global_batch_size"));
  }
  {
    json doc = minimal_run();
    doc["name"] = "a/b";
    EXPECT_TRUE(starts_with(run_error(doc), "runs/exp.json: name:"));
  }
}

TEST(RunConfig, LoadAppliesOverrides) {
  TempDir dir;
  const std::string p = dir.write("exp.json", minimal_run().dump(2));
  const baton::RunConfig rc =
      baton::load_run_config(p, {"train.epochs=9", "optimizer.lr=0.05", "name=over"});
  EXPECT_EQ(rc.epochs, 9);
  EXPECT_FLOAT_EQ(rc.optimizer.lr, 0.05f);
  EXPECT_EQ(rc.name, "over");
  EXPECT_EQ(rc.raw["train"]["epochs"], 9) << "raw is the document after the overrides";

  const std::string m = input_error([&] { (void)baton::load_run_config(p, {"train.epochs=-1"}); });
  EXPECT_TRUE(contains(m, "train.epochs")) << m;
  EXPECT_TRUE(contains(m, p)) << "messages name the file: " << m;
}
