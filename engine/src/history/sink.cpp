#include <baton/core/error.h>
#include <baton/core/json_text.h>
#include <baton/history/sink.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <variant>

#include "db.h"

namespace baton {
using namespace history_detail;

namespace {

using Clock = std::chrono::steady_clock;

// A step event without its run id: copying it allocates nothing, which
// matters because it is copied on the training thread every logged step.
struct StepBody {
  int64_t step, epoch;
  int rank;
  double wall_time_s;
  double values[kNumStepMetrics];  // in kStepMetrics order
};
struct LinkBody {
  int64_t step;
  int src, dst;
  int64_t num_bytes;
  double seconds;
  bool estimated;
  double wait_s;
  bool eager;
};

struct Queued {
  double t_s = 0;     // seconds since this sink saw the run's run_start
  double unix_s = 0;  // run_start only: when it was emitted
  std::variant<StepBody, LinkBody, Event> body;
};

StepBody step_body(const StepEvent& e) {
  return {e.step,
          e.epoch,
          e.rank,
          e.wall_time_s,
          {e.loss, e.accuracy, e.lr, e.grad_norm, e.samples_per_s, e.step_time_ms, e.data_ms,
           e.compute_ms, e.comm_ms, e.optimizer_ms, e.rank_samples_per_s, e.mfu}};
}

nlohmann::json json_array(const std::vector<std::string>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& s : v) a.push_back(s);
  return a;
}

// The rollup of one block of one (metric, rank, level) series, kept in
// memory while samples arrive and written at each commit.
struct Rollup {
  bool valid = false, dirty = false;
  int64_t block = 0, first_step = 0, last_step = 0, count = 0;
  double min = std::numeric_limits<double>::quiet_NaN();
  double max = std::numeric_limits<double>::quiet_NaN();
  double last = 0;
};

}  // namespace

// ------------------------------------------------------------ the writer

// Everything the writer thread owns. Only that thread touches it after
// the constructor.
class HistoryWriter {
 public:
  HistoryWriter(Db db, HistoryRunInfo info, int busy_timeout_ms, int busy_patience_ms,
                ProcessIdentity owner)
      : db_(std::move(db)), info_(std::move(info)), busy_patience_ms_(busy_patience_ms) {
    sqlite3_busy_timeout(db_.get(), busy_timeout_ms);
    if (info_.hosts.empty()) info_.hosts.push_back(this_process().host);
    me_ = std::move(owner);
    {
      Transaction tx(db_);
      Stmt add(db_, "INSERT OR IGNORE INTO metrics (name, kind) VALUES (?1, ?2)");
      for (const char* m : kStepMetrics) add.bind(1, m).bind(2, "step").run();
      for (const char* m : kEpochMetrics) add.bind(1, m).bind(2, "epoch").run();
      tx.commit();
    }
    Stmt id(db_, "SELECT id FROM metrics WHERE name = ?1");
    auto lookup = [&](const char* name) {
      id.bind(1, name);
      id.step();
      const int64_t v = id.col_int(0);
      id.reset();
      return v;
    };
    for (int i = 0; i < kNumStepMetrics; ++i) step_metric_[i] = lookup(kStepMetrics[i]);
    for (size_t i = 0; i < 6; ++i) epoch_metric_[i] = lookup(kEpochMetrics[i]);
    // The writer touches the growing end of every series at once: keep
    // those pages cached (64 MiB at most).
    db_.exec("PRAGMA cache_size = -65536");
    ins_sample_ = Stmt(db_,
                       "INSERT INTO metric_samples (run, metric, step, rank, seq, epoch, "
                       "wall_time_s, value) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    ins_link_ =
        Stmt(db_,
             "INSERT INTO link_samples (run, step, seq, src, dst, wall_time_s, num_bytes, "
             "seconds, estimated, wait_s, eager) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
             "?10, ?11)");
    ins_event_ = Stmt(db_,
                      "INSERT INTO events (run, step, seq, wall_time_s, kind, level, message, "
                      "data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)");
    put_rollup_ = Stmt(db_,
                       "INSERT OR REPLACE INTO metric_rollups (run, metric, rank, level, block, "
                       "first_step, last_step, count, min, max, last) VALUES "
                       "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
    get_rollup_ =
        Stmt(db_,
             "SELECT first_step, last_step, count, min, max, last FROM metric_rollups "
             "WHERE run = ?1 AND metric = ?2 AND rank = ?3 AND level = ?4 AND block = ?5");
  }

  int64_t run_row() const { return run_; }

  // One transaction for the whole batch; a database another writer holds
  // is waited for (the batch is only begun once the lock is ours).
  void write(const std::vector<Queued>& batch) {
    Transaction tx(db_, busy_patience_ms_);
    for (const Queued& q : batch) {
      if (const auto* s = std::get_if<StepBody>(&q.body)) {
        on_step(*s);
      } else if (const auto* l = std::get_if<LinkBody>(&q.body)) {
        on_link(*l, q.t_s);
      } else {
        on_event(std::get<Event>(q.body), q);
      }
    }
    for (auto& [key, r] : rollups_) {
      if (r.dirty) put_rollup(key, r);
    }
    tx.commit();
  }

 private:
  void on_event(const Event& ev, const Queued& q) {
    if (const auto* e = std::get_if<RunStartEvent>(&ev)) return on_run_start(*e, q.unix_s);
    if (run_ == 0) return;
    const double wall = q.t_s + wall_offset_;
    if (const auto* e = std::get_if<EpochEvent>(&ev)) {
      const int64_t seq = next_seq_++;
      const double v[6] = {e->train_loss,   e->train_accuracy, e->val_loss,
                           e->val_accuracy, e->samples_per_s,  e->epoch_time_s};
      for (int i = 0; i < 6; ++i) {
        if (!e->has_validation && (i == 2 || i == 3)) continue;
        sample(epoch_metric_[i], e->step, 0, seq, e->epoch, wall, v[i]);
      }
      last_step_ = std::max(last_step_, e->step);
    } else if (const auto* e = std::get_if<LogEvent>(&ev)) {
      event(last_step_, wall, "log", log_level_name(e->level), e->message, "{}");
    } else if (const auto* e = std::get_if<CheckpointEvent>(&ev)) {
      event(e->step, wall, "checkpoint", "", e->path,
            json_text({{"num_bytes", e->num_bytes}, {"write_ms", e->write_ms}}));
    } else if (const auto* e = std::get_if<SampleEvent>(&ev)) {
      event(e->step, wall, "sample", "", e->text,
            json_text({{"prompt", e->prompt}, {"temperature", e->temperature}}));
    } else if (const auto* e = std::get_if<DeviceEvent>(&ev)) {
      nlohmann::json data = to_json(Event(*e));
      for (const char* k : {"v", "type", "run", "time", "step", "device"}) data.erase(k);
      event(e->step, wall, "device", "", e->device, json_text(data));
    } else if (const auto* e = std::get_if<TimelineEvent>(&ev)) {
      Stmt ins(db_,
               "INSERT INTO timelines (run, attempt, record) VALUES (?1, (SELECT "
               "coalesce(max(attempt), 0) + 1 FROM timelines WHERE run = ?1), ?2)");
      ins.bind(1, run_).bind(2, json_text(e->trace)).run();
    } else if (const auto* e = std::get_if<RunEndEvent>(&ev)) {
      on_run_end(*e);
    }
  }

  void on_run_start(const RunStartEvent& e, double unix_s) {
    nlohmann::json info = to_json(Event(e));
    for (const char* k : {"v", "type", "run", "time", "config"}) info.erase(k);
    Stmt find(db_, "SELECT id, start_time FROM runs WHERE uid = ?1");
    find.bind(1, e.run);
    rollups_.clear();
    if (find.step()) {
      // A resumed run: the same row, running again; its clock continues.
      run_ = find.col_int(0);
      wall_offset_ = std::max(0.0, unix_s - find.col_double(1));
      fresh_ = false;
      // The row keeps the first attempt's start_info (with its config, for
      // replay) and takes the newest config; the restart event keeps this
      // attempt's.
      Stmt upd(db_, R"sql(
        UPDATE runs SET status = 'running', end_time = NULL, error = '',
          start_info = CASE WHEN json_type(start_info, '$.config') IS NULL
                            THEN json_set(start_info, '$.config', json(config))
                            ELSE start_info END,
          config = ?2, owner_host = ?3, owner_pid = ?4, owner_start = ?5
        WHERE id = ?1)sql");
      upd.bind(1, run_).bind(2, json_text(e.config));
      upd.bind(3, me_.host).bind(4, me_.pid).bind(5, me_.start).run();
      Stmt seq(db_, R"sql(
        SELECT max(seq), max(step) FROM (
          SELECT seq, step FROM metric_samples WHERE run = ?1
          UNION ALL SELECT seq, step FROM link_samples WHERE run = ?1
          UNION ALL SELECT seq, step FROM events WHERE run = ?1))sql");
      seq.bind(1, run_);
      seq.step();
      next_seq_ = seq.col_is_null(0) ? 1 : seq.col_int(0) + 1;
      last_step_ = e.start_step;
      nlohmann::json data = info;
      data["offset_s"] = wall_offset_;
      data["config"] = e.config;
      event(e.start_step, wall_offset_, "restart", "info",
            "resumed from step " + std::to_string(e.start_step), json_text(data));
    } else {
      Stmt ins(db_,
               "INSERT INTO runs (uid, name, status, start_time, strategy, replicas, hosts, "
               "config, topology, start_info, owner_host, owner_pid, owner_start) VALUES "
               "(?1, ?2, 'running', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
      ins.bind(1, e.run).bind(2, e.name).bind(3, unix_s).bind(4, e.strategy).bind(5, e.replicas);
      ins.bind(6, json_text(json_array(info_.hosts))).bind(7, json_text(e.config));
      ins.bind(8, json_text(info_.topology)).bind(9, json_text(info));
      ins.bind(10, me_.host).bind(11, me_.pid).bind(12, me_.start).run();
      run_ = sqlite3_last_insert_rowid(db_.get());
      wall_offset_ = 0;
      fresh_ = true;
      next_seq_ = 1;
      last_step_ = e.start_step;
    }
    Stmt tag(db_, "INSERT OR IGNORE INTO tags (run, tag) VALUES (?1, ?2)");
    for (const auto& t : info_.tags) tag.bind(1, run_).bind(2, t).run();
  }

  void on_run_end(const RunEndEvent& e) {
    nlohmann::json m = {{"step", e.step},
                        {"wall_time_s", e.wall_time_s},
                        {"train_loss", e.train_loss},
                        {"samples_per_s", e.samples_per_s}};
    if (e.has_validation) {
      m["val_loss"] = e.val_loss;
      m["val_accuracy"] = e.val_accuracy;
    }
    if (e.tokens_per_s > 0) m["tokens_per_s"] = e.tokens_per_s;
    if (e.model_flops_per_s > 0) m["model_flops_per_s"] = e.model_flops_per_s;
    if (e.mfu > 0) m["mfu"] = e.mfu;
    // Planned (modelled) and measured (peak resident set), this process's.
    if (e.memory_planned_bytes > 0) m["memory_planned_bytes"] = e.memory_planned_bytes;
    if (e.memory_peak_bytes > 0) m["memory_peak_bytes"] = e.memory_peak_bytes;
    const std::string status =
        e.status == "completed" || e.status == "interrupted" ? e.status : "failed";
    Stmt upd(db_,
             "UPDATE runs SET status = ?2, end_time = ?3, final_metrics = ?4, error = ?5 "
             "WHERE id = ?1");
    upd.bind(1, run_)
        .bind(2, status)
        .bind(3, unix_now())
        .bind(4, json_text(m))
        .bind(5, e.error)
        .run();
    if (!e.error.empty()) {
      event(e.step, e.wall_time_s + wall_offset_, "error", "error", e.error, "{}");
    }
  }

  void on_step(const StepBody& s) {
    if (run_ == 0) return;
    const int64_t seq = next_seq_++;
    const double wall = s.wall_time_s + wall_offset_;
    // One single-row INSERT per sample: a multi-row INSERT needs a
    // statement journal and measured slower.
    for (int i = 0; i < kNumStepMetrics; ++i) {
      if (i == kStepMetricMfu && !(s.values[i] > 0)) continue;  // not known: not stored
      sample(step_metric_[i], s.step, s.rank, seq, s.epoch, wall, s.values[i]);
    }
    last_step_ = std::max(last_step_, s.step);
  }

  void on_link(const LinkBody& l, double t_s) {
    if (run_ == 0) return;
    ins_link_.bind(1, run_).bind(2, l.step).bind(3, next_seq_++).bind(4, l.src).bind(5, l.dst);
    ins_link_.bind(6, t_s + wall_offset_).bind(7, l.num_bytes).bind(8, l.seconds);
    ins_link_.bind(9, static_cast<int64_t>(l.estimated)).bind(10, l.wait_s);
    ins_link_.bind(11, static_cast<int64_t>(l.eager)).run();
  }

  void event(int64_t step, double wall, const char* kind, const std::string& level,
             const std::string& message, const std::string& data) {
    ins_event_.bind(1, run_).bind(2, step).bind(3, next_seq_++).bind(4, wall).bind(5, kind);
    ins_event_.bind(6, level).bind(7, message).bind(8, data).run();
  }

  void sample(int64_t metric, int64_t step, int rank, int64_t seq, int64_t epoch, double wall,
              double value) {
    ins_sample_.bind(1, run_).bind(2, metric).bind(3, step).bind(4, rank).bind(5, seq);
    ins_sample_.bind(6, epoch).bind(7, wall).bind(8, value).run();
    roll(metric, step, rank, value);
  }

  // Adds a sample to the rollups of its blocks at every level.
  void roll(int64_t metric, int64_t step, int rank, double value) {
    for (int level = 1; level <= kRollupLevels; ++level) {
      const uint64_t key = (static_cast<uint64_t>(metric) << 40) |
                           (static_cast<uint64_t>(static_cast<uint32_t>(rank)) << 8) |
                           static_cast<uint64_t>(level);
      Rollup& r = rollups_[key];
      const int64_t block = step >> kRollupShift[level - 1];
      if (!r.valid || r.block != block) {
        if (r.valid && r.dirty) put_rollup(key, r);
        // A fresh run's steps only grow: a later block has no row yet.
        const bool maybe_stored = !fresh_ || (r.valid && block < r.block);
        r = Rollup{};
        r.valid = true;
        r.block = block;
        if (maybe_stored) get_rollup(key, &r);
      }
      if (r.count == 0 || step < r.first_step) r.first_step = step;
      // Samples arrive in record order: at an equal step the newer wins.
      if (r.count == 0 || step >= r.last_step) {
        r.last_step = step;
        r.last = value;
      }
      ++r.count;
      if (!std::isnan(value)) {
        r.min = std::isnan(r.min) ? value : std::min(r.min, value);
        r.max = std::isnan(r.max) ? value : std::max(r.max, value);
      }
      r.dirty = true;
    }
  }

  static void split(uint64_t key, int64_t* metric, int* rank, int* level) {
    *metric = static_cast<int64_t>(key >> 40);
    *rank = static_cast<int>(static_cast<int32_t>((key >> 8) & 0xffffffffu));
    *level = static_cast<int>(key & 0xff);
  }

  void put_rollup(uint64_t key, Rollup& r) {
    int64_t metric;
    int rank, level;
    split(key, &metric, &rank, &level);
    put_rollup_.bind(1, run_).bind(2, metric).bind(3, rank).bind(4, level).bind(5, r.block);
    put_rollup_.bind(6, r.first_step).bind(7, r.last_step).bind(8, r.count);
    put_rollup_.bind(9, r.min).bind(10, r.max).bind(11, r.last).run();
    r.dirty = false;
  }

  void get_rollup(uint64_t key, Rollup* r) {
    int64_t metric;
    int rank, level;
    split(key, &metric, &rank, &level);
    get_rollup_.bind(1, run_).bind(2, metric).bind(3, rank).bind(4, level).bind(5, r->block);
    if (get_rollup_.step()) {
      r->first_step = get_rollup_.col_int(0);
      r->last_step = get_rollup_.col_int(1);
      r->count = get_rollup_.col_int(2);
      r->min = get_rollup_.col_double(3);
      r->max = get_rollup_.col_double(4);
      r->last = get_rollup_.col_double(5);
    }
    get_rollup_.reset();
  }

  Db db_;
  HistoryRunInfo info_;
  int busy_patience_ms_ = 300000;
  ProcessIdentity me_;
  int64_t step_metric_[kNumStepMetrics] = {};
  int64_t epoch_metric_[6] = {};
  Stmt ins_sample_, ins_link_, ins_event_, put_rollup_, get_rollup_;
  int64_t run_ = 0;  // the runs row being recorded
  int64_t next_seq_ = 1;
  int64_t last_step_ = 0;
  double wall_offset_ = 0;
  bool fresh_ = true;  // created by this writer (not a resume)
  std::unordered_map<uint64_t, Rollup> rollups_;
};

// ------------------------------------------------------------ the sink

struct HistorySink::Impl {
  HistorySinkOptions opt;
  std::unique_ptr<HistoryWriter> writer;
  std::thread thread;

  std::mutex mu;
  std::condition_variable work_cv;  // the writer waits for work
  std::condition_variable done_cv;  // flush() and back-pressure wait for commits
  std::vector<Queued> queue;
  std::vector<Event> held;  // log/checkpoint before their run_start
  std::string current_run;
  Clock::time_point t0 = Clock::now();
  int64_t enqueued = 0, committed = 0, lost = 0;
  int64_t dropped = 0;  // of `lost`: emitted after the failure, never queued
  bool flush_requested = false, stopping = false, stopped = false;
  std::string error;
  std::atomic<int64_t> run_row{0};

  // The error and what it cost; the caller holds mu.
  std::string failure_text() const {
    return error + "; " + std::to_string(lost) + " of " + std::to_string(enqueued + dropped) +
           " events were not recorded";
  }

  void push(Queued&& q, std::unique_lock<std::mutex>& lk) {
    // Back-pressure: wait for the writer rather than grow without bound.
    done_cv.wait(lk, [&] {
      return static_cast<int64_t>(queue.size()) < opt.max_queued || stopped || !error.empty();
    });
    if (stopped) return;
    if (!error.empty()) {  // the database failed: nothing more is recorded
      ++lost;
      ++dropped;
      return;
    }
    queue.push_back(std::move(q));
    ++enqueued;
    if (static_cast<int64_t>(queue.size()) >= opt.commit_every_rows) work_cv.notify_one();
  }

  void loop() {
    std::vector<Queued> batch;
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      work_cv.wait_for(lk, std::chrono::milliseconds(opt.commit_every_ms), [&] {
        return stopping || flush_requested ||
               static_cast<int64_t>(queue.size()) >= opt.commit_every_rows;
      });
      flush_requested = false;
      if (queue.empty()) {
        done_cv.notify_all();
        if (stopping) break;
        continue;
      }
      batch.swap(queue);
      lk.unlock();
      std::string failure;
      if (error.empty()) {  // only this thread writes `error` after start
        try {
          writer->write(batch);
          run_row.store(writer->run_row());
        } catch (const std::exception& e) {
          failure = e.what();
        }
      }
      const auto n = static_cast<int64_t>(batch.size());
      batch.clear();
      const bool first_failure = !failure.empty();
      lk.lock();
      if (first_failure) {
        // From here on nothing is recorded (push() drops and counts).
        error = "history database: " + failure;
        if (opt.on_error) {
          // Said when it happens, not only at close(), and before any
          // waiter (flush, close) can see the failure: outside the lock,
          // since the callback may emit telemetry, which reaches this sink.
          const std::string report = error;
          lk.unlock();
          opt.on_error(report);
          lk.lock();
        }
      }
      // A failed batch was rolled back whole; after a failure nothing is
      // written. Neither counts as committed.
      if (!error.empty()) {
        lost += n;
      } else {
        committed += n;
      }
      done_cv.notify_all();
    }
    stopped = true;
    done_cv.notify_all();
  }
};

HistorySink::HistorySink(const std::string& db_path, HistoryRunInfo info,
                         HistorySinkOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->opt = options;
  impl_->opt.commit_every_ms = std::max(1, options.commit_every_ms);
  impl_->opt.commit_every_rows = std::max<int64_t>(1, options.commit_every_rows);
  impl_->opt.max_queued = std::max<int64_t>(impl_->opt.commit_every_rows, options.max_queued);
  impl_->writer = std::make_unique<HistoryWriter>(
      open_history_db(db_path, OpenMode::kCreate), std::move(info),
      std::max(1, options.busy_timeout_ms), std::max(0, options.busy_patience_ms),
      options.owner ? *options.owner : this_process());
  impl_->thread = std::thread([this] { impl_->loop(); });
}

HistorySink::~HistorySink() {
  try {
    close();
  } catch (...) {
    // close() reports errors; a destructor cannot.
  }
}

void HistorySink::emit(const Event& event) {
  Impl& m = *impl_;
  const double t_s = std::chrono::duration<double>(Clock::now() - m.t0).count();
  std::unique_lock<std::mutex> lk(m.mu);
  if (m.stopping) return;
  if (const auto* s = std::get_if<StepEvent>(&event)) {
    if (s->run == m.current_run) m.push({t_s, 0, step_body(*s)}, lk);
    return;
  }
  if (const auto* l = std::get_if<LinkEvent>(&event)) {
    if (l->run == m.current_run) {
      m.push({t_s, 0,
              LinkBody{l->step, l->src, l->dst, l->num_bytes, l->seconds, l->estimated, l->wait_s,
                       l->eager}},
             lk);
    }
    return;
  }
  if (const auto* rs = std::get_if<RunStartEvent>(&event)) {
    m.current_run = rs->run;
    m.t0 = Clock::now();
    m.push({0, unix_now(), event}, lk);
    std::vector<Event> held;
    held.swap(m.held);
    for (auto& h : held) {
      if (std::visit([](const auto& e) { return e.run; }, h) == rs->run) m.push({0, 0, h}, lk);
    }
    return;
  }
  const std::string& run =
      std::visit([](const auto& e) -> const std::string& { return e.run; }, event);
  if (run != m.current_run) {
    const bool early =
        std::holds_alternative<LogEvent>(event) || std::holds_alternative<CheckpointEvent>(event);
    if (early && m.held.size() < 256) m.held.push_back(event);
    return;
  }
  m.push({t_s, 0, event}, lk);
  // The end of a run is worth committing now rather than at the next tick.
  if (std::holds_alternative<RunEndEvent>(event)) m.work_cv.notify_one();
}

void HistorySink::flush() {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lk(m.mu);
  const int64_t target = m.enqueued;
  m.flush_requested = true;
  m.work_cv.notify_one();
  m.done_cv.wait(lk, [&] { return m.committed + m.lost - m.dropped >= target || m.stopped; });
  if (!m.error.empty()) throw RuntimeError(m.failure_text());
}

void HistorySink::close() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    m.stopping = true;
  }
  m.work_cv.notify_one();
  if (m.thread.joinable()) m.thread.join();
  std::lock_guard<std::mutex> lk(m.mu);
  m.writer.reset();  // closes the connection
  if (!m.error.empty()) throw RuntimeError(m.failure_text());
}

int64_t HistorySink::committed_events() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->committed;
}

int64_t HistorySink::lost_events() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->lost;
}

int64_t HistorySink::run_row_id() const { return impl_->run_row.load(); }

}  // namespace baton
