// What a writer's open finishes (db.h): the interrupted rule (runs whose
// owner is gone) and deletes cut short.
#include <baton/core/error.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "db.h"

namespace baton::history_detail {

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void delete_marked_run(const Db& db, int64_t run, int64_t batch) {
  // Row values pick a batch of primary keys (the tables are WITHOUT ROWID).
  const char* tables[] = {
      "DELETE FROM metric_samples WHERE (run, metric, step, rank, seq) IN (SELECT run, metric, "
      "step, rank, seq FROM metric_samples WHERE run = ?1 LIMIT ?2)",
      "DELETE FROM metric_rollups WHERE (run, metric, rank, level, block) IN (SELECT run, metric, "
      "rank, level, block FROM metric_rollups WHERE run = ?1 LIMIT ?2)",
      "DELETE FROM link_samples WHERE (run, step, seq) IN (SELECT run, step, seq FROM "
      "link_samples WHERE run = ?1 LIMIT ?2)",
      "DELETE FROM events WHERE (run, step, seq) IN (SELECT run, step, seq FROM events WHERE run = "
      "?1 LIMIT ?2)"};
  for (const char* sql : tables) {
    Stmt st(db, sql);
    for (;;) {
      const auto t0 = std::chrono::steady_clock::now();
      Transaction tx(db);
      st.bind(1, run).bind(2, batch).run();
      const int changed = sqlite3_changes(db.get());
      st.reset();
      tx.commit();
      if (changed == 0) break;
      // A writer waiting for the lock (a recorder: its busy handler polls)
      // gets its turn: the deleter rests as long as its batch held the
      // lock. Back to back, the batches starved it for seconds (measured).
      std::this_thread::sleep_for(std::chrono::steady_clock::now() - t0);
    }
  }
  Transaction tx(db);
  Stmt st(db, "DELETE FROM runs WHERE id = ?1 AND status = 'deleting'");
  st.bind(1, run).run();
  tx.commit();
}

void finish_interrupted_deletes(const Db& db) {
  // Only deletes whose process is gone: one still deleting (its owner_*
  // columns name it) is left to it. Another host's cannot be told: left.
  const ProcessIdentity me = this_process();
  std::vector<int64_t> left;
  {
    Stmt st(db,
            "SELECT id, owner_host, owner_pid, owner_start FROM runs WHERE status = 'deleting'");
    while (st.step()) {
      const bool orphan = st.col_is_null(1) || (st.col_text(1) == me.host &&
                                                !process_alive(st.col_int(2), st.col_text(3)));
      if (orphan) left.push_back(st.col_int(0));
    }
  }
  for (int64_t id : left) delete_marked_run(db, id);
}

namespace {

struct DeadRun {
  int64_t id;
  std::string owner;  // who recorded it, in words
};

// The `running` runs whose owner on this host is gone.
std::vector<DeadRun> dead_runs(const Db& db) {
  std::vector<DeadRun> dead;
  const ProcessIdentity me = this_process();
  Stmt st(db, "SELECT id, owner_host, owner_pid, owner_start FROM runs WHERE status = 'running'");
  while (st.step()) {
    if (st.col_is_null(1)) {  // recorded before owners were kept (schema 1)
      dead.push_back({st.col_int(0), "an unknown process"});
    } else if (st.col_text(1) == me.host && !process_alive(st.col_int(2), st.col_text(3))) {
      dead.push_back(
          {st.col_int(0), "process " + std::to_string(st.col_int(2)) + " on " + st.col_text(1)});
    }
  }
  return dead;
}

}  // namespace

int mark_dead_runs_interrupted(const Db& db, const std::function<void()>& after_first_look) {
  // A first look without the write lock: almost every open finds nothing.
  if (dead_runs(db).empty()) return 0;
  if (after_first_look) after_first_look();
  // The check that counts and its updates are one write transaction: a run
  // that a new owner claimed (a resumed attempt's chief) after the first
  // look is seen with its new owner here, and left alone.
  Transaction tx(db);
  const std::vector<DeadRun> dead = dead_runs(db);
  if (dead.empty()) return 0;
  Stmt last(db, R"sql(
    SELECT max(step), max(wall_time_s), max(seq) FROM (
      SELECT step, wall_time_s, seq FROM metric_samples WHERE run = ?1
      UNION ALL SELECT step, wall_time_s, seq FROM link_samples WHERE run = ?1
      UNION ALL SELECT step, wall_time_s, seq FROM events WHERE run = ?1))sql");
  Stmt update(db,
              "UPDATE runs SET status = 'interrupted', end_time = start_time + ?2 "
              "WHERE id = ?1 AND status = 'running'");
  Stmt note(db,
            "INSERT INTO events (run, step, seq, wall_time_s, kind, level, message) "
            "VALUES (?1, ?2, ?3, ?4, 'error', 'error', ?5)");
  int marked = 0;
  for (const DeadRun& c : dead) {
    last.bind(1, c.id);
    last.step();
    const int64_t step = last.col_is_null(0) ? 0 : last.col_int(0);
    const double wall = last.col_is_null(1) ? 0.0 : last.col_double(1);
    const int64_t seq = last.col_is_null(2) ? 1 : last.col_int(2) + 1;
    last.reset();
    update.bind(1, c.id).bind(2, wall);
    update.run();
    if (sqlite3_changes(db.get()) == 0) continue;
    note.bind(1, c.id).bind(2, step).bind(3, seq).bind(4, wall);
    note.bind(5, "the recording " + c.owner +
                     " ended without finishing the run; marked interrupted when the history "
                     "was next opened");
    note.run();
    ++marked;
  }
  tx.commit();
  return marked;
}

}  // namespace baton::history_detail
