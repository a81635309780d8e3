// The run history: every run recorded in one SQLite database, read back for
// listing, comparing, exporting, plotting and replay.
//
// File: $XDG_DATA_HOME/baton/runs.db (default ~/.local/share/baton/runs.db),
// marked as Baton's by PRAGMA application_id 0x4241544e ('BATN'); the schema
// version is PRAGMA user_version (see README "Run history" for the tables).
// WAL mode, synchronous=NORMAL, a 10 s busy timeout, foreign keys on.
//
// Opening (HistoryStore, HistorySink, HistoryReplay all do it):
//  - a file that is not SQLite, a SQLite database of another application,
//    or one written by a newer Baton is refused with InputError and left
//    exactly as it was;
//  - for writing, an older schema is migrated (code, in one transaction,
//    after a backup copy of the file: PATH.schema-vN.bak);
//  - the interrupted rule: a run still marked `running` whose recording
//    process is gone is marked `interrupted`. A run row names its recorder
//    (host, pid, boot id + process start time); the process is gone when it
//    ran on this host and /proc shows no such pid, a zombie, or a pid with
//    another start time or boot id (a reused pid). Runs recorded on another
//    host are left alone: this host cannot see their process. Everything
//    committed before the death is kept.
//
// Thread rules: a HistoryStore is one connection, for one thread at a time;
// open one per thread. Any number of readers and one writer per run work
// at once (WAL), in one process or several.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace baton {

// $XDG_DATA_HOME/baton/runs.db, or $HOME/.local/share/baton/runs.db.
std::string default_history_db_path();

// The interrupted rule alone, stored: the runs still `running` whose
// recording process on this host is gone are marked `interrupted` (what a
// program that only reads - the studio on its start - applies once).
// Nothing is done to a file that is absent, that this user cannot write,
// or that has an older schema (that waits for a write that migrates it). Returns how many runs it marked;
// InputError / RuntimeError as opening for writing would.
int mark_interrupted_runs(const std::string& path);

// One row of `runs`. Times are Unix seconds; end_time is 0 while running.
struct RunRecord {
  int64_t id = 0;      // the row id: short, what the CLI prints
  std::string uid;     // the telemetry run id, e.g. digits-mlp-20261130-030102-3f1a
  std::string name;    // the config's name
  std::string status;  // running | completed | failed | interrupted
  double start_time = 0, end_time = 0;
  std::string strategy;
  int replicas = 1;
  std::vector<std::string> hosts;
  std::vector<std::string> tags;
  std::string notes;
  std::string error;
  nlohmann::json config;         // the run config as run (only by HistoryStore::run)
  nlohmann::json topology;       // world size, communication, cluster (only by run)
  nlohmann::json start_info;     // the run_start event's other fields (only by run)
  nlohmann::json final_metrics;  // the run_end event's figures
};

// history list --filter: every field set must match.
struct RunFilter {
  std::string status;    // running | completed | failed | interrupted
  std::string strategy;  // one_device, mirrored, ...
  std::string tag;
  int64_t limit = 0;  // 0: all; newest first
  // Adds "key=value" (key: status, strategy or tag). InputError otherwise.
  void add(const std::string& key_value);
};

// Per metric and rank: how many samples, the last (greatest step) value,
// the minimum and the maximum. NaN values are not counted in min/max.
struct MetricSummary {
  std::string metric;
  int rank = 0;
  int64_t count = 0;
  int64_t last_step = 0;
  double last = 0, min = 0, max = 0;
};

// One recorded metric sample (export, tests). value NaN is stored as NULL.
struct MetricSample {
  int64_t step = 0;
  double wall_time_s = 0;  // seconds since the run first started
  int rank = 0;
  std::string metric;
  double value = 0;
};

// One recorded link sample and one recorded event (log, checkpoint,
// restart, error).
struct LinkRecord {
  int64_t step = 0;
  double wall_time_s = 0;
  int src = 0, dst = 0;
  int64_t num_bytes = 0;
  double seconds = 0;  // transfer time
  bool estimated = false;
  double wait_s = 0;   // time waiting for the peer
  bool eager = false;  // under MPI's eager limit: latency-bound, not bandwidth
};
struct RunEventRecord {
  int64_t step = 0;
  int64_t seq = 0;
  double wall_time_s = 0;
  std::string kind;  // log | checkpoint | restart | error
  std::string level, message;
  nlohmann::json data;
};

// One bucket of a downsampled series: the min, the max and the last value
// (at the greatest step) of the samples whose step falls in it.
struct SeriesBucket {
  int64_t first_step = 0, last_step = 0;
  int64_t count = 0;
  double min = 0, max = 0, last = 0;
  double last_wall_time_s = 0;  // the wall time of the last value
};

class HistoryStore {
 public:
  enum class Open : int { kUnset = 0, kCreate = 1, kExisting = 2, kReadOnly = 3 };
  // kCreate makes the file (and its directory) when absent; kExisting
  // throws InputError then. kReadOnly: an existing file, never written (no
  // migration, no interrupted rule: a run whose recorder is gone reads as
  // interrupted without being stored so; the writing calls fail). See the
  // top of this file for what opening does.
  explicit HistoryStore(const std::string& path, Open mode = Open::kCreate);
  ~HistoryStore();
  HistoryStore(HistoryStore&&) noexcept;
  HistoryStore& operator=(HistoryStore&&) noexcept;

  const std::string& path() const;
  int schema_version() const;

  // Newest first.
  std::vector<RunRecord> list_runs(const RunFilter& filter = {}) const;
  // "42" (the row id), the full uid, or a prefix of exactly one uid.
  // InputError naming the database when there is no such run.
  int64_t resolve(const std::string& id) const;
  RunRecord run(int64_t id) const;

  std::vector<MetricSummary> metric_summary(int64_t run) const;
  // Every sample of the run ordered by step, rank, then record order;
  // `metric` empty = all metrics.
  void for_each_sample(int64_t run, const std::function<void(const MetricSample&)>& fn,
                       const std::string& metric = "") const;
  // The series of `metric` on `rank` over steps [from_step, to_step]
  // (inclusive) in buckets of equal step width, computed in SQL, exact (no
  // spike is lost: min and max are over every sample). The width is the
  // smallest multiple of a stored rollup block (64, 1024, 16384 or 262144
  // steps; at most a quarter of the wanted width) that is at least
  // (to - from + 1) / buckets, and bucket edges are aligned to those
  // blocks, so there are at most buckets + 1; whole blocks are read from
  // metric_rollups and only the partial blocks at the two ends from the
  // samples. A short range reads the samples, bucket = (step - from) /
  // width. Empty buckets are left out. to_step < from_step: the whole
  // series. InputError when buckets < 1.
  std::vector<SeriesBucket> downsample(int64_t run, const std::string& metric, int64_t from_step,
                                       int64_t to_step, int buckets, int rank = 0) const;
  // Names of the metrics recorded for a run (catalogue order).
  std::vector<std::string> metrics_of(int64_t run) const;
  // Every link sample of the run in step order; max_per_link > 0: at most
  // that many per (src, dst), evenly spaced, the last one always kept.
  std::vector<LinkRecord> links(int64_t run, int64_t max_per_link = 0) const;
  std::vector<RunEventRecord> events(int64_t run) const;
  // The timelines the run recorded (baton train --timeline), one per
  // attempt that recorded one, in order: the compact JSON records of
  // telemetry/chrome_trace.h.
  std::vector<nlohmann::json> timelines(int64_t run) const;

  void add_tag(int64_t run, const std::string& tag);
  void set_note(int64_t run, const std::string& text);
  // A supervisor's record of an attempt's end (`baton launch`): an event
  // at `level`: "error" (kind error: a failed attempt) or "info" (kind
  // log: an elastic rescale) at `step` with `message` and `data` (JSON) on the run
  // with uid `uid`; with `final`, the run also ends "failed" with message
  // as its error. False when no run has that uid (its chief never started it).
  bool record_launcher_event(const std::string& uid, int64_t step, const std::string& level,
                             const std::string& message, const std::string& data, bool final);
  // Deletes the run and everything recorded for it, in small transactions
  // (the run is hidden at once; a writer of another run waits milliseconds).
  // A run still recording is refused (InputError naming its process).
  void remove_run(int64_t run);

  // Runs `PRAGMA integrity_check`; "ok" when the file is sound.
  std::string integrity_check() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Runs `history diff`: both configs flattened to key paths (objects are
// walked, arrays compared whole), then every added, removed or changed key.
struct ConfigChange {
  enum class Kind : int { kUnset = 0, kAdded = 1, kRemoved = 2, kChanged = 3 };
  Kind kind = Kind::kUnset;
  std::string key;  // "optimizer.lr"
  nlohmann::json before, after;
};
std::vector<ConfigChange> diff_configs(const nlohmann::json& a, const nlohmann::json& b);

// A run row as JSON (what `history list --json` and the export print):
// id, uid, name, status, times, strategy, replicas, hosts, tags, notes,
// error, final_metrics; with `full`, also config, topology and start_info.
nlohmann::json run_to_json(const RunRecord& r, bool full);

// Export formats (README "Run history"):
//  csv:  a header `step,wall_time_s,rank,metric,value`, one sample a line,
//        ordered by step, rank, record order; values in full precision
//        (%.17g; NaN as "nan").
//  json: one object {"run": {...row...}, "metrics": [...], "links": [...],
//        "events": [...]}.
void export_run_csv(const HistoryStore& store, int64_t run, std::FILE* out);
void export_run_json(const HistoryStore& store, int64_t run, std::FILE* out);

}  // namespace baton
