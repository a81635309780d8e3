// Crash trials, as SQLite tests itself: the real programs killed with
// SIGKILL at random moments, 20 times each, then what they leave checked.
//   - `baton train` killed during a checkpoint write (its temporary file is
//     there when the kill lands): no torn file under a final name, every
//     checkpoint reads back, the resume names and removes the torn file and
//     starts from the newest complete checkpoint; the same kill is the
//     history writer's death mid-run: integrity_check is ok, every sample a
//     reader saw committed before the kill is there (no holes), the run is
//     marked interrupted when the history is next opened.
//   - `baton-studio` killed during a run it started (embedded): on the
//     studio's next start the run is marked interrupted and nothing else in
//     the history changes.
// BATON_CRASH_SEED replays a sequence of kill moments.
#include <baton/core/child_process.h>
#include <baton/core/running_child.h>
#include <baton/history/store.h>
#include <baton/train/checkpoint.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kTrials = 20;

uint64_t seed() {
  const char* s = std::getenv("BATON_CRASH_SEED");
  return s != nullptr ? std::strtoull(s, nullptr, 10) : std::random_device{}();
}

// A read-only look at the history, as another program would take it while
// the writer runs (WAL: a reader sees what is committed).
struct Peek {
  explicit Peek(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      sqlite3_close(db);
      db = nullptr;
    } else {
      sqlite3_busy_timeout(db, 2000);
    }
  }
  ~Peek() { sqlite3_close(db); }
  Peek(const Peek&) = delete;
  Peek& operator=(const Peek&) = delete;
  // The first column of the first row as text ("" when none or no table).
  std::string text(const std::string& sql) const {
    if (db == nullptr) return "";
    sqlite3_stmt* st = nullptr;
    std::string out;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0) != nullptr) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    return out;
  }
  int64_t count(const std::string& sql) const {
    const std::string t = text(sql);
    return t.empty() ? 0 : std::stoll(t);
  }
  sqlite3* db = nullptr;
};

std::string loss_samples_of(const std::string& where) {
  return "SELECT count(*) FROM metric_samples s JOIN metrics m ON m.id = s.metric "
         "JOIN runs r ON r.id = s.run WHERE m.name = 'loss' AND " +
         where;
}

class CrashTrials : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    work_ = fs::path(BATON_TEST_WORK_DIR) / info->name();
    fs::remove_all(work_);
    fs::create_directories(work_);
    env_ = {"XDG_DATA_HOME=" + (work_ / "xdg").string(),
            "XDG_CONFIG_HOME=" + (work_ / "xdg").string(), "QT_QPA_PLATFORM=offscreen"};
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(work_);
  }

  // The digits MLP, wide enough that a checkpoint (13 MB: weights and two
  // Adam moments) takes a good part of each step to write; one every step.
  std::string write_config(int64_t steps) {
    json c = json::parse(std::ifstream(fs::path(BATON_SOURCE_DIR) / "resources/examples/digits.json"));
    c["data"]["train"]["path"] =
        (fs::path(BATON_SOURCE_DIR) / "resources/datasets/digits.csv.gz").string();
    c["model"]["layers"] = {64, 1024, 1024, 10};
    c["train"] = {{"steps", steps}, {"global_batch_size", 64}, {"log_every_steps", 1}};
    c["checkpoint"] = {{"every_steps", 1}, {"every_epoch", false}, {"keep", 2}};
    const std::string path = (work_ / "digits_wide.json").string();
    std::ofstream(path) << c.dump(2);
    return path;
  }

  // Newest complete checkpoint's step (-1: none) and whether a write's
  // temporary file is there.
  static std::pair<int64_t, bool> look(const fs::path& dir) {
    int64_t newest = -1;
    bool temp = false;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.ends_with(".tmp")) temp = true;
      if (name.starts_with("ckpt-") && name.ends_with(".bin")) {
        newest = std::max<int64_t>(newest, std::stoll(name.substr(5, name.size() - 9)));
      }
    }
    return {newest, temp};
  }

  fs::path work_;
  std::vector<std::string> env_;
};

// Waits (up to 60 s) for `ready`, draining the child's output meanwhile;
// false when the child ended or time ran out.
template <typename F>
bool wait_until(baton::RunningChild& child, F ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  baton::RunningChild::Lines lines;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ready()) return true;
    if (!child.read(0.0002, lines)) return false;
    lines.out.clear();
    lines.err.clear();
  }
  return false;
}

TEST_F(CrashTrials, BatonTrainKilledMidCheckpointLosesNoCheckpointAndNoCommittedSample) {
  const std::string config = write_config(1000000);
  const std::string db = (work_ / "runs.db").string();
  const std::string runs = (work_ / "runs").string();
  const uint64_t s0 = seed();
  std::printf("seed %llu (BATON_CRASH_SEED replays it)\n", static_cast<unsigned long long>(s0));
  std::mt19937_64 rng(s0);
  int mid_write = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const std::string id = "crash" + std::to_string(trial);
    const fs::path ckpts = fs::path(runs) / id / "checkpoints";
    const int64_t after = 1 + static_cast<int64_t>(rng() % 4);
    const auto into_write = std::chrono::microseconds(rng() % 4000);
    int64_t seen_committed = 0;
    {
      baton::RunningChild train(BATON_BINARY,
                                {"baton", "train", config, "--runs-dir", runs, "--db", db,
                                 "--run-id", id, "-q"},
                                env_);
      // `after` checkpoints complete and the history holding some of the
      // run (its writer commits every 250 ms); what a reader sees
      // committed then; then the next write under way, `into_write` into
      // it: the kill.
      ASSERT_TRUE(wait_until(train, [&] {
        if (look(ckpts).first < after) return false;
        seen_committed = Peek(db).count(loss_samples_of("r.uid = '" + id + "'"));
        return seen_committed > 0;
      })) << "no checkpoint " << after << " or nothing committed";
      ASSERT_TRUE(wait_until(train, [&] { return look(ckpts).second; })) << "no write seen";
      std::this_thread::sleep_for(into_write);
      train.signal_group(SIGKILL);
      const int status = train.terminate(0);
      ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
          << baton::describe_exit(status);
    }
    const auto [newest, torn] = look(ckpts);
    mid_write += torn ? 1 : 0;
    // Every file under a final name is whole.
    baton::CheckpointManager mgr(ckpts.string(), 2);
    for (const std::string& p : mgr.list()) {
      EXPECT_NO_THROW((void)baton::read_checkpoint(p)) << p;
    }
    {
      // The next open of the history: sound, the run interrupted, every
      // sample seen committed there, steps 1..max without a hole.
      baton::HistoryStore store(db);
      EXPECT_EQ(store.integrity_check(), "ok");
      const baton::RunRecord r = store.run(store.resolve(id));
      EXPECT_EQ(r.status, "interrupted");
      int64_t n = 0, max_step = 0;
      store.for_each_sample(
          r.id, [&](const baton::MetricSample& s) { ++n, max_step = std::max(max_step, s.step); },
          "loss");
      EXPECT_GE(n, seen_committed);
      EXPECT_EQ(n, max_step) << "a hole in the committed steps";
    }
    // The resume: the torn file named and removed, the newest complete
    // checkpoint taken.
    const auto resumed = baton::run_child(
        BATON_BINARY,
        {"baton", "train", config, "--runs-dir", runs, "--db", db, "--run-id", id, "--resume",
         "--set", "train.steps=" + std::to_string(newest + 1), "--events", "-", "-q"},
        env_, 120);
    ASSERT_TRUE(baton::exited_ok(resumed.status))
        << baton::describe_exit(resumed.status) << ": " << baton::excerpt(resumed.err);
    bool named = false;
    int64_t start_step = -1;
    std::istringstream lines(resumed.out);
    for (std::string line; std::getline(lines, line);) {
      const json e = json::parse(line, nullptr, false);
      if (!e.is_object()) continue;
      if (e.value("type", "") == "run_start") start_step = e.value("start_step", int64_t{-1});
      const std::string m = e.value("message", "");
      named = named || (m.rfind("torn checkpoint ", 0) == 0 && m.find(".tmp") != std::string::npos);
    }
    EXPECT_EQ(start_step, newest);
    EXPECT_EQ(named, torn) << "the torn file was " << (torn ? "not named" : "named, but none was");
    EXPECT_FALSE(look(ckpts).second) << "a torn file is still there after the resume";
  }
  // Most kills land inside a write (on a disk whose fsync costs nothing a
  // write may finish between the look and the signal; here 19-20 of 20).
  std::printf("%d of %d kills landed during a checkpoint write\n", mid_write, kTrials);
  EXPECT_GE(mid_write, kTrials / 2);
}

TEST_F(CrashTrials, StudioKilledDuringItsRunLeavesTheRestOfTheHistoryAsItWas) {
  if (std::string(BATON_STUDIO).empty()) GTEST_SKIP() << "baton-studio is not built (no Qt 6)";
  const std::string db = (work_ / "runs.db").string();
  const std::string runs = (work_ / "runs").string();
  // A finished run that must not change.
  const std::string short_config = write_config(5);
  const auto before = baton::run_child(
      BATON_BINARY, {"baton", "train", short_config, "--runs-dir", runs, "--db", db, "--run-id",
                     "kept", "-q"},
      env_, 120);
  ASSERT_TRUE(baton::exited_ok(before.status)) << baton::excerpt(before.err);
  const std::string kept_row =
      "SELECT status || '|' || end_time || '|' || final_metrics || '|' || "
      "(SELECT count(*) FROM metric_samples WHERE run = runs.id) || '|' || "
      "(SELECT count(*) FROM events WHERE run = runs.id) FROM runs WHERE uid = 'kept'";
  const std::string kept = Peek(db).text(kept_row);
  ASSERT_FALSE(kept.empty());

  const std::string config = write_config(1000000);
  const uint64_t s0 = seed();
  std::printf("seed %llu (BATON_CRASH_SEED replays it)\n", static_cast<unsigned long long>(s0));
  std::mt19937_64 rng(s0);
  const std::vector<std::string> studio_args = {"baton-studio", "--db", db, "--runs-dir", runs};
  for (int trial = 0; trial < kTrials; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int64_t after = 1 + static_cast<int64_t>(rng() % 20);
    const std::string running = "r.status = 'running'";
    int64_t seen = 0;
    {
      std::vector<std::string> args = studio_args;
      args.insert(args.end(), {"--run", config});
      baton::RunningChild studio(BATON_STUDIO, args, env_);
      ASSERT_TRUE(wait_until(studio, [&] {
        seen = Peek(db).count(loss_samples_of(running));
        return seen >= after;
      })) << "the studio's run did not reach step " << after;
      studio.signal_group(SIGKILL);
      const int status = studio.terminate(0);
      ASSERT_TRUE(WIFSIGNALED(status)) << baton::describe_exit(status);
    }
    EXPECT_EQ(Peek(db).count("SELECT count(*) FROM runs WHERE status = 'running'"), 1);
    // The studio's next start marks it, and nothing else changes.
    {
      baton::RunningChild studio(BATON_STUDIO, studio_args, env_);
      EXPECT_TRUE(wait_until(studio, [&] {
        return Peek(db).count("SELECT count(*) FROM runs WHERE status = 'running'") == 0;
      })) << "the killed run was not marked when the studio started again";
      studio.terminate(5);
    }
    Peek peek(db);
    EXPECT_EQ(peek.text("PRAGMA integrity_check"), "ok");
    EXPECT_EQ(peek.count("SELECT count(*) FROM runs WHERE status = 'interrupted'"), trial + 1);
    EXPECT_EQ(peek.text(kept_row), kept) << "the finished run changed";
    // The newest interrupted run holds at least what was seen committed.
    EXPECT_GE(peek.count(loss_samples_of(
                  "r.id = (SELECT max(id) FROM runs WHERE status = 'interrupted')")),
              seen);
  }
}

}  // namespace
