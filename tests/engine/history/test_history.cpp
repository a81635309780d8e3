// The run history: schema and migrations, recording, queries, exports,
// refusal of foreign files, concurrent reading, and a writer killed with
// SIGKILL in the middle of ingesting.
#include <baton/core/error.h>
#include <baton/history/sink.h>
#include <baton/history/store.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "history_test_util.h"

namespace baton {
namespace {

namespace fs = std::filesystem;
using history_test::Recorded;
using history_test::TempDir;

TEST(History, NewDatabaseIsMarkedVersionedAndInWalMode) {
  TempDir tmp;
  const std::string path = tmp.path("sub/dir/runs.db");  // directories are created
  HistoryStore store(path);
  EXPECT_EQ(store.schema_version(), 8);
  EXPECT_EQ(history_test::pragma(path, "application_id"), "1111577678");  // 'BATN'
  EXPECT_EQ(history_test::pragma(path, "journal_mode"), "wal");
  EXPECT_EQ(store.integrity_check(), "ok");
  EXPECT_TRUE(store.list_runs().empty());
}

TEST(History, RecordsARunAndReadsItBack) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  Recorded rec = history_test::record_run(db, "exp-1", 500, /*log_every=*/1, "completed");
  HistoryStore store(db, HistoryStore::Open::kExisting);
  const auto runs = store.list_runs();
  ASSERT_EQ(runs.size(), 1u);
  const RunRecord r = store.run(store.resolve("exp-1"));
  EXPECT_EQ(r.uid, "exp-1");
  EXPECT_EQ(r.status, "completed");
  EXPECT_EQ(r.strategy, "mirrored");
  EXPECT_EQ(r.replicas, 2);
  EXPECT_EQ(r.config["optimizer"]["lr"], 0.01);
  EXPECT_EQ(r.topology["world_size"], 1);
  EXPECT_GT(r.end_time, 0);
  EXPECT_DOUBLE_EQ(r.final_metrics["train_loss"].get<double>(), rec.losses.back());
  EXPECT_EQ(store.resolve(std::to_string(r.id)), r.id);
  EXPECT_EQ(store.resolve("exp-"), r.id);  // a unique prefix

  // last/min/max per metric equal what was emitted.
  bool saw_loss = false;
  for (const MetricSummary& s : store.metric_summary(r.id)) {
    if (s.metric != "loss") continue;
    saw_loss = true;
    EXPECT_EQ(s.count, 500);
    EXPECT_EQ(s.last_step, 500);
    EXPECT_DOUBLE_EQ(s.last, rec.losses.back());
    EXPECT_DOUBLE_EQ(s.min, *std::min_element(rec.losses.begin(), rec.losses.end()));
    EXPECT_DOUBLE_EQ(s.max, *std::max_element(rec.losses.begin(), rec.losses.end()));
  }
  EXPECT_TRUE(saw_loss);
  const auto links = store.links(r.id);
  EXPECT_EQ(links.size(), rec.links);
  for (const LinkRecord& l : links) {
    EXPECT_DOUBLE_EQ(l.wait_s, 1e-3 * static_cast<double>(l.step)) << "step " << l.step;
    EXPECT_DOUBLE_EQ(l.seconds, 1e-4);
    EXPECT_EQ(l.eager, l.step % 2 == 1) << "step " << l.step;  // the eager mark is kept
  }
  const auto events = store.events(r.id);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.front().kind, "log");
  EXPECT_EQ(events.front().message, "before run_start");  // held, then recorded
}

TEST(History, CsvExportMatchesWhatWasRecorded) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  Recorded rec = history_test::record_run(db, "csv-run", 300, 3, "completed");
  HistoryStore store(db);
  const std::string csv_path = tmp.path("out.csv");
  {
    std::FILE* f = std::fopen(csv_path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    export_run_csv(store, store.resolve("csv-run"), f);
    std::fclose(f);
  }
  std::ifstream in(csv_path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "step,wall_time_s,rank,metric,value");
  std::map<std::pair<int64_t, std::string>, double> got;
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string step, wall, rank, metric, value;
    std::getline(ss, step, ',');
    std::getline(ss, wall, ',');
    std::getline(ss, rank, ',');
    std::getline(ss, metric, ',');
    std::getline(ss, value, ',');
    got[{std::stoll(step), metric}] = value == "nan" ? NAN : std::strtod(value.c_str(), nullptr);
  }
  // Every emitted step sample is there with its exact value (%.17g).
  ASSERT_EQ(rec.steps.size(), 100u);
  for (const StepEvent& e : rec.steps) {
    const auto loss = got.find({e.step, "loss"});
    ASSERT_NE(loss, got.end()) << e.step;
    if (std::isnan(e.loss)) {
      EXPECT_TRUE(std::isnan(loss->second));
    } else {
      EXPECT_EQ(loss->second, e.loss) << e.step;
    }
    EXPECT_EQ((got[{e.step, "grad_norm"}]), e.grad_norm);
    EXPECT_EQ((got[{e.step, "step_time_ms"}]), e.step_time_ms);
    // MFU only where known (> 0).
    EXPECT_EQ(got.count({e.step, "mfu"}), e.mfu > 0 ? 1u : 0u) << e.step;
    if (e.mfu > 0) {
      EXPECT_EQ((got[{e.step, "mfu"}]), e.mfu);
    }
  }
  // 11 metrics per step event, MFU on those that have it, and 6 per epoch
  // event (with validation).
  size_t with_mfu = 0;
  for (const auto& e : rec.steps) with_mfu += e.mfu > 0 ? 1 : 0;
  EXPECT_GT(with_mfu, 0u);
  EXPECT_EQ(got.size(), rec.steps.size() * 11 + with_mfu + rec.epochs * 6);
}

TEST(History, FiltersTagsNotesAndDelete) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  history_test::record_run(db, "a-1", 20, 1, "completed");
  history_test::record_run(db, "b-2", 20, 1, "failed");
  history_test::record_run(db, "c-3", 20, 1, "completed", "one_device");
  HistoryStore store(db);
  RunFilter f;
  f.add("status=completed");
  EXPECT_EQ(store.list_runs(f).size(), 2u);
  f.add("strategy=one_device");
  ASSERT_EQ(store.list_runs(f).size(), 1u);
  EXPECT_EQ(store.list_runs(f)[0].uid, "c-3");
  EXPECT_THROW(f.add("colour=red"), InputError);
  EXPECT_THROW(f.add("status=done"), InputError);
  EXPECT_THROW(f.add("status"), InputError);

  const int64_t b = store.resolve("b-2");
  EXPECT_EQ(store.run(b).error, "boom");
  store.add_tag(b, "baseline");
  store.add_tag(b, "baseline");  // idempotent
  store.add_tag(b, "2x");
  EXPECT_THROW(store.add_tag(b, "has space"), InputError);
  RunFilter t;
  t.add("tag=baseline");
  ASSERT_EQ(store.list_runs(t).size(), 1u);
  EXPECT_EQ(store.list_runs(t)[0].tags, (std::vector<std::string>{"2x", "baseline"}));
  store.set_note(b, "the lr was too high");
  EXPECT_EQ(store.run(b).notes, "the lr was too high");
  RunFilter lim;
  lim.limit = 2;
  EXPECT_EQ(store.list_runs(lim).size(), 2u);
  EXPECT_EQ(store.list_runs(lim)[0].uid, "c-3");  // newest first

  store.remove_run(b);
  EXPECT_THROW(store.resolve("b-2"), InputError);
  EXPECT_THROW(store.run(b), InputError);
  EXPECT_THROW(store.remove_run(b), InputError);
  // Its samples went with it (foreign keys, ON DELETE CASCADE).
  EXPECT_EQ(history_test::count(
                db, "SELECT count(*) FROM metric_samples WHERE run = " + std::to_string(b)),
            0);
  EXPECT_GT(history_test::count(db, "SELECT count(*) FROM metric_samples"), 0);
  EXPECT_THROW(store.resolve("nope"), InputError);
  EXPECT_THROW(store.resolve("999"), InputError);
}

TEST(History, DiffConfigsKeyByKey) {
  const auto a = nlohmann::json::parse(
      R"({"optimizer": {"type": "adam", "lr": 0.002}, "model": {"layers": [64, 10]}, "seed": 1})");
  const auto b = nlohmann::json::parse(
      R"({"optimizer": {"type": "adam", "lr": 0.01}, "model": {"layers": [64, 32, 10]}, "train": {"steps": 5}})");
  const auto d = diff_configs(a, b);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].key, "model.layers");
  EXPECT_EQ(d[0].kind, ConfigChange::Kind::kChanged);
  EXPECT_EQ(d[1].key, "optimizer.lr");
  EXPECT_EQ(d[1].before, 0.002);
  EXPECT_EQ(d[1].after, 0.01);
  EXPECT_EQ(d[2].key, "seed");
  EXPECT_EQ(d[2].kind, ConfigChange::Kind::kRemoved);
  EXPECT_EQ(d[3].key, "train.steps");
  EXPECT_EQ(d[3].kind, ConfigChange::Kind::kAdded);
  EXPECT_TRUE(diff_configs(a, a).empty());
}

// ------------------------------------------------------------ foreign files

TEST(History, ATextFileIsRefusedAndNotModified) {
  TempDir tmp;
  const std::string path = tmp.path("notes.txt");
  history_test::write_file(path, "these are my notes, not a database\n");
  const std::string before = history_test::read_file(path);
  try {
    HistoryStore store(path);
    FAIL() << "opened a text file";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not a Baton history database"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(HistorySink sink(path), InputError);
  EXPECT_EQ(history_test::read_file(path), before);
  EXPECT_FALSE(fs::exists(path + "-wal"));
}

TEST(History, AnotherApplicationsDatabaseIsRefusedAndNotModified) {
  TempDir tmp;
  const std::string path = tmp.path("other.db");
  history_test::exec_sql(path,
                         "CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT);"
                         "INSERT INTO photos (path) VALUES ('a.jpg');");
  const std::string before = history_test::read_file(path);
  try {
    HistoryStore store(path);
    FAIL() << "opened another application's database";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not a Baton run history"), std::string::npos) << e.what();
  }
  EXPECT_EQ(history_test::read_file(path), before);
  EXPECT_EQ(history_test::count(path, "SELECT count(*) FROM sqlite_schema"), 1);
}

TEST(History, ADatabaseFromANewerBatonIsRefusedAndNotModified) {
  TempDir tmp;
  const std::string path = tmp.path("runs.db");
  history_test::record_run(path, "r", 10, 1, "completed");
  history_test::exec_sql(path, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA user_version = 99;");
  const std::string before = history_test::read_file(path);
  try {
    HistoryStore store(path);
    FAIL() << "opened a newer database";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("newer Baton (history schema version 99"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(HistorySink sink(path), InputError);
  EXPECT_EQ(history_test::read_file(path), before);
  EXPECT_EQ(history_test::pragma(path, "user_version"), "99");
}

// ------------------------------------------------------------ migration

// The version 1 layout, frozen here as it was shipped: the migration code
// must bring exactly this to the current version.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE runs (
  id INTEGER PRIMARY KEY, uid TEXT NOT NULL UNIQUE, name TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
  start_time REAL NOT NULL, end_time REAL, strategy TEXT NOT NULL DEFAULT '',
  replicas INTEGER NOT NULL DEFAULT 1, hosts TEXT NOT NULL DEFAULT '[]',
  config TEXT NOT NULL DEFAULT '{}', topology TEXT NOT NULL DEFAULT '{}',
  start_info TEXT NOT NULL DEFAULT '{}', final_metrics TEXT NOT NULL DEFAULT '{}',
  error TEXT NOT NULL DEFAULT '');
CREATE INDEX runs_by_start ON runs (start_time);
CREATE TABLE metrics (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL CHECK (kind IN ('step', 'epoch')));
CREATE TABLE metric_samples (
  run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  metric INTEGER NOT NULL REFERENCES metrics (id), step INTEGER NOT NULL,
  rank INTEGER NOT NULL, seq INTEGER NOT NULL, epoch INTEGER NOT NULL,
  wall_time_s REAL NOT NULL, value REAL,
  PRIMARY KEY (run, metric, step, rank, seq)) WITHOUT ROWID;
CREATE TABLE link_samples (
  run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE, step INTEGER NOT NULL,
  seq INTEGER NOT NULL, src INTEGER NOT NULL, dst INTEGER NOT NULL,
  wall_time_s REAL NOT NULL, num_bytes INTEGER NOT NULL, seconds REAL NOT NULL,
  estimated INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (run, step, seq)) WITHOUT ROWID;
CREATE TABLE events (
  run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE, step INTEGER NOT NULL,
  seq INTEGER NOT NULL, wall_time_s REAL NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('log', 'checkpoint', 'restart', 'error')),
  level TEXT NOT NULL DEFAULT '', message TEXT NOT NULL DEFAULT '',
  data TEXT NOT NULL DEFAULT '{}', PRIMARY KEY (run, step, seq)) WITHOUT ROWID;
PRAGMA application_id = 1111577678;
PRAGMA user_version = 1;
)sql";

TEST(History, MigratesAVersion1Database) {
  TempDir tmp;
  const std::string path = tmp.path("v1.db");
  std::string sql = kSchemaV1;
  sql +=
      "INSERT INTO metrics (id, name, kind) VALUES (1, 'loss', 'step'), (2, 'accuracy', 'step');"
      "INSERT INTO runs (id, uid, name, status, start_time, end_time, strategy, config) VALUES "
      "(1, 'old-done', 'old', 'completed', 1000, 1100, 'one_device', '{\"seed\": 1}'),"
      "(2, 'old-running', 'old', 'running', 2000, NULL, 'mirrored', '{}');";
  // 5000 loss samples with a spike, plus accuracy.
  sql +=
      "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < 4999) "
      "INSERT INTO metric_samples SELECT 1, 1, i, 0, i + 1, 0, i * 0.01, "
      "CASE WHEN i = 3333 THEN 100.0 ELSE 1.0 / (i + 1) END FROM c;"
      "INSERT INTO metric_samples VALUES (1, 2, 7, 0, 9999, 0, 0.07, 0.5);"
      "INSERT INTO metric_samples VALUES (2, 1, 3, 0, 1, 0, 0.03, 2.5);"
      "INSERT INTO link_samples VALUES (1, 7, 10000, 0, 1, 0.07, 4096, 0.001, 0);";
  history_test::exec_sql(path, sql);
  ASSERT_EQ(history_test::pragma(path, "user_version"), "1");

  HistoryStore store(path);
  EXPECT_EQ(store.schema_version(), 8);
  EXPECT_EQ(store.integrity_check(), "ok");
  // Data kept; the new columns and tables work.
  const RunRecord done = store.run(store.resolve("old-done"));
  EXPECT_EQ(done.status, "completed");
  EXPECT_EQ(done.config["seed"], 1);
  EXPECT_EQ(done.notes, "");
  // Version 3: a link sample's wait, 0 for the samples recorded before it.
  const auto links = store.links(done.id);
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].num_bytes, 4096);
  EXPECT_DOUBLE_EQ(links[0].wait_s, 0.0);
  // Version 7: the eager mark, not set on the samples recorded before it.
  EXPECT_FALSE(links[0].eager);
  store.add_tag(done.id, "migrated");
  store.set_note(done.id, "from v1");
  EXPECT_EQ(store.run(done.id).tags, std::vector<std::string>{"migrated"});
  // A version 1 run left running has no recorder to ask: interrupted.
  EXPECT_EQ(store.run(store.resolve("old-running")).status, "interrupted");
  // Rollups were computed for the old samples: summary and downsampling
  // see the spike and the right last value.
  for (const MetricSummary& s : store.metric_summary(done.id)) {
    if (s.metric == "loss") {
      EXPECT_EQ(s.count, 5000);
      EXPECT_DOUBLE_EQ(s.max, 100.0);
      EXPECT_DOUBLE_EQ(s.min, 1.0 / 5000);
      EXPECT_DOUBLE_EQ(s.last, 1.0 / 5000);
      EXPECT_EQ(s.last_step, 4999);
    } else {
      EXPECT_EQ(s.metric, "accuracy");
      EXPECT_EQ(s.count, 1);
    }
  }
  const auto buckets = store.downsample(done.id, "loss", 0, 4999, 10);
  ASSERT_FALSE(buckets.empty());
  double top = 0;
  int64_t total = 0;
  for (const auto& b : buckets) {
    top = std::max(top, b.max);
    total += b.count;
  }
  EXPECT_DOUBLE_EQ(top, 100.0);
  EXPECT_EQ(total, 5000);
  EXPECT_DOUBLE_EQ(buckets.back().last, 1.0 / 5000);
  // Opening again is a no-op.
  HistoryStore again(path);
  EXPECT_EQ(again.schema_version(), 8);
  // Version 4: the rebuilt runs table hands out no id twice, and the
  // samples stayed with their run (the rebuild cascaded nothing).
  EXPECT_EQ(history_test::count(path, "SELECT count(*) FROM metric_samples WHERE run = 1"), 5001);
  again.remove_run(again.resolve("old-running"));  // id 2, the largest
  history_test::record_run(path, "after-migration", 5, 1, "completed");
  EXPECT_EQ(again.resolve("after-migration"), 3);
}

// ------------------------------------------------------------ downsampling

TEST(History, DownsamplingIsExactOverAnyRange) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::map<int64_t, double> series;  // step -> loss
  {
    HistorySink sink(db);
    RunStartEvent start;
    start.run = "long";
    start.name = "long";
    sink.emit(start);
    for (int64_t step = 1; step <= 200000; step += 2) {
      StepEvent e;
      e.run = "long";
      e.step = step;
      e.loss = noise(rng);
      if (step == 123457) e.loss = 1000.0;  // a spike to keep
      if (step == 170001) e.loss = NAN;     // a NaN to not count in min/max
      series[step] = e.loss;
      sink.emit(e);
    }
    sink.close();
  }
  HistoryStore store(db);
  const int64_t run = store.resolve("long");
  for (auto [from, to, n] : std::vector<std::tuple<int64_t, int64_t, int>>{{0, 199999, 1000},
                                                                           {1, 200000, 1500},
                                                                           {777, 188888, 700},
                                                                           {5000, 5100, 10},
                                                                           {100, 99, 64},
                                                                           {123000, 124000, 3}}) {
    const auto buckets = store.downsample(run, "loss", from, to, n);
    if (to < from) {  // the whole series
      from = 1;
      to = 199999;
    }
    ASSERT_FALSE(buckets.empty());
    EXPECT_LE(buckets.size(), static_cast<size_t>(n) + 1) << from << ".." << to;
    int64_t total = 0, prev_last = from - 1;
    for (const SeriesBucket& b : buckets) {
      ASSERT_GT(b.first_step, prev_last);  // ordered and disjoint
      prev_last = b.last_step;
      // Brute force over the bucket's own step range.
      double lo = NAN, hi = NAN, last = NAN;
      int64_t count = 0;
      for (auto it = series.lower_bound(b.first_step);
           it != series.end() && it->first <= b.last_step; ++it) {
        ++count;
        last = it->second;
        if (!std::isnan(it->second)) {
          lo = std::isnan(lo) ? it->second : std::min(lo, it->second);
          hi = std::isnan(hi) ? it->second : std::max(hi, it->second);
        }
      }
      EXPECT_EQ(b.count, count) << b.first_step;
      EXPECT_EQ(b.min, lo) << b.first_step;
      EXPECT_EQ(b.max, hi) << b.first_step;
      if (std::isnan(last)) {
        EXPECT_TRUE(std::isnan(b.last));
      } else {
        EXPECT_EQ(b.last, last) << b.first_step;
      }
      total += b.count;
    }
    // Every sample of [from, to] is in exactly one bucket.
    int64_t expected = 0;
    for (auto it = series.lower_bound(from); it != series.end() && it->first <= to; ++it) {
      ++expected;
    }
    EXPECT_EQ(total, expected) << from << ".." << to;
  }
  EXPECT_THROW(store.downsample(run, "loss", 0, 10, 0), InputError);
  EXPECT_TRUE(store.downsample(run, "no_such_metric", 0, 10, 5).empty());
}

// ------------------------------------------------------------ concurrency

TEST(History, AReaderReadsWhileTheWriterWrites) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  HistorySinkOptions opt;
  opt.commit_every_ms = 2;
  opt.commit_every_rows = 64;
  HistorySink sink(db, {}, opt);
  RunStartEvent start;
  start.run = "live";
  sink.emit(start);
  sink.flush();
  constexpr int kSteps = 20000;
  std::atomic<bool> writing{true};
  std::thread writer([&] {
    for (int i = 1; i <= kSteps; ++i) {
      StepEvent e;
      e.run = "live";
      e.step = i;
      e.loss = 1.0 / i;
      sink.emit(e);
    }
    sink.flush();
    writing = false;
  });
  HistoryStore reader(db);
  const int64_t run = reader.resolve("live");
  int64_t seen = 0, reads = 0;
  bool done = false;
  while (!done) {
    done = !writing.load();  // read once more after the writer finished
    int64_t n = 0;
    for (const auto& s : reader.metric_summary(run)) {
      if (s.metric == "loss") n = s.count;
    }
    // What a reader sees only grows, and is always whole steps (one
    // transaction holds a step's samples and its rollups).
    ASSERT_GE(n, seen);
    int64_t samples = 0;
    reader.for_each_sample(run, [&](const MetricSample&) { ++samples; });
    ASSERT_EQ(samples % 11, 0);
    ASSERT_GE(samples, n * 11);
    seen = n;
    ++reads;
  }
  writer.join();
  EXPECT_EQ(seen, kSteps);
  EXPECT_GT(reads, 1);
  EXPECT_EQ(reader.run(run).status, "running");
  sink.close();
  EXPECT_EQ(reader.integrity_check(), "ok");
}

// The studio's first moments: its history list and a run's recorder open
// a database that does not exist yet, at the same time. Whoever comes
// second must wait for the first to make it, not report a half-made file
// (or a lock held while it is made) as a foreign or unreadable database.
TEST(History, OpenersRacingToCreateTheDatabaseAllSucceed) {
  TempDir tmp;
  for (int round = 0; round < 40; ++round) {
    const std::string db = tmp.path("race" + std::to_string(round) + ".db");
    constexpr int kOpeners = 6;
    std::atomic<int> ready{0};
    std::vector<std::string> errors(kOpeners);
    std::vector<std::thread> openers;
    for (int i = 0; i < kOpeners; ++i) {
      openers.emplace_back([&, i] {
        ready.fetch_add(1);
        while (ready.load() < kOpeners) std::this_thread::yield();
        try {
          if (i % 2 == 0) {
            HistoryStore store(db, HistoryStore::Open::kCreate);
            (void)store.list_runs();
          } else {
            // The history list: read-only once the file is there.
            std::error_code ec;
            HistoryStore store(db, fs::exists(db, ec) ? HistoryStore::Open::kReadOnly
                                                      : HistoryStore::Open::kCreate);
            (void)store.list_runs();
          }
        } catch (const std::exception& e) {
          errors[static_cast<size_t>(i)] = e.what();
        }
      });
    }
    for (auto& t : openers) t.join();
    for (int i = 0; i < kOpeners; ++i) {
      EXPECT_EQ(errors[static_cast<size_t>(i)], "") << "round " << round << ", opener " << i;
    }
    EXPECT_EQ(history_test::pragma(db, "journal_mode"), "wal");
  }
}

// A child process ingests without end, telling the parent through a pipe
// how many steps it knows are committed (flush() returned); the parent
// kills it with SIGKILL mid-ingest and opens the database.
TEST(History, AWriterKilledMidIngestLeavesASoundDatabase) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    HistorySinkOptions opt;
    opt.commit_every_ms = 5;
    opt.commit_every_rows = 256;
    auto* sink = new HistorySink(db, {}, opt);  // never destroyed: the process is killed
    RunStartEvent start;
    start.run = "doomed";
    sink->emit(start);
    for (int64_t step = 1;; ++step) {
      StepEvent e;
      e.run = "doomed";
      e.step = step;
      e.loss = 1.0 / static_cast<double>(step);
      sink->emit(e);
      if (step % 500 == 0) {
        sink->flush();
        if (::write(fds[1], &step, sizeof step) != sizeof step) ::_exit(3);
      }
    }
  }
  ::close(fds[1]);
  int64_t committed = 0, got = 0;
  // Wait for some committed batches, then kill it while it keeps writing.
  while (committed < 5000 && ::read(fds[0], &got, sizeof got) == sizeof got) committed = got;
  ASSERT_GE(committed, 5000) << "the child stopped early";
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ::close(fds[0]);

  HistoryStore store(db);
  EXPECT_EQ(store.integrity_check(), "ok");
  const RunRecord r = store.run(store.resolve("doomed"));
  EXPECT_EQ(r.status, "interrupted");
  int64_t steps = 0, max_step = 0;
  store.for_each_sample(
      r.id,
      [&](const MetricSample& s) {
        ++steps;
        max_step = std::max(max_step, s.step);
        EXPECT_EQ(s.value, 1.0 / static_cast<double>(s.step));
      },
      "loss");
  EXPECT_GE(steps, committed);
  EXPECT_EQ(steps, max_step);  // no hole: steps 1..max_step
  const auto events = store.events(r.id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind, "error");
  EXPECT_NE(events.back().message.find("marked interrupted"), std::string::npos);
}

// What the studio does on its start: the interrupted rule stored without
// anything else written.
TEST(History, MarkInterruptedRunsStoresTheRuleOnceAndOnlyForDeadRecorders) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  EXPECT_EQ(mark_interrupted_runs(db), 0);  // absent: nothing made
  EXPECT_FALSE(std::filesystem::exists(db));
  HistorySink live(db);
  RunStartEvent alive;
  alive.run = "alive";
  live.emit(alive);
  live.flush();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    HistorySink sink(db);
    RunStartEvent start;
    start.run = "dead";
    sink.emit(start);
    sink.flush();
    ::_exit(0);  // its recorder gone without finishing the run
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  const std::string sql =
      "SELECT group_concat(uid || '=' || status, ',') FROM (SELECT * FROM runs ORDER BY uid)";
  EXPECT_EQ(history_test::query_text(db, sql), "alive=running,dead=running");
  EXPECT_EQ(mark_interrupted_runs(db), 1);
  EXPECT_EQ(history_test::query_text(db, sql), "alive=running,dead=interrupted");
  EXPECT_EQ(mark_interrupted_runs(db), 0);
}

TEST(History, ARunOfALiveProcessIsNotMarkedInterrupted) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  HistorySink sink(db);
  RunStartEvent start;
  start.run = "alive";
  sink.emit(start);
  sink.flush();
  HistoryStore other(db);  // opening runs the interrupted rule
  EXPECT_EQ(other.run(other.resolve("alive")).status, "running");
}

}  // namespace
}  // namespace baton
