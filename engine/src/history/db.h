// Private to the engine: a thin RAII layer over the sqlite3 C API, the
// schema and its migrations, and the checks made when a history database is
// opened. Public entry points are in baton/history*.h.
#pragma once

#include <baton/core/process_identity.h>

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace baton::history_detail {

// 'BATN': marks a file as a Baton run history (PRAGMA application_id).
inline constexpr int32_t kApplicationId = 0x4241544e;
// The schema this build writes; older files are migrated, newer refused.
inline constexpr int kSchemaVersion = 8;

// One connection. Throws RuntimeError naming the file on any failure.
class Db {
 public:
  Db() = default;
  Db(const std::string& path, int flags);
  ~Db();
  Db(Db&& o) noexcept : db_(o.db_), path_(std::move(o.path_)) { o.db_ = nullptr; }
  Db& operator=(Db&& o) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }
  // Runs one or more statements that return no rows.
  void exec(const char* sql) const;
  // The single integer a query like "PRAGMA user_version" returns.
  int64_t scalar_int(const char* sql) const;
  [[noreturn]] void fail(const std::string& what) const;

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

// A prepared statement. bind_* take 1-based indexes, col_* 0-based.
class Stmt {
 public:
  Stmt() = default;
  Stmt(const Db& db, std::string_view sql);
  ~Stmt();
  Stmt(Stmt&& o) noexcept : st_(o.st_), db_(o.db_) { o.st_ = nullptr; }
  Stmt& operator=(Stmt&& o) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, int64_t v);
  Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  // NaN has no SQLite representation: it is stored as NULL.
  Stmt& bind(int i, double v);
  Stmt& bind(int i, std::string_view v);
  Stmt& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  Stmt& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  Stmt& bind_null(int i);
  // true while there is a row; false when done. Throws on error.
  bool step();
  // Runs a statement that returns no rows, then resets it for reuse.
  void run();
  void reset();

  int64_t col_int(int i) const { return sqlite3_column_int64(st_, i); }
  // NULL reads back as NaN (see bind(double)).
  double col_double(int i) const;
  std::string col_text(int i) const;
  bool col_is_null(int i) const { return sqlite3_column_type(st_, i) == SQLITE_NULL; }

 private:
  Stmt& checked_bind(int rc, int i);  // RuntimeError when a bind failed
  sqlite3_stmt* st_ = nullptr;
  const Db* db_ = nullptr;
};

// RAII transaction: BEGIN IMMEDIATE (the write lock taken up front, so two
// writers wait on the busy timeout instead of deadlocking on an upgrade);
// rolls back unless commit() was called.
class Transaction {
 public:
  explicit Transaction(const Db& db);
  // BEGIN IMMEDIATE tried again while the database is busy (another
  // writer holds it past the busy timeout), for up to `patience_ms`.
  Transaction(const Db& db, int patience_ms);
  ~Transaction();
  void commit();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

 private:
  const Db& db_;
  bool open_ = false;
};

enum class OpenMode : int { kUnset = 0, kCreate = 1, kExisting = 2, kReadOnly = 3 };

// The oldest schema a read-only connection reads (version 2 lacks only a
// link sample's wait_s, read as 0).
inline constexpr int kOldestReadableSchema = 2;

// kReadOnly: a read-only connection to an existing file, checked as below
// and then never written: no WAL switch, no migration (a schema older than
// kOldestReadableSchema is an InputError saying how it gets upgraded), no
// interrupted rule (readers show a dead recorder's run as interrupted
// without storing it). Otherwise, opens the history database at `path` for
// reading and writing:
//  - refuses (InputError, the file untouched) a file that is not SQLite, a
//    SQLite database of another application, or one from a newer Baton;
//  - creates it (and its directory) when absent and mode is kCreate;
//  - sets WAL, synchronous=NORMAL, the busy timeout and foreign keys;
//  - migrates an older schema to kSchemaVersion in one transaction, after a
//    backup copy of the file beside it (PATH.schema-vN.bak, SQLite's
//    online backup);
//  - marks runs whose recording process died as interrupted.
Db open_history_db(const std::string& path, OpenMode mode);

// A network file system's name for a statfs f_type (NFS, SMB/CIFS, 9P,
// AFS, CephFS, Lustre, GPFS, FUSE), or nullptr; and the one `path`'s folder
// is on ("" for a local one). A writer uses a rollback journal there: WAL
// needs shared memory between all the processes that use the file.
const char* network_filesystem_name(int64_t f_type);
std::string network_filesystem_of(const std::string& path);

// Copies the whole database to the file `to` (SQLite's online backup).
void back_up(const Db& db, const std::string& to);

// Applies the migrations from the database's user_version up to `target`.
void migrate(const Db& db, int target);

// The interrupted rule (see history.h): returns how many runs were marked.
// `after_first_look` (tests) runs between the first look, made without a
// lock, and the check that counts, made in a write transaction.
int mark_dead_runs_interrupted(const Db& db, const std::function<void()>& after_first_look = {});
// mark_dead_runs_interrupted() on the file at `path` when it exists and has
// this build's schema (nothing is migrated); 0 otherwise.
int mark_dead_runs_interrupted_in(const std::string& path);

// Deletes a run marked 'deleting': its samples and events in transactions of
// at most `batch` rows (a concurrent writer waits milliseconds, not the
// whole delete), then the run. Resumable: an interrupted delete leaves the
// run 'deleting' (hidden), and the next open of the file for writing ends it.
void delete_marked_run(const Db& db, int64_t run, int64_t batch = 20000);
void finish_interrupted_deletes(const Db& db);

// The version 2 migration's rollups of runs recorded before them, a run a
// transaction; resumable (rollup_backfill lists the runs left).
void backfill_rollups(const Db& db);

// The runs.owner_* columns hold a ProcessIdentity (baton/core/process_identity.h).

double unix_now();

// Rollup levels 1..kRollupLevels: blocks of 1 << kRollupShift[level - 1]
// steps (must match migration 2).
inline constexpr int kRollupLevels = 4;
inline constexpr int kRollupShift[kRollupLevels] = {6, 10, 14, 18};

// Metric catalogue: the names a step or epoch event is stored under.
inline constexpr const char* kStepMetrics[] = {
    "loss",    "accuracy",   "lr",      "grad_norm",    "samples_per_s",     "step_time_ms",
    "data_ms", "compute_ms", "comm_ms", "optimizer_ms", "rank_samples_per_s", "mfu"};
// The step metrics a step stores only when known (> 0): MFU (GPUs).
inline constexpr int kStepMetricMfu = 11;
inline constexpr int kNumStepMetrics = static_cast<int>(std::size(kStepMetrics));
inline constexpr int kNumEpochMetrics = 6;
inline constexpr const char* kEpochMetrics[] = {
    "train_loss",   "train_accuracy",      "val_loss",
    "val_accuracy", "epoch_samples_per_s", "epoch_time_s"};

}  // namespace baton::history_detail
