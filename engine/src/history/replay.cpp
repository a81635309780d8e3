#include <baton/core/error.h>
#include <baton/history/replay.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "db.h"

namespace baton {
using namespace history_detail;

namespace {

// Steps read per query. A chunk is small enough to hold in memory for any
// logging rate, large enough that a query's cost is spread over many events.
constexpr int64_t kChunkSteps = 4096;
constexpr int64_t kNoStep = std::numeric_limits<int64_t>::min() / 2;
constexpr int64_t kEndSeq = std::numeric_limits<int64_t>::max();

LogLevel level_from(const std::string& s) {
  if (s == "debug") return LogLevel::kDebug;
  if (s == "warning") return LogLevel::kWarning;
  if (s == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

template <typename T>
T get(const nlohmann::json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return fallback;
  }
}

RunStartEvent start_event(const RunRecord& r, const nlohmann::json& info) {
  RunStartEvent e;
  e.run = r.uid;
  e.name = get<std::string>(info, "name", r.name);
  e.strategy = get<std::string>(info, "strategy", r.strategy);
  e.model = get<std::string>(info, "model", "");
  e.dataset = get<std::string>(info, "dataset", "");
  e.kernel_path = get<std::string>(info, "kernel_path", "");
  e.communication = get<std::string>(info, "communication", "");
  e.device = get<std::string>(info, "device", "");
  e.device_note = get<std::string>(info, "device_note", "");
  e.replicas = get<int>(info, "replicas", r.replicas);
  e.total_steps = get<int64_t>(info, "total_steps", 0);
  e.steps_per_epoch = get<int64_t>(info, "steps_per_epoch", 0);
  e.global_batch = get<int64_t>(info, "global_batch", 0);
  e.parameters = get<int64_t>(info, "parameters", 0);
  e.tokens_per_sample = get<int64_t>(info, "tokens_per_sample", 0);
  e.model_flops_per_step = get<double>(info, "model_flops_per_step", 0.0);
  e.peak_flops = get<double>(info, "peak_flops", 0.0);
  e.peak_note = get<std::string>(info, "peak_note", std::string());
  e.start_step = get<int64_t>(info, "start_step", 0);
  // A resumed run's row holds the newest config; each attempt's own is in
  // its start info.
  e.config = info.contains("config") ? info["config"] : r.config;
  return e;
}

// One attempt of the run: from its run_start (or restart event) to the
// next. Within an attempt steps never decrease in record order, so reading
// it in step chunks gives record order.
struct Attempt {
  int64_t seq_begin = 0, seq_end = kEndSeq;
  double offset_s = 0;  // its clock's start, in seconds since the run's
};

struct MetricInfo {
  bool epoch = false;
  int index = 0;  // in kStepMetrics or kEpochMetrics
};

}  // namespace

struct HistoryReplay::Impl {
  Db db;
  RunRecord rec;
  std::vector<Attempt> attempts;
  std::unordered_map<int64_t, MetricInfo> metrics;
  std::string metric_ids;  // "1,2,3": for the IN list
  std::deque<ReplayedEvent> buffer;
  size_t attempt = 0;
  int64_t lo = kNoStep;
  int64_t seek_target = kNoStep;  // != kNoStep while seeking
  bool started = false, ended = false;
  int64_t last_step = 0;

  Stmt q_samples, q_links, q_events, q_next;

  void prepare() {
    Stmt st(db, "SELECT id, name FROM metrics");
    while (st.step()) {
      const std::string name = st.col_text(1);
      for (int i = 0; i < kNumStepMetrics; ++i) {
        if (name == kStepMetrics[i]) metrics[st.col_int(0)] = {false, i};
      }
      for (int i = 0; i < 6; ++i) {
        if (name == kEpochMetrics[i]) metrics[st.col_int(0)] = {true, i};
      }
    }
    for (const auto& [id, m] : metrics) {
      metric_ids += (metric_ids.empty() ? "" : ",") + std::to_string(id);
    }
    if (metric_ids.empty()) metric_ids = "0";
    // `metric IN (...)` lets SQLite seek each metric's range of the
    // primary key (run, metric, step, ...) instead of scanning the run.
    q_samples = Stmt(db,
                     "SELECT seq, metric, step, rank, epoch, wall_time_s, value "
                     "FROM metric_samples WHERE run = ?1 AND metric IN (" +
                         metric_ids + ") AND step >= ?2 AND step < ?3 AND seq >= ?4 AND seq < ?5");
    q_links = Stmt(
        db,
        std::string("SELECT seq, step, src, dst, num_bytes, seconds, estimated, wall_time_s, ") +
            (db.scalar_int("PRAGMA user_version") >= 3 ? "wait_s" : "0.0") + ", " +
            (db.scalar_int("PRAGMA user_version") >= 7 ? "eager" : "0") +
            " FROM "
            "link_samples WHERE run = ?1 AND step >= ?2 AND step < ?3 AND seq >= ?4 AND "
            "seq < ?5");
    q_events = Stmt(db,
                    "SELECT seq, step, kind, level, message, data, wall_time_s FROM events WHERE "
                    "run = ?1 AND step >= ?2 AND step < ?3 AND seq >= ?4 AND seq < ?5");
    q_next = Stmt(db,
                  "SELECT min(s) FROM ("
                  "SELECT min(step) AS s FROM metric_samples WHERE run = ?1 AND metric IN (" +
                      metric_ids +
                      ") AND step >= ?2 AND seq >= ?4 AND seq < ?5 "
                      "UNION ALL SELECT min(step) FROM link_samples WHERE run = ?1 AND step "
                      ">= ?2 AND seq >= ?4 AND seq < ?5 "
                      "UNION ALL SELECT min(step) FROM events WHERE run = ?1 AND step >= ?2 "
                      "AND seq >= ?4 AND seq < ?5)");

    Stmt restarts(db,
                  "SELECT seq, data FROM events WHERE run = ?1 AND kind = 'restart' ORDER BY seq");
    restarts.bind(1, rec.id);
    Attempt first;
    attempts.push_back(first);
    while (restarts.step()) {
      attempts.back().seq_end = restarts.col_int(0);
      Attempt a;
      a.seq_begin = restarts.col_int(0);
      auto data = nlohmann::json::parse(restarts.col_text(1), nullptr, false);
      a.offset_s = data.is_discarded() ? 0.0 : get<double>(data, "offset_s", 0.0);
      attempts.push_back(a);
    }
  }

  template <typename F>
  void query(Stmt& st, int64_t from, int64_t to, const Attempt& a, F&& row) {
    st.bind(1, rec.id).bind(2, from).bind(3, to).bind(4, a.seq_begin).bind(5, a.seq_end);
    while (st.step()) row(st);
    st.reset();
  }

  // Reads the events of steps [from, from + kChunkSteps) of attempt `a`
  // into the buffer in record order; false when there were none.
  bool load_chunk(const Attempt& a, int64_t from) {
    const int64_t to = from > std::numeric_limits<int64_t>::max() - kChunkSteps
                           ? std::numeric_limits<int64_t>::max()
                           : from + kChunkSteps;
    std::map<int64_t, ReplayedEvent> by_seq;
    query(q_samples, from, to, a, [&](const Stmt& st) {
      const auto mi = metrics.find(st.col_int(1));
      if (mi == metrics.end()) return;
      const int64_t seq = st.col_int(0);
      auto [it, fresh] = by_seq.try_emplace(seq);
      ReplayedEvent& re = it->second;
      const int64_t step = st.col_int(2);
      const double value = st.col_double(6);
      if (fresh) {
        re.step = step;
        re.wall_time_s = st.col_double(5);
        if (mi->second.epoch) {
          EpochEvent e;
          e.run = rec.uid;
          e.step = step;
          e.epoch = st.col_int(4);
          re.event = e;
        } else {
          StepEvent e;
          e.run = rec.uid;
          e.step = step;
          e.epoch = st.col_int(4);
          e.rank = static_cast<int>(st.col_int(3));
          e.wall_time_s = st.col_double(5) - a.offset_s;
          // Not stored per step: from the run's replicas and processes.
          const int world = rec.topology.is_object() ? rec.topology.value("world_size", 1) : 1;
          e.local_replicas = std::max(1, rec.replicas / std::max(1, world));
          e.replica = e.rank * e.local_replicas;
          re.event = e;
        }
      }
      if (auto* e = std::get_if<StepEvent>(&re.event)) {
        double* fields[kNumStepMetrics] = {
            &e->loss,         &e->accuracy,           &e->lr,
            &e->grad_norm,    &e->samples_per_s,      &e->step_time_ms,
            &e->data_ms,      &e->compute_ms,         &e->comm_ms,
            &e->optimizer_ms, &e->rank_samples_per_s, &e->mfu};
        if (!mi->second.epoch) *fields[mi->second.index] = value;
      } else if (auto* e = std::get_if<EpochEvent>(&re.event)) {
        double* fields[6] = {&e->train_loss,   &e->train_accuracy, &e->val_loss,
                             &e->val_accuracy, &e->samples_per_s,  &e->epoch_time_s};
        if (mi->second.epoch) *fields[mi->second.index] = value;
        if (mi->second.index == 2 || mi->second.index == 3) e->has_validation = true;
      }
    });
    query(q_links, from, to, a, [&](const Stmt& st) {
      LinkEvent e;
      e.run = rec.uid;
      e.step = st.col_int(1);
      e.src = static_cast<int>(st.col_int(2));
      e.dst = static_cast<int>(st.col_int(3));
      e.num_bytes = st.col_int(4);
      e.seconds = st.col_double(5);
      e.bandwidth_gbps = e.seconds > 0 ? static_cast<double>(e.num_bytes) / e.seconds / 1e9 : 0.0;
      e.estimated = st.col_int(6) != 0;
      e.wait_s = st.col_double(8);
      e.eager = st.col_int(9) != 0;
      by_seq[st.col_int(0)] = {e, e.step, st.col_double(7)};
    });
    query(q_events, from, to, a, [&](const Stmt& st) {
      const std::string kind = st.col_text(2);
      const int64_t step = st.col_int(1);
      const double wall = st.col_double(6);
      auto data = nlohmann::json::parse(st.col_text(5), nullptr, false);
      if (data.is_discarded()) data = nlohmann::json::object();
      const bool launcher_error = kind == "error" && data.value("source", "") == "launcher";
      if (kind == "log" || launcher_error) {  // the launcher's: why an attempt failed
        by_seq[st.col_int(0)] = {LogEvent{rec.uid, level_from(st.col_text(3)), st.col_text(4)},
                                 step, wall};
      } else if (kind == "checkpoint") {
        CheckpointEvent e{rec.uid, step, st.col_text(4), get<int64_t>(data, "num_bytes", 0),
                          get<double>(data, "write_ms", 0.0)};
        by_seq[st.col_int(0)] = {e, step, wall};
      } else if (kind == "sample") {
        SampleEvent e{rec.uid, step, get<std::string>(data, "prompt", std::string()),
                      st.col_text(4), get<double>(data, "temperature", 0.0)};
        by_seq[st.col_int(0)] = {e, step, wall};
      } else if (kind == "device") {
        // Stored as its JSON less what the row holds (the sink).
        if (auto e = device_event_from_row(rec.uid, step, st.col_text(4), data)) {
          by_seq[st.col_int(0)] = {std::move(*e), step, wall};
        }
      } else if (kind == "restart") {
        by_seq[st.col_int(0)] = {start_event(rec, data), step, wall};
      }
    });
    for (auto& [seq, re] : by_seq) {
      last_step = std::max(last_step, re.step);
      buffer.push_back(std::move(re));
    }
    return !by_seq.empty();
  }

  // The smallest step >= from with an event in attempt `a`, if any.
  std::optional<int64_t> next_step(const Attempt& a, int64_t from) {
    q_next.bind(1, rec.id).bind(2, from).bind(4, a.seq_begin);
    q_next.bind(5, a.seq_end);
    std::optional<int64_t> out;
    if (q_next.step() && !q_next.col_is_null(0)) out = q_next.col_int(0);
    q_next.reset();
    return out;
  }

  void fill() {
    while (buffer.empty() && attempt < attempts.size()) {
      const Attempt& a = attempts[attempt];
      if (lo == kNoStep) lo = seek_target != kNoStep ? seek_target : 0;
      if (load_chunk(a, lo)) {
        seek_target = kNoStep;  // found the first event at or after it
        lo += kChunkSteps;
        continue;
      }
      if (auto s = next_step(a, lo)) {
        lo = *s;
      } else {
        ++attempt;
        lo = kNoStep;
      }
    }
  }

  std::optional<ReplayedEvent> end_event() {
    if (rec.status == "running") return std::nullopt;
    RunEndEvent e;
    e.run = rec.uid;
    e.status = rec.status;
    const auto& m = rec.final_metrics;
    e.step = get<int64_t>(m, "step", last_step);
    e.wall_time_s =
        get<double>(m, "wall_time_s", rec.end_time > 0 ? rec.end_time - rec.start_time : 0.0);
    e.train_loss = get<double>(m, "train_loss", 0.0);
    e.samples_per_s = get<double>(m, "samples_per_s", 0.0);
    e.has_validation = m.contains("val_loss");
    e.val_loss = get<double>(m, "val_loss", 0.0);
    e.val_accuracy = get<double>(m, "val_accuracy", 0.0);
    e.tokens_per_s = get<double>(m, "tokens_per_s", 0.0);
    e.model_flops_per_s = get<double>(m, "model_flops_per_s", 0.0);
    e.mfu = get<double>(m, "mfu", 0.0);
    e.error = rec.error;
    const double wall = rec.end_time > 0 ? rec.end_time - rec.start_time : e.wall_time_s;
    return ReplayedEvent{e, e.step, wall};
  }
};

HistoryReplay::HistoryReplay(const std::string& db_path, const std::string& run)
    : impl_(std::make_unique<Impl>()) {
  {
    const HistoryStore store(db_path, HistoryStore::Open::kReadOnly);
    impl_->rec = store.run(store.resolve(run));
  }
  impl_->db = open_history_db(db_path, OpenMode::kReadOnly);
  impl_->prepare();
}

HistoryReplay::~HistoryReplay() = default;
HistoryReplay::HistoryReplay(HistoryReplay&&) noexcept = default;
HistoryReplay& HistoryReplay::operator=(HistoryReplay&&) noexcept = default;

const RunRecord& HistoryReplay::run() const { return impl_->rec; }

std::optional<ReplayedEvent> HistoryReplay::next() {
  Impl& m = *impl_;
  if (!m.started) {
    m.started = true;
    return ReplayedEvent{start_event(m.rec, m.rec.start_info),
                         get<int64_t>(m.rec.start_info, "start_step", 0), 0.0};
  }
  m.fill();
  if (!m.buffer.empty()) {
    ReplayedEvent e = std::move(m.buffer.front());
    m.buffer.pop_front();
    return e;
  }
  if (m.ended) return std::nullopt;
  m.ended = true;
  return m.end_event();
}

void HistoryReplay::seek(int64_t step) {
  Impl& m = *impl_;
  m.buffer.clear();
  m.attempt = 0;
  m.lo = kNoStep;
  m.ended = false;
  m.started = step > 0;
  m.seek_target = step > 0 ? step : kNoStep;
}

// ------------------------------------------------------------ player

struct ReplayPlayer::Impl {
  std::unique_ptr<HistoryReplay> replay;
  Callback on_event;
  std::thread thread;
  mutable std::mutex mu;
  std::condition_variable cv;
  double speed = 1.0;
  bool stopping = false, done = false, speed_changed = false, paused = false;
  int64_t seek_to = kNoStep;
  int64_t fast_until = kNoStep;  // events before this step: no pacing
  bool pause_at_fast_end = false;
  std::string error;

  void loop() {
    using Clock = std::chrono::steady_clock;
    bool anchored = false;
    Clock::time_point anchor_clock;
    double anchor_wall = 0;
    std::unique_lock<std::mutex> lk(mu);
    try {
      for (;;) {
        if (stopping) return;
        if (seek_to != kNoStep) {
          replay->seek(seek_to);
          seek_to = kNoStep;
          anchored = false;
        }
        lk.unlock();
        std::optional<ReplayedEvent> ev = replay->next();  // SQLite, outside the lock
        lk.lock();
        // A seek (or fast-forward) that came while reading: this event is
        // from before it, and the seek is applied at the top.
        if (seek_to != kNoStep) continue;
        if (!ev) {
          // At the end: stay for a seek (a scrubber) or stop.
          done = true;
          cv.notify_all();
          cv.wait(lk, [&] { return stopping || seek_to != kNoStep; });
          continue;
        }
        if (fast_until != kNoStep) {
          if (ev->step < fast_until || std::holds_alternative<RunStartEvent>(ev->event)) {
            on_event(ev->event);  // before the target: at once
            continue;
          }
          fast_until = kNoStep;
          anchored = false;
          if (pause_at_fast_end) paused = true;  // hold before the target's first event
        }
        if (paused) {
          cv.wait(lk, [&] { return stopping || !paused || seek_to != kNoStep; });
          if (stopping) return;
          if (seek_to != kNoStep) continue;  // this event is dropped by the seek
          anchored = false;                  // the pace starts again from here
        }
        const bool restart = std::holds_alternative<RunStartEvent>(ev->event);
        // A restart may follow hours of downtime: playback does not wait
        // for it, it starts the clock again.
        bool drop = false;
        double pace = speed;
        while (anchored && !restart && pace > 0) {
          const double wait_s = std::max(0.0, ev->wall_time_s - anchor_wall) / pace;
          const auto due = anchor_clock + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(wait_s));
          cv.wait_until(lk, due,
                        [&] { return stopping || seek_to != kNoStep || speed_changed || paused; });
          if (stopping) return;
          if (seek_to != kNoStep) {
            drop = true;  // the seek is applied at the top of the loop
            break;
          }
          if (paused) {
            // Held with this event not yet delivered: it comes first on
            // resume, at once, and the pace starts again from it.
            cv.wait(lk, [&] { return stopping || !paused || seek_to != kNoStep; });
            if (stopping) return;
            if (seek_to != kNoStep) {
              drop = true;
              break;
            }
            anchored = false;
            break;
          }
          if (!speed_changed) break;
          // Time already waited counts at the old pace; the rest goes at
          // the new one.
          speed_changed = false;
          const auto now = Clock::now();
          anchor_wall += std::chrono::duration<double>(now - anchor_clock).count() * pace;
          anchor_clock = now;
          pace = speed;
        }
        if (drop) continue;
        if (!anchored || restart) {
          anchored = true;
          anchor_clock = Clock::now();
          anchor_wall = ev->wall_time_s;
        }
        // Delivered under the lock, so stop() cannot return while a
        // callback runs; a callback must not call into this player.
        on_event(ev->event);
      }
    } catch (const std::exception& e) {
      if (!lk.owns_lock()) lk.lock();
      error = e.what();
      done = true;
      cv.notify_all();
    }
  }
};

ReplayPlayer::ReplayPlayer(const std::string& db_path, const std::string& run, Callback on_event,
                           double speed)
    : impl_(std::make_unique<Impl>()) {
  impl_->replay = std::make_unique<HistoryReplay>(db_path, run);
  impl_->on_event = std::move(on_event);
  impl_->speed = speed;
}

ReplayPlayer::~ReplayPlayer() { stop(); }

void ReplayPlayer::start() {
  if (impl_->thread.joinable()) return;
  impl_->thread = std::thread([this] { impl_->loop(); });
}

void ReplayPlayer::stop() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->thread.joinable()) impl_->thread.join();
}

void ReplayPlayer::seek(int64_t step) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->seek_to = step <= 0 ? 0 : step;
  impl_->fast_until = kNoStep;
  impl_->pause_at_fast_end = false;
  impl_->done = false;
  impl_->cv.notify_all();
}

void ReplayPlayer::pause() {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->paused = true;
  // During a fast-forward (which shows everything before its step at
  // once): hold at its step.
  if (impl_->fast_until != kNoStep) impl_->pause_at_fast_end = true;
  impl_->cv.notify_all();
}

void ReplayPlayer::resume() {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->paused = false;
  impl_->pause_at_fast_end = false;
  impl_->cv.notify_all();
}

void ReplayPlayer::fast_forward(int64_t step, bool then_pause) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->seek_to = 0;  // from the beginning: run_start first
  impl_->fast_until = step;
  impl_->pause_at_fast_end = then_pause;
  impl_->paused = false;
  impl_->done = false;
  impl_->cv.notify_all();
}

void ReplayPlayer::set_speed(double speed) {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->speed = speed;
  impl_->speed_changed = true;
  impl_->cv.notify_all();
}

bool ReplayPlayer::wait_finished(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(impl_->mu);
  return impl_->cv.wait_for(lk, timeout, [&] { return impl_->done; });
}

bool ReplayPlayer::finished() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->done;
}

std::string ReplayPlayer::error() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->error;
}

}  // namespace baton
