#include "db.h"

#include <baton/core/error.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

namespace baton::history_detail {
namespace fs = std::filesystem;

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

constexpr const char* kMigrations[] = {kMigrationTo1, kMigrationTo2, kMigrationTo3, kMigrationTo4,
                                       kMigrationTo5, kMigrationTo6, kMigrationTo7};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kSchemaVersion);

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string hex32(int64_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", static_cast<unsigned>(v));
  return buf;
}

// Why this process cannot write the history at `path` (the file or, for
// its journal, its folder), or "" when it can. Checked before anything is
// trained: SQLite would open such a file read-only without a word and
// fail at the first write.
std::string unwritable_reason(const std::string& path) {
  const auto who = [](uid_t uid) {
    passwd entry{};
    passwd* pw = nullptr;
    char buf[1024];
    const bool named = ::getpwuid_r(uid, &entry, buf, sizeof buf, &pw) == 0 && pw != nullptr;
    return (named ? std::string(pw->pw_name) + " " : std::string()) + "(uid " +
           std::to_string(uid) + ")";
  };
  const fs::path parent = fs::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  std::string what, checked;
  int err = 0;
  const auto unwritable = [&err](const std::string& p, int mode) {
    // AT_EACCESS: as this process's effective user, whom the message names.
    if (::access(p.c_str(), F_OK) != 0 || ::faccessat(AT_FDCWD, p.c_str(), mode, AT_EACCESS) == 0) {
      return false;
    }
    err = errno;
    return true;
  };
  if (unwritable(path, W_OK)) {
    what = "the file";
    checked = path;
  } else if (unwritable(dir, W_OK | X_OK) &&
             // (journal files already there and writable need no new file)
             !(::faccessat(AT_FDCWD, (path + "-wal").c_str(), W_OK, AT_EACCESS) == 0 &&
               ::faccessat(AT_FDCWD, (path + "-shm").c_str(), W_OK, AT_EACCESS) == 0)) {
    what = "its folder " + dir + " (where the journal goes)";
    checked = dir;
  } else {
    return "";
  }
  if (err == EROFS) return what + " is on a read-only file system";
  std::string why = what + " is not writable by this user, " + who(::geteuid());
  struct stat st {};
  if (::stat(checked.c_str(), &st) == 0 && st.st_uid != ::geteuid()) {
    why += "; it belongs to " + who(st.st_uid);
  }
  return why;
}

// Checks an existing file without writing to it: a read-only connection,
// and before that the 16-byte SQLite header, so that a text file or an
// image is reported as such rather than as a SQLite error.
// Returns true when the file is empty (a new database may be made in it).
bool check_existing_file(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) throw InputError(path + ": cannot read (" + ec.message() + ")");
  if (size == 0) return true;
  char header[16] = {};
  {
    std::ifstream in(path, std::ios::binary);
    in.read(header, sizeof header);
    if (!in || std::memcmp(header, "SQLite format 3", 16) != 0) {
      throw InputError(path +
                       ": not a Baton history database (not an SQLite file); it was not modified");
    }
  }
  int64_t app = 0, version = 0, objects = 0;
  try {
    Db ro(path, SQLITE_OPEN_READONLY);
    // A writer's commit holds the file for milliseconds: wait, as every
    // other connection does, rather than call a busy file unreadable.
    sqlite3_busy_timeout(ro.get(), 10000);
    app = ro.scalar_int("PRAGMA application_id");
    version = ro.scalar_int("PRAGMA user_version");
    objects = ro.scalar_int("SELECT count(*) FROM sqlite_schema");
  } catch (const RuntimeError& e) {
    throw InputError(std::string(e.what()) + " (not a readable Baton history database)");
  }
  if (app == 0 && objects == 0) return true;  // an empty SQLite database
  if (app != kApplicationId) {
    throw InputError(path + ": an SQLite database, but not a Baton run history (application_id " +
                     hex32(app) + ", expected " + hex32(kApplicationId) + "); it was not modified");
  }
  if (version > kSchemaVersion) {
    throw InputError(path + ": written by a newer Baton (history schema version " +
                     std::to_string(version) + "; this build reads versions up to " +
                     std::to_string(kSchemaVersion) + "); it was not modified");
  }
  return false;
}

}  // namespace

const char* network_filesystem_name(int64_t f_type) {
  switch (static_cast<uint32_t>(f_type)) {
    case 0x6969u:
      return "NFS";
    case 0x517Bu:
      return "SMB";
    case 0xFF534D42u:
      return "CIFS";
    case 0xFE534D42u:
      return "SMB2";
    case 0x01021997u:
      return "9P";
    case 0x5346414Fu:
      return "AFS";
    case 0x73757245u:
      return "Coda";
    case 0x00C36400u:
      return "CephFS";
    case 0x0BD00BD0u:
      return "Lustre";
    case 0x47504653u:
      return "GPFS";
    case 0x65735546u:
      return "a FUSE file system (sshfs and others)";
    default:
      return nullptr;
  }
}

std::string network_filesystem_of(const std::string& path) {
  fs::path folder = fs::path(path).parent_path();
  if (folder.empty()) folder = ".";
  struct statfs st {};
  if (::statfs(folder.c_str(), &st) != 0) return "";
  const char* name = network_filesystem_name(static_cast<int64_t>(st.f_type));
  return name == nullptr ? "" : name;
}

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

namespace {

// WAL, or a rollback journal on a network file system, where WAL's shared
// memory index is not shared between hosts (SQLite: "WAL does not work over
// a network filesystem"). `where` is the file whose folder decides.
void set_journal_mode(const Db& db, const std::string& where) {
  const std::string remote = network_filesystem_of(where);
  const char* want = remote.empty() ? "wal" : "delete";
  Stmt st(db, remote.empty() ? "PRAGMA journal_mode = WAL" : "PRAGMA journal_mode = DELETE");
  if (!st.step() || st.col_text(0) != want) {
    db.fail(std::string("cannot switch to ") +
            (remote.empty() ? "WAL mode" : "a rollback journal") +
            (remote.empty() ? "" : " (the file is on " + remote + ", where WAL does not work)"));
  }
}

// A new database is made whole in a file of its own beside `path` and
// linked into place, so that no other opener (the studio's history list
// and a run's recorder start together) ever sees it half made. When
// another process or thread got there first, its database is the one
// used. Where the file system has no hard links, the database is made in
// place (a reader that comes in between is told it is not made yet).
void create_database(const std::string& path) {
  const std::string tmp = path + ".new-" + std::to_string(::getpid()) + "-" +
                          std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  std::error_code ec;
  fs::remove(tmp, ec);
  struct RemoveTmp {
    const std::string& tmp;
    ~RemoveTmp() {
      std::error_code ignored;
      fs::remove(tmp, ignored);
    }
  } remove_tmp{tmp};
  {
    Db db(tmp, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    // Large pages: the samples are written and read in long runs, and
    // every page is one write() on commit and checkpoint; 4 KiB pages made
    // the writer spend most of its time in system calls.
    db.exec("PRAGMA page_size = 32768");
    migrate(db, kSchemaVersion);
    set_journal_mode(db, path);
  }
  if (::link(tmp.c_str(), path.c_str()) == 0 || errno == EEXIST) return;
  const int err = errno;
  if (err == EPERM || err == ENOTSUP || err == EOPNOTSUPP || err == EXDEV || err == ENOSYS) {
    return;  // no hard links here: made in place by the caller
  }
  throw RuntimeError(path + ": cannot create the history database (" + std::strerror(err) + ")");
}

}  // namespace

Db open_history_db(const std::string& path, OpenMode mode) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (mode != OpenMode::kCreate) throw InputError(path + ": no such history database");
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty()) {
      fs::create_directories(parent, ec);
      if (ec) {
        throw RuntimeError(parent.string() + ": cannot create the directory (" + ec.message() +
                           ")");
      }
    }
    create_database(path);
  }
  if (fs::exists(path, ec)) {
    if (fs::is_directory(path, ec)) throw InputError(path + ": is a directory, not a database");
    // For writing, first whether it can be written at all (on a read-only
    // file system SQLite cannot even read a WAL database).
    if (mode != OpenMode::kReadOnly) {
      if (const std::string why = unwritable_reason(path); !why.empty()) {
        throw InputError(path + ": cannot record in this history database: " + why +
                         " (record elsewhere: baton train --db PATH, or --no-db)");
      }
    }
    check_existing_file(path);
  }
  if (mode == OpenMode::kReadOnly) {
    Db ro(path, SQLITE_OPEN_READONLY);
    sqlite3_busy_timeout(ro.get(), 10000);
    const int64_t version = ro.scalar_int("PRAGMA user_version");
    if (version == 0) {
      throw InputError(path +
                       ": an empty database: no history has been made in it yet (a run "
                       "recorded in it makes one)");
    }
    if (version < kOldestReadableSchema) {
      throw InputError(path + ": history schema version " + std::to_string(version) +
                       " is older than this build reads without upgrading it; it is upgraded "
                       "(after a backup copy) the next time it is written: a run recorded in "
                       "it, or `baton history tag`, `note` or `delete`");
    }
    return ro;
  }
  Db db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  // Readers and the writer of other processes wait this long for a lock
  // (the writer holds it for one batch: milliseconds).
  sqlite3_busy_timeout(db.get(), 10000);
  db.exec("PRAGMA foreign_keys = ON");
  // Statement journals and sorters in memory: on disk, every statement of
  // the writer's batches spilled its journal to a temporary file, millions
  // of write() calls for a long run.
  db.exec("PRAGMA temp_store = MEMORY");
  if (db.scalar_int("PRAGMA user_version") == 0 &&
      db.scalar_int("SELECT count(*) FROM sqlite_schema") == 0) {
    // A new database. Large pages: the samples are written and read in long
    // runs, and every page is one write() on commit and checkpoint; 4 KiB
    // pages made the writer spend most of its time in system calls.
    db.exec("PRAGMA page_size = 32768");
  }
  if (const int64_t version = db.scalar_int("PRAGMA user_version"); version < kSchemaVersion) {
    if (version > 0) back_up(db, path + ".schema-v" + std::to_string(version) + ".bak");
    migrate(db, kSchemaVersion);
  }
  set_journal_mode(db, path);
  db.exec("PRAGMA synchronous = NORMAL");
  backfill_rollups(db);
  mark_dead_runs_interrupted(db);
  finish_interrupted_deletes(db);
  return db;
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

// ------------------------------------------------- the interrupted rule alone

int mark_dead_runs_interrupted_in(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return 0;
  if (fs::is_directory(path, ec)) throw InputError(path + ": is a directory, not a database");
  // A history this user cannot write: the rule is shown by readers, not stored.
  if (!unwritable_reason(path).empty()) return 0;
  check_existing_file(path);
  Db db(path, SQLITE_OPEN_READWRITE);
  sqlite3_busy_timeout(db.get(), 10000);
  if (db.scalar_int("PRAGMA user_version") != kSchemaVersion) return 0;
  return mark_dead_runs_interrupted(db);
}

}  // namespace baton::history_detail
