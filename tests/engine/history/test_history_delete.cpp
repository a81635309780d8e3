// Deleting runs (issue 16, items 8, 11, 12): ids are never reused, a run
// still recording is refused, a delete goes in small transactions under a
// hidden 'deleting' status and is finished by the next writer's open, and a
// writer of another run keeps writing through a delete.
#include <baton/core/error.h>
#include <baton/history/sink.h>
#include <baton/history/store.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "history_test_util.h"

namespace baton {
namespace {

using history_test::TempDir;

// AUTOINCREMENT: the largest id deleted is not handed out again (it was:
// INTEGER PRIMARY KEY takes max(id) + 1, so "run 2" came back as another run).
TEST(HistoryDelete, RunIdsAreNeverReused) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  history_test::record_run(db, "first", 10, 1, "completed");
  history_test::record_run(db, "second", 10, 1, "completed");
  int64_t second = 0;
  {
    HistoryStore store(db);
    second = store.resolve("second");
    store.remove_run(second);
  }
  history_test::record_run(db, "third", 10, 1, "completed");
  HistoryStore store(db);
  EXPECT_GT(store.resolve("third"), second) << "run " << second << " was handed out again";
  EXPECT_THROW(store.run(second), InputError);
}

TEST(HistoryDelete, ARunStillRecordingIsRefused) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  auto sink = std::make_unique<HistorySink>(db);
  RunStartEvent start;
  start.run = "live";
  sink->emit(start);
  StepEvent step;
  step.run = "live";
  step.step = 1;
  step.loss = 1.0;
  sink->emit(step);
  sink->flush();
  HistoryStore store(db);
  const int64_t id = store.resolve("live");
  try {
    store.remove_run(id);
    ADD_FAILURE() << "a recording run was deleted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is still recording"), std::string::npos) << e.what();
  }
  // The recorder goes on and finishes its run.
  step.step = 2;
  sink->emit(step);
  RunEndEvent end;
  end.run = "live";
  end.step = 2;
  end.status = "completed";
  sink->emit(end);
  sink.reset();
  EXPECT_EQ(store.run(id).status, "completed");
  EXPECT_EQ(history_test::count(db, "SELECT count(DISTINCT step) FROM metric_samples WHERE run = " +
                                        std::to_string(id)),
            2);
  store.remove_run(id);  // ended: deleted
  EXPECT_THROW(store.run(id), InputError);
}

// A delete cut short (the process killed between batches) leaves the run
// 'deleting': hidden from every query, and finished by the next open.
TEST(HistoryDelete, AnInterruptedDeleteIsHiddenAndFinishedAtTheNextOpen) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  history_test::record_run(db, "kept", 50, 1, "completed");
  history_test::record_run(db, "half-gone", 500, 1, "completed");
  history_test::exec_sql(db,
                         // The deleter (pid 1 with another start time) is gone.
                         "UPDATE runs SET status = 'deleting', owner_pid = 1, owner_start = '0/0' "
                         "WHERE uid = 'half-gone';"
                         "DELETE FROM metric_samples WHERE (run, metric, step, rank, seq) IN "
                         "(SELECT run, metric, step, rank, seq FROM metric_samples WHERE run = "
                         "(SELECT id FROM runs WHERE uid = 'half-gone') LIMIT 100)");
  HistoryStore store(db);
  EXPECT_THROW(store.resolve("half-gone"), InputError);
  ASSERT_EQ(store.list_runs().size(), 1u);
  EXPECT_EQ(store.list_runs()[0].uid, "kept");
  EXPECT_EQ(history_test::count(db, "SELECT count(*) FROM runs WHERE status = 'deleting'"), 0);
  EXPECT_EQ(history_test::count(db,
                                "SELECT count(*) FROM metric_samples WHERE run NOT IN "
                                "(SELECT id FROM runs)"),
            0);
  EXPECT_EQ(history_test::count(db,
                                "SELECT count(*) FROM link_samples WHERE run NOT IN "
                                "(SELECT id FROM runs)"),
            0);
  EXPECT_GT(history_test::count(db, "SELECT count(*) FROM metric_samples"), 0);

  // A delete whose process is alive (here: this one) is left to it, not
  // joined by every writer that opens the file.
  history_test::record_run(db, "being-deleted", 50, 1, "completed");
  history_test::exec_sql(db, "UPDATE runs SET status = 'deleting' WHERE uid = 'being-deleted';");
  { const HistoryStore writer(db); }
  EXPECT_EQ(history_test::count(db, "SELECT count(*) FROM runs WHERE status = 'deleting'"), 1);
}

// Capped link samples (what a plot of a long run reads): at most the cap
// per link, evenly spaced, the last kept; downsampled buckets carry the wall
// time of their last value (the studio's time axes collapsed to 0 without).
TEST(HistoryDelete, CappedLinksAndBucketWallTimes) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  history_test::record_run(db, "capped", 500, 1, "completed");
  const HistoryStore store(db, HistoryStore::Open::kReadOnly);
  const int64_t id = store.resolve("capped");
  ASSERT_EQ(store.links(id).size(), 500u);
  const auto capped = store.links(id, 7);
  ASSERT_GE(capped.size(), 5u);
  ASSERT_LE(capped.size(), 8u);
  EXPECT_EQ(capped.back().step, 500);
  for (size_t i = 1; i < capped.size(); ++i) EXPECT_GT(capped[i].step, capped[i - 1].step);
  const auto buckets = store.downsample(id, "loss", 1, 500, 10);
  ASSERT_GE(buckets.size(), 5u);
  double last = 0;
  for (const SeriesBucket& b : buckets) {
    EXPECT_GT(b.last_wall_time_s, last) << "bucket ending at step " << b.last_step;
    last = b.last_wall_time_s;
  }
}

// A long run is deleted while another run is being recorded: the writer
// never meets "database is locked" and its run is whole.
TEST(HistoryDelete, AWriterKeepsWritingThroughADelete) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  history_test::record_run(db, "long", 40000, 1, "completed");
  HistoryStore store(db);
  const int64_t long_id = store.resolve("long");
  std::thread remover([&] { store.remove_run(long_id); });
  const auto rec = history_test::record_run(db, "meanwhile", 3000, 1, "completed");
  remover.join();
  const int64_t id = store.resolve("meanwhile");
  EXPECT_EQ(store.run(id).status, "completed");
  int64_t losses = 0;
  for (const MetricSummary& s : store.metric_summary(id)) {
    if (s.metric == "loss") losses = s.count;
  }
  EXPECT_EQ(losses, static_cast<int64_t>(rec.losses.size()));
  EXPECT_THROW(store.run(long_id), InputError);
  EXPECT_EQ(history_test::count(
                db, "SELECT count(*) FROM metric_samples WHERE run = " + std::to_string(long_id)),
            0);
}

// Another writer holds the database past the busy timeout (a long delete,
// a migration): the recorder waits and tries again, and keeps its run (it
// used to fail with "database is locked" and lose everything after).
TEST(HistoryDelete, ARecorderWaitsOutABusyDatabase) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  HistorySinkOptions opt;
  opt.busy_timeout_ms = 20;  // SQLite gives up fast; the sink must not
  opt.busy_patience_ms = 60000;
  HistorySink sink(db, {}, opt);
  RunStartEvent start;
  start.run = "patient";
  sink.emit(start);
  sink.flush();
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  for (int64_t s = 1; s <= 50; ++s) {
    StepEvent e;
    e.run = "patient";
    e.step = s;
    e.loss = 1.0 / static_cast<double>(s);
    sink.emit(e);
  }
  std::thread flusher([&] { EXPECT_NO_THROW(sink.flush()); });
  // The other writer keeps the lock well past the sink's busy timeout.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(sink.lost_events(), 0);
  ASSERT_EQ(sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
  flusher.join();
  RunEndEvent end;
  end.run = "patient";
  end.step = 50;
  end.status = "completed";
  sink.emit(end);
  EXPECT_NO_THROW(sink.close());
  EXPECT_EQ(sink.lost_events(), 0);
  const HistoryStore store(db, HistoryStore::Open::kReadOnly);
  const int64_t id = store.resolve("patient");
  EXPECT_EQ(store.run(id).status, "completed");
  EXPECT_EQ(history_test::count(db, "SELECT count(DISTINCT step) FROM metric_samples WHERE run = " +
                                        std::to_string(id)),
            50);

  // Without the patience (one try, as before) the same lock loses the run.
  HistorySinkOptions hasty = opt;
  hasty.busy_patience_ms = 0;
  HistorySink quick(db, {}, hasty);
  ASSERT_EQ(sqlite3_open(db.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  RunStartEvent again;
  again.run = "hasty";
  quick.emit(again);
  EXPECT_THROW(quick.flush(), RuntimeError);
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
}

}  // namespace
}  // namespace baton
