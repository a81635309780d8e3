// The history's schema as code: each version's migration, the backup
// copy made before one, and the version 2 rollups of runs recorded before
// them (db.h).
#include <baton/core/error.h>

#include <string>

#include "db.h"

namespace baton::history_detail {

// ---------------------------------------------------------------- schema

namespace {

// Migrations are code: entry i takes a database from version i to i + 1.
// A released entry is never edited; a change of layout is a new entry.
//
// Version 1: runs, the metric catalogue, metric samples, link samples and
// events. Samples are WITHOUT ROWID tables keyed so that one run's series
// of one metric is a contiguous range of the primary key, ordered by step:
// plots and downsampling read it without a sort or a second index.
constexpr const char* kMigrationTo1 = R"sql(
CREATE TABLE runs (
  id            INTEGER PRIMARY KEY,
  uid           TEXT NOT NULL UNIQUE,
  name          TEXT NOT NULL,
  status        TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
  start_time    REAL NOT NULL,
  end_time      REAL,
  strategy      TEXT NOT NULL DEFAULT '',
  replicas      INTEGER NOT NULL DEFAULT 1,
  hosts         TEXT NOT NULL DEFAULT '[]',
  config        TEXT NOT NULL DEFAULT '{}',
  topology      TEXT NOT NULL DEFAULT '{}',
  start_info    TEXT NOT NULL DEFAULT '{}',
  final_metrics TEXT NOT NULL DEFAULT '{}',
  error         TEXT NOT NULL DEFAULT ''
);
CREATE INDEX runs_by_start ON runs (start_time);
CREATE TABLE metrics (
  id   INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL CHECK (kind IN ('step', 'epoch'))
);
CREATE TABLE metric_samples (
  run         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  metric      INTEGER NOT NULL REFERENCES metrics (id),
  step        INTEGER NOT NULL,
  rank        INTEGER NOT NULL,
  seq         INTEGER NOT NULL,
  epoch       INTEGER NOT NULL,
  wall_time_s REAL NOT NULL,
  value       REAL,
  PRIMARY KEY (run, metric, step, rank, seq)
) WITHOUT ROWID;
CREATE TABLE link_samples (
  run         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step        INTEGER NOT NULL,
  seq         INTEGER NOT NULL,
  src         INTEGER NOT NULL,
  dst         INTEGER NOT NULL,
  wall_time_s REAL NOT NULL,
  num_bytes   INTEGER NOT NULL,
  seconds     REAL NOT NULL,
  estimated   INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (run, step, seq)
) WITHOUT ROWID;
CREATE TABLE events (
  run         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step        INTEGER NOT NULL,
  seq         INTEGER NOT NULL,
  wall_time_s REAL NOT NULL,
  kind        TEXT NOT NULL CHECK (kind IN ('log', 'checkpoint', 'restart', 'error')),
  level       TEXT NOT NULL DEFAULT '',
  message     TEXT NOT NULL DEFAULT '',
  data        TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY (run, step, seq)
) WITHOUT ROWID;
)sql";

// Version 2: tags (their own table, so a tag filter is an index lookup),
// notes, the recording process's identity for the interrupted rule, and
// metric rollups: per run, metric and rank, the count, min, max and last
// value of every aligned block of 2^6, 2^10, 2^14 and 2^18 steps (levels
// 1-4), so a downsampled plot of a long series reads a few thousand rows
// instead of every sample. The writer keeps them current; for the runs
// recorded under version 1 they are computed after the migration, a run a
// transaction (backfill_rollups: the runs waiting are in rollup_backfill),
// so a large file is not locked for the whole computation. (The same
// rollups as this entry once computed in its own transaction.)
constexpr const char* kMigrationTo2 = R"sql(
ALTER TABLE runs ADD COLUMN notes TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN owner_host TEXT;
ALTER TABLE runs ADD COLUMN owner_pid INTEGER;
ALTER TABLE runs ADD COLUMN owner_start TEXT;
CREATE INDEX runs_by_status ON runs (status);
CREATE TABLE tags (
  run INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  tag TEXT NOT NULL,
  PRIMARY KEY (run, tag)
) WITHOUT ROWID;
CREATE INDEX tags_by_tag ON tags (tag);
CREATE TABLE metric_rollups (
  run        INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  metric     INTEGER NOT NULL REFERENCES metrics (id),
  rank       INTEGER NOT NULL,
  level      INTEGER NOT NULL,
  block      INTEGER NOT NULL,
  first_step INTEGER NOT NULL,
  last_step  INTEGER NOT NULL,
  count      INTEGER NOT NULL,
  min        REAL,
  max        REAL,
  last       REAL,
  PRIMARY KEY (run, metric, rank, level, block)
) WITHOUT ROWID;
CREATE TABLE rollup_backfill (run INTEGER PRIMARY KEY);
INSERT INTO rollup_backfill SELECT DISTINCT run FROM metric_samples;
)sql";

// One run's rollups from its samples (the version 2 backfill).
constexpr const char* kBackfillRollups = R"sql(
INSERT INTO metric_rollups (run, metric, rank, level, block, first_step, last_step, count, min, max)
  SELECT run, metric, rank, l.level, step >> l.shift, min(step), max(step), count(*), min(value),
         max(value)
  FROM metric_samples, (SELECT 1 AS level, 6 AS shift UNION ALL SELECT 2, 10
                        UNION ALL SELECT 3, 14 UNION ALL SELECT 4, 18) AS l
  WHERE run = ?1
  GROUP BY run, metric, rank, l.level, step >> l.shift)sql";
constexpr const char* kBackfillLast = R"sql(
UPDATE metric_rollups SET last = (
  SELECT value FROM metric_samples AS s
  WHERE s.run = metric_rollups.run AND s.metric = metric_rollups.metric
    AND s.step = metric_rollups.last_step AND s.rank = metric_rollups.rank
  ORDER BY s.seq DESC LIMIT 1)
WHERE run = ?1)sql";

// Version 3: a link sample's time spent waiting for the peer (not in its
// rate); runs recorded before it waited 0 as far as anyone knows.
constexpr const char* kMigrationTo3 = R"sql(
ALTER TABLE link_samples ADD COLUMN wait_s REAL NOT NULL DEFAULT 0;
)sql";

// Version 4: run ids are never reused (AUTOINCREMENT: a note or a replay
// that says "run 9" keeps meaning that run after later deletes), and a run
// being deleted is marked 'deleting' (hidden from every query) while its
// samples go in small transactions. The runs table is rebuilt, SQLite's
// way (foreign keys off around the migration: see migrate()).
constexpr const char* kMigrationTo4 = R"sql(
CREATE TABLE runs_v4 (
  id            INTEGER PRIMARY KEY AUTOINCREMENT,
  uid           TEXT NOT NULL UNIQUE,
  name          TEXT NOT NULL,
  status        TEXT NOT NULL
                CHECK (status IN ('running', 'completed', 'failed', 'interrupted', 'deleting')),
  start_time    REAL NOT NULL,
  end_time      REAL,
  strategy      TEXT NOT NULL DEFAULT '',
  replicas      INTEGER NOT NULL DEFAULT 1,
  hosts         TEXT NOT NULL DEFAULT '[]',
  config        TEXT NOT NULL DEFAULT '{}',
  topology      TEXT NOT NULL DEFAULT '{}',
  start_info    TEXT NOT NULL DEFAULT '{}',
  final_metrics TEXT NOT NULL DEFAULT '{}',
  error         TEXT NOT NULL DEFAULT '',
  notes         TEXT NOT NULL DEFAULT '',
  owner_host    TEXT,
  owner_pid     INTEGER,
  owner_start   TEXT
);
INSERT INTO runs_v4 (id, uid, name, status, start_time, end_time, strategy, replicas, hosts,
                     config, topology, start_info, final_metrics, error, notes, owner_host,
                     owner_pid, owner_start)
  SELECT id, uid, name, status, start_time, end_time, strategy, replicas, hosts, config, topology,
         start_info, final_metrics, error, notes, owner_host, owner_pid, owner_start FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v4 RENAME TO runs;
CREATE INDEX runs_by_start ON runs (start_time);
CREATE INDEX runs_by_status ON runs (status);
)sql";

// Version 5: events of kind 'sample' (text a language model generated
// during training: message the text, data its prompt and temperature).
// The CHECK is part of the table: it is rebuilt.
constexpr const char* kMigrationTo5 = R"sql(
CREATE TABLE events_v5 (
  run         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step        INTEGER NOT NULL,
  seq         INTEGER NOT NULL,
  wall_time_s REAL NOT NULL,
  kind        TEXT NOT NULL CHECK (kind IN ('log', 'checkpoint', 'restart', 'error', 'sample')),
  level       TEXT NOT NULL DEFAULT '',
  message     TEXT NOT NULL DEFAULT '',
  data        TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY (run, step, seq)
) WITHOUT ROWID;
INSERT INTO events_v5 SELECT run, step, seq, wall_time_s, kind, level, message, data FROM events;
DROP TABLE events;
ALTER TABLE events_v5 RENAME TO events;
)sql";

// Version 6: timelines (baton train --timeline): every process's spans of
// an attempt, as the compact JSON record telemetry/chrome_trace.h
// documents, one row per attempt that recorded one.
constexpr const char* kMigrationTo6 = R"sql(
CREATE TABLE timelines (
  run     INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  attempt INTEGER NOT NULL,
  record  TEXT NOT NULL,
  PRIMARY KEY (run, attempt)
) WITHOUT ROWID;
)sql";

// Version 7: a link sample of messages under MPI's eager limit (their rate
// is a buffer copy's, latency-bound: calibrate --from-history leaves them
// out); the samples recorded before it were not told apart, 0.
constexpr const char* kMigrationTo7 = R"sql(
ALTER TABLE link_samples ADD COLUMN eager INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 8: events of kind 'device' (a GPU's state while a run trains on
// it: message the device, data its figures). The CHECK is part of the
// table: it is rebuilt, as for version 5.
constexpr const char* kMigrationTo8 = R"sql(
CREATE TABLE events_v8 (
  run         INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
  step        INTEGER NOT NULL,
  seq         INTEGER NOT NULL,
  wall_time_s REAL NOT NULL,
  kind        TEXT NOT NULL
              CHECK (kind IN ('log', 'checkpoint', 'restart', 'error', 'sample', 'device')),
  level       TEXT NOT NULL DEFAULT '',
  message     TEXT NOT NULL DEFAULT '',
  data        TEXT NOT NULL DEFAULT '{}',
  PRIMARY KEY (run, step, seq)
) WITHOUT ROWID;
INSERT INTO events_v8 SELECT run, step, seq, wall_time_s, kind, level, message, data FROM events;
DROP TABLE events;
ALTER TABLE events_v8 RENAME TO events;
)sql";

constexpr const char* kMigrations[] = {kMigrationTo1, kMigrationTo2, kMigrationTo3, kMigrationTo4,
                                       kMigrationTo5, kMigrationTo6, kMigrationTo7, kMigrationTo8};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kSchemaVersion);
}  // namespace

void back_up(const Db& db, const std::string& to) {
  Db copy(to, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  sqlite3_backup* b = sqlite3_backup_init(copy.get(), "main", db.get(), "main");
  if (b == nullptr) copy.fail("cannot start the backup before migrating " + db.path());
  const int rc = sqlite3_backup_step(b, -1);
  sqlite3_backup_finish(b);
  if (rc != SQLITE_DONE) {
    copy.fail("backup before migrating " + db.path() + " failed (" + sqlite3_errstr(rc) + ")");
  }
}

void migrate(const Db& db, int target) {
  // A table rebuild (version 4) must not cascade the old table's drop into
  // the samples: foreign keys are off for the migration (a no-op inside a
  // transaction, so before it) and checked before it commits.
  db.exec("PRAGMA foreign_keys = OFF");
  struct KeysBackOn {
    const Db& db;
    ~KeysBackOn() {
      try {
        db.exec("PRAGMA foreign_keys = ON");
      } catch (...) {  // the connection is failing already; its error is reported
      }
    }
  } keys_back_on{db};
  Transaction tx(db);
  // Read again under the write lock: another process may have migrated
  // (or created) the database since we looked.
  const int64_t version = db.scalar_int("PRAGMA user_version");
  if (version > kSchemaVersion) {
    throw InputError(db.path() + ": written by a newer Baton (history schema version " +
                     std::to_string(version) + ")");
  }
  if (version >= target) return;
  for (int64_t v = version; v < target; ++v) {
    db.exec(kMigrations[v]);
    if (v == 0) db.exec(("PRAGMA application_id = " + std::to_string(kApplicationId)).c_str());
  }
  {
    Stmt check(db, "PRAGMA foreign_key_check");
    if (check.step()) db.fail("migration left rows without their run (foreign_key_check)");
  }
  db.exec(("PRAGMA user_version = " + std::to_string(target)).c_str());
  tx.commit();
}

// ---------------------------------------------------------------- rollups

void backfill_rollups(const Db& db) {
  constexpr const char* kPending =
      "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'rollup_backfill'";
  if (db.scalar_int(kPending) == 0) return;
  for (;;) {
    // Under the write lock: another process opening the file may be
    // backfilling too, and may have finished (and dropped the list).
    Transaction tx(db);
    if (db.scalar_int(kPending) == 0) return;
    Stmt next(db, "SELECT run FROM rollup_backfill ORDER BY run LIMIT 1");
    if (!next.step()) {
      next.reset();
      db.exec("DROP TABLE rollup_backfill");
      tx.commit();
      return;
    }
    const int64_t run = next.col_int(0);
    next.reset();
    Stmt rollups(db, kBackfillRollups), last(db, kBackfillLast);
    Stmt done(db, "DELETE FROM rollup_backfill WHERE run = ?1");
    rollups.bind(1, run).run();
    last.bind(1, run).run();
    done.bind(1, run).run();
    tx.commit();
  }
}

}  // namespace baton::history_detail
