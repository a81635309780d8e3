// The launch part: the one way to start a run (RunSession) that `baton
// train` and the studio share, the mpirun argument vector, the config made
// runnable from anywhere (the stop signals and the heartbeat:
// test_launch_threads.cpp).
#include <baton/core/error.h>
#include <baton/discovery/discovery.h>
#include <baton/history/store.h>
#include <baton/launch/launcher.h>
#include <baton/launch/mpirun_command.h>
#include <baton/launch/run_session.h>
#include <baton/train/run_config.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace baton {
namespace {

namespace fs = std::filesystem;

class RunSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("baton_launch_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static nlohmann::json tiny() {
    return {
        {"name", "tiny"},
        {"seed", 3},
        {"model", {{"type", "mlp"}, {"layers", {8, 16, 3}}}},
        {"data",
         {{"train",
           {{"type", "synthetic_classification"},
            {"features", 8},
            {"classes", 3},
            {"samples", 64},
            {"seed", 11}}}}},
        {"optimizer", {{"type", "sgd"}, {"lr", 0.1}}},
        {"train", {{"epochs", 2}, {"global_batch_size", 16}, {"log_every_steps", 1}}},
    };
  }

  RunSpec spec(const nlohmann::json& doc = tiny()) {
    RunSpec s;
    s.config = parse_run_config(doc, (dir_ / "run.json").string());
    s.plugin_dir = BATON_PLUGIN_DIR;
    s.runs_root = (dir_ / "runs").string();
    s.history_db = (dir_ / "runs.db").string();
    s.in_mpi_job = false;
    return s;
  }

  fs::path dir_;
};

TEST_F(RunSessionTest, WritesTheRunDirectoryAndRecordsTheRun) {
  Telemetry telemetry;
  int run_ends = 0;
  telemetry.add(std::make_shared<CallbackSink>([&](const Event& e) {
    if (std::holds_alternative<RunEndEvent>(e)) ++run_ends;
  }));
  RunSpec s = spec();
  s.topology = {{"launcher", "test"}};
  RunSession session(std::move(s), telemetry);
  EXPECT_TRUE(session.chief());
  EXPECT_EQ(session.run_id().rfind("tiny-", 0), 0u) << session.run_id();
  // The run's files are written by run(), not before.
  EXPECT_FALSE(fs::exists(dir_ / "runs" / session.run_id() / "config.json"));

  const RunOutcome out = session.run();
  EXPECT_EQ(out.summary.status, "completed");
  EXPECT_EQ(out.summary.steps, 8);
  EXPECT_EQ(run_ends, 1);
  EXPECT_EQ(out.dir.id, session.run_id());
  EXPECT_EQ(out.checkpoint_dir, out.dir.checkpoints());
  for (const std::string& f : {out.dir.config(), out.dir.events(), out.dir.summary()}) {
    EXPECT_TRUE(fs::exists(f)) << f;
  }
  std::ifstream summary(out.dir.summary());
  const auto js = nlohmann::json::parse(summary);
  EXPECT_EQ(js.at("run"), session.run_id());
  EXPECT_EQ(js.at("steps"), 8);

  ASSERT_EQ(out.history_db, (dir_ / "runs.db").string());
  EXPECT_TRUE(out.history_error.empty()) << out.history_error;
  ASSERT_GT(out.history_run, 0);
  const HistoryStore store(out.history_db, HistoryStore::Open::kExisting);
  const RunRecord rec = store.run(out.history_run);
  EXPECT_EQ(rec.uid, session.run_id());
  EXPECT_EQ(rec.status, "completed");
  EXPECT_EQ(rec.topology.at("launcher"), "test");
  EXPECT_EQ(rec.topology.at("world_size"), 1);
  EXPECT_EQ(rec.hosts, session.hosts());
}

TEST_F(RunSessionTest, WithoutHistoryNothingIsRecorded) {
  Telemetry telemetry;
  RunSpec s = spec();
  s.record_history = false;
  RunSession session(std::move(s), telemetry);
  const RunOutcome out = session.run();
  EXPECT_EQ(out.summary.status, "completed");
  EXPECT_TRUE(out.history_db.empty());
  EXPECT_EQ(out.history_run, 0);
  EXPECT_FALSE(fs::exists(dir_ / "runs.db"));
}

TEST_F(RunSessionTest, AForeignHistoryFileFailsBeforeAnythingIsWritten) {
  {
    std::ofstream f(dir_ / "runs.db");
    f << "not a database, and it must stay so";
  }
  Telemetry telemetry;
  EXPECT_THROW(RunSession(spec(), telemetry), InputError);
  EXPECT_FALSE(fs::exists(dir_ / "runs"));
  std::ifstream f(dir_ / "runs.db");
  std::string text;
  std::getline(f, text);
  EXPECT_EQ(text, "not a database, and it must stay so");
}

TEST_F(RunSessionTest, ABadModelFailsAtConstruction) {
  nlohmann::json doc = tiny();
  doc["model"]["layers"] = {8, 16, 4};  // the data has 3 classes
  Telemetry telemetry;
  EXPECT_THROW(RunSession(spec(doc), telemetry), InputError);
  EXPECT_FALSE(fs::exists(dir_ / "runs"));
}

TEST_F(RunSessionTest, ResumeContinuesTheNewestRunOfTheConfig) {
  std::string first_id;
  {
    Telemetry telemetry;
    RunSession session(spec(), telemetry);
    first_id = session.run_id();
    session.run();
  }
  {
    Telemetry telemetry;
    RunSpec s = spec();
    s.resume = true;
    RunSession session(std::move(s), telemetry);
    EXPECT_FALSE(session.resume_found_nothing());
    EXPECT_EQ(session.run_id(), first_id);
    const RunOutcome out = session.run();
    EXPECT_EQ(out.summary.start_step, 8);  // the first run's last checkpoint
  }
  {
    nlohmann::json other = tiny();
    other["name"] = "other";
    Telemetry telemetry;
    RunSpec s = spec(other);
    s.resume = true;
    RunSession session(std::move(s), telemetry);
    EXPECT_TRUE(session.resume_found_nothing());
    EXPECT_NE(session.run_id(), first_id);
  }
}

TEST_F(RunSessionTest, AStopFlagEndsTheRunInterrupted) {
  std::atomic<bool> stop{true};
  Telemetry telemetry;
  RunSpec s = spec();
  s.stop = &stop;
  RunSession session(std::move(s), telemetry);
  const RunOutcome out = session.run();
  EXPECT_EQ(out.summary.status, "interrupted");
  EXPECT_EQ(out.summary.steps, 0);
  const HistoryStore store(out.history_db, HistoryStore::Open::kExisting);
  EXPECT_EQ(store.run(out.history_run).status, "interrupted");
}

TEST_F(RunSessionTest, AGivenRunIdIsKept) {
  Telemetry telemetry;
  RunSpec s = spec();
  s.run_id = "chosen-id";
  RunSession session(std::move(s), telemetry);
  EXPECT_EQ(session.run_id(), "chosen-id");
  EXPECT_EQ(session.run().dir.path, (dir_ / "runs" / "chosen-id").string());
}

// A rank's output is another process's: fields of the wrong type read as
// absent, a rank number past int's range is not a tag - nothing throws
// (found by fuzzing: the launcher stopped on such a line).
TEST(RankLines, WhatALineSaysAndWhatItCannotBreak) {
  const RankLine beat = parse_rank_line(R"({"type":"heartbeat","pid":41,"host":"a","step":7})");
  EXPECT_EQ(beat.kind, RankLine::Kind::kHeartbeat);
  EXPECT_EQ(beat.pid, 41);
  EXPECT_EQ(beat.host, "a");
  EXPECT_EQ(beat.step, 7);
  const RankLine odd = parse_rank_line(R"({"type":"heartbeat","pid":"x","host":5,"step":[1]})");
  EXPECT_EQ(odd.kind, RankLine::Kind::kHeartbeat);
  EXPECT_EQ(odd.pid, 0);
  EXPECT_EQ(odd.host, "");
  EXPECT_EQ(odd.step, -1);
  const RankLine end = parse_rank_line(R"({"type":"run_end","status":"completed","step":12})");
  EXPECT_EQ(end.kind, RankLine::Kind::kEvent);
  EXPECT_EQ(end.status, "completed");
  EXPECT_EQ(parse_rank_line(R"({"type":5})").kind, RankLine::Kind::kText);
  EXPECT_EQ(parse_rank_line("{not json").kind, RankLine::Kind::kText);
  EXPECT_EQ(parse_rank_line("plain text").kind, RankLine::Kind::kText);
  TaggedLines tagged;
  std::vector<TaggedLines::Line> lines;
  tagged.feed("[1,99999999999]<stdout>:x", lines);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rank, -1);  // not a tag: mpirun's own line
}

TEST(MpirunCommand, TheArgumentVectorInOrder) {
  MpirunSpec s;
  s.ranks = 3;
  s.available_slots = 2;       // more ranks than slots: --oversubscribe
  s.hostfile = "/tmp/h file";  // one argument, spaces and all: never a shell
  s.baton = "/opt/baton/bin/baton";
  s.config = "/tmp/run.json";
  s.runs_dir = "/data/runs";
  s.history_db = "/data/runs.db";
  s.train_args = {"--seed", "7"};
  s.send_secret = true;  // a parameter-server job over TCP
  const std::vector<std::string> want = {"-n",
                                         "3",
                                         "--oversubscribe",
                                         "--hostfile",
                                         "/tmp/h file",
                                         "-x",
                                         "BATON_JOB_SECRET",
                                         "/opt/baton/bin/baton",
                                         "train",
                                         "/tmp/run.json",
                                         "--events",
                                         "-",
                                         "--quiet",
                                         "--runs-dir",
                                         "/data/runs",
                                         "--db",
                                         "/data/runs.db",
                                         "--seed",
                                         "7"};
  EXPECT_EQ(mpirun_arguments(s), want);
}

TEST(MpirunCommand, OptionalPartsAreLeftOut) {
  MpirunSpec s;
  s.ranks = 2;
  s.available_slots = 2;  // as many ranks as slots: no --oversubscribe
  s.baton = "baton";
  s.config = "c.json";
  s.events = "";
  s.quiet = false;
  // No hostfile: one host, OpenMPI's own traffic on loopback.
  const std::vector<std::string> want = {"-n",    "2",     "--mca", "oob_tcp_if_include",
                                         "lo",    "--mca", "btl",   "self,vader",
                                         "baton", "train", "c.json"};
  EXPECT_EQ(mpirun_arguments(s), want);
}

// Without a hostfile the slots are this host's physical cores.
TEST(MpirunCommand, OversubscribeOnlyWhenTheRanksOutnumberTheCores) {
  const int cores = probe_cpus().cores;
  MpirunSpec s;
  s.baton = "baton";
  s.config = "c.json";
  const auto has = [](const std::vector<std::string>& a) {
    return std::find(a.begin(), a.end(), "--oversubscribe") != a.end();
  };
  s.ranks = cores;
  EXPECT_FALSE(has(mpirun_arguments(s))) << cores << " ranks on " << cores << " cores";
  s.ranks = cores + 1;
  EXPECT_TRUE(has(mpirun_arguments(s))) << cores + 1 << " ranks on " << cores << " cores";
}

TEST(MpirunCommand, RootGetsOpenMpisPermission) {
  ::unsetenv("OMPI_MCA_rtc_hwloc_vmhole");
  const auto env = mpirun_environment(JobSecret::kMade);
  const std::pair<std::string, std::string> vmhole{"OMPI_MCA_rtc_hwloc_vmhole", "none"};
  if (::geteuid() == 0) {
    ASSERT_EQ(env.size(), 4u);
    EXPECT_EQ(env[0].first, "OMPI_ALLOW_RUN_AS_ROOT");
    EXPECT_EQ(env[1].first, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM");
    EXPECT_EQ(env[2], vmhole);
  } else {
    ASSERT_EQ(env.size(), 2u);
    EXPECT_EQ(env[0], vmhole);
  }
  EXPECT_EQ(env.back().first, "BATON_JOB_SECRET");
  // The caller's own setting is left alone.
  ::setenv("OMPI_MCA_rtc_hwloc_vmhole", "biggest", 1);
  const auto mine = mpirun_environment(JobSecret::kMade);
  EXPECT_TRUE(std::none_of(mine.begin(), mine.end(),
                           [](const auto& kv) { return kv.first == "OMPI_MCA_rtc_hwloc_vmhole"; }));
  ::unsetenv("OMPI_MCA_rtc_hwloc_vmhole");
}

// Each job that needs one (an asynchronous parameter-server job over TCP)
// gets its own 256-bit secret, in the environment only: never in the
// arguments, which `ps` shows to every user. Any other job, and a
// checkpoint's copy, carries none, nor sends one to other hosts.
TEST(MpirunCommand, EachJobGetsAFreshSecretInTheEnvironmentOnly) {
  const auto secret_of = [](const std::vector<std::pair<std::string, std::string>>& env) {
    for (const auto& [k, v] : env) {
      if (k == "BATON_JOB_SECRET") return v;
    }
    return std::string();
  };
  const std::string a = secret_of(mpirun_environment(JobSecret::kMade)),
                    b = secret_of(mpirun_environment(JobSecret::kMade));
  ASSERT_EQ(a.size(), 64u) << a;
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
  EXPECT_EQ(secret_of(mpirun_environment(JobSecret::kLeftOut)), "");
  MpirunSpec s;
  s.baton = "baton";
  s.config = "c.json";
  s.hostfile = "hosts";
  const auto names_secret = [](const std::vector<std::string>& args) {
    return std::find(args.begin(), args.end(), "BATON_JOB_SECRET") != args.end();
  };
  EXPECT_FALSE(names_secret(mpirun_arguments(s))) << "a job that needs no secret";
  s.send_secret = true;
  EXPECT_TRUE(names_secret(mpirun_arguments(s))) << "-x BATON_JOB_SECRET: to the other hosts";
  for (const auto& arg : mpirun_arguments(s)) EXPECT_EQ(arg.find(a), std::string::npos) << arg;
  // A checkpoint's copy (CarryJob::env) goes without it.
  const std::vector<std::string> env = {"OMPI_MCA_rtc_hwloc_vmhole=none", "BATON_JOB_SECRET=" + a};
  EXPECT_EQ(without_secret(env), std::vector<std::string>{"OMPI_MCA_rtc_hwloc_vmhole=none"});
}

TEST(AbsolutizePaths, RelativeDatasetAndCheckpointPathsBecomeAbsolute) {
  const nlohmann::json cfg = {
      {"data",
       {{"train", {{"type", "csv"}, {"path", "../datasets/d.csv"}}},
        {"validation", {{"type", "idx"}, {"images", "/abs/i.idx"}, {"labels", "l.idx"}}}}},
      {"checkpoint", {{"dir", "ckpt"}}},
      {"name", "relative/not/a/path"}};
  const nlohmann::json out = absolutize_paths(cfg, "/home/u/examples");
  EXPECT_EQ(out["data"]["train"]["path"], "/home/u/datasets/d.csv");
  EXPECT_EQ(out["data"]["validation"]["images"], "/abs/i.idx");
  EXPECT_EQ(out["data"]["validation"]["labels"], "/home/u/examples/l.idx");
  EXPECT_EQ(out["checkpoint"]["dir"], "/home/u/examples/ckpt");
  EXPECT_EQ(out["name"], "relative/not/a/path");
  // Several files: a list and a glob.
  const nlohmann::json files = {
      {"data",
       {{"train", {{"type", "csv"}, {"path", {"a.csv", "/abs/b.csv", "sub/c.csv"}}}},
        {"validation", {{"type", "csv"}, {"path", "parts/*.csv"}}}}}};
  const nlohmann::json abs = absolutize_paths(files, "/base");
  EXPECT_EQ(abs["data"]["train"]["path"],
            nlohmann::json::array({"/base/a.csv", "/abs/b.csv", "/base/sub/c.csv"}));
  EXPECT_EQ(abs["data"]["validation"]["path"], "/base/parts/*.csv");
}

TEST(AbsolutizePaths, OtherShapesAreLeftAsTheyAre) {
  const nlohmann::json cfg = {{"data", {{"train", {{"path", 5}}}}}, {"checkpoint", "x"}};
  EXPECT_EQ(absolutize_paths(cfg, "/base"), cfg);
  EXPECT_EQ(absolutize_paths(nlohmann::json::array({1}), "/base"), nlohmann::json::array({1}));
}

}  // namespace
}  // namespace baton

// mpirun --tag-output tags chunks, not lines: a long line comes out with a
// tag in its middle, and another rank's chunk may sit in between.
TEST(TaggedLines, ReassemblesLinesSplitIntoChunks) {
  baton::TaggedLines t;
  std::vector<baton::TaggedLines::Line> out;
  t.feed("[1,0]<stdout>:{\"a\":[1,1]<stdout>:{\"beat\":1}", out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].rank, 1);
  EXPECT_EQ(out[0].text, "{\"beat\":1}");
  t.feed("[1,0]<stdout>:12[1,0]<stdout>:3}", out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].rank, 0);
  EXPECT_FALSE(out[1].is_stderr);
  EXPECT_EQ(out[1].text, "{\"a\":123}");
  t.feed("[1,1]<stderr>:baton: failed (rank 1): boom", out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[2].is_stderr);
  EXPECT_EQ(out[2].text, "baton: failed (rank 1): boom");
  t.feed("mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9", out);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[3].rank, -1);
}
