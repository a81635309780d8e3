#include "history/replay_controller.h"

#include <baton/history/replay.h>
#include <baton/history/store.h>

#include <QFutureWatcher>
#include <QtConcurrent/QtConcurrentRun>

#include "common/dashboard.h"

namespace baton::ui {
namespace {

int64_t step_of(const Event& e) {
  if (const auto* s = std::get_if<StepEvent>(&e)) return s->step;
  if (const auto* s = std::get_if<EpochEvent>(&e)) return s->step;
  if (const auto* s = std::get_if<LinkEvent>(&e)) return s->step;
  if (const auto* s = std::get_if<RunEndEvent>(&e)) return s->step;
  return -1;
}

struct Opened {
  std::shared_ptr<ReplayPlayer> player;
  QString uid, name, error;
  double start_unix_s = 0;
  int64_t last_step = 0;
};

}  // namespace

ReplayController::ReplayController(Dashboard& dashboard, QObject* parent)
    : QObject(parent), dash_(dashboard), queue_(std::make_shared<EventQueue>()) {
  pump_ = new EventPump(queue_, 30, this);
  connect(pump_, &EventPump::events, this, &ReplayController::deliver);
}

ReplayController::~ReplayController() { stop(); }

bool ReplayController::finished() const { return player_ && player_->finished(); }

void ReplayController::deliver(const std::vector<Event>& batch) {
  dash_.add_events(batch);
  bool end = false;
  for (const Event& e : batch) {
    position_ = std::max(position_, step_of(e));
    end = end || std::holds_alternative<RunEndEvent>(e);
  }
  if (!end && finished()) {
    // The player ended while this batch was drawn: what it pushed after
    // the drain is the run's last events - shown now, not left queued.
    const std::vector<Event> rest = queue_->drain();
    if (!rest.empty()) return deliver(rest);
  }
  Q_EMIT position_changed(position_);
  if (end || finished()) {
    playing_ = false;
    pump_->stop();
    const std::string error = player_ ? player_->error() : std::string();
    if (!error.empty()) Q_EMIT failed(QString::fromStdString(error));
    Q_EMIT ended();
  }
}

void ReplayController::open(const QString& db_path, const QString& run, double speed) {
  stop();
  const quint64 job = ++open_job_;
  opening_ = job;
  auto queue = queue_;
  auto* watcher = new QFutureWatcher<Opened>(this);
  connect(watcher, &QFutureWatcher<Opened>::finished, this, [this, watcher, job, speed] {
    watcher->deleteLater();
    if (job != opening_) return;  // stopped, or another open since
    opening_ = 0;
    Opened r = watcher->result();
    if (!r.error.isEmpty()) {
      Q_EMIT failed(r.error);
      return;
    }
    player_ = std::move(r.player);
    uid_ = r.uid;
    name_ = r.name;
    start_unix_s_ = r.start_unix_s;
    last_step_ = r.last_step;
    speed_ = speed;
    position_ = 0;
    dash_.clear();
    // The recorded start, so the wall-clock axis shows when the run ran.
    dash_.begin_run(uid_, name_, start_unix_s_);
    player_->set_speed(speed_);
    player_->start();
    playing_ = true;
    pump_->start();
    Q_EMIT opened(last_step_);
  });
  const std::string db = db_path.toStdString(), id = run.toStdString();
  watcher->setFuture(QtConcurrent::run([db, id, queue]() -> Opened {
    Opened r;
    try {
      // The run's extent for the scrubber; also checks the run exists.
      const HistoryStore store(db, HistoryStore::Open::kReadOnly);
      const RunRecord rec = store.run(store.resolve(id));
      for (const MetricSummary& m : store.metric_summary(rec.id)) {
        r.last_step = std::max(r.last_step, m.last_step);
      }
      r.uid = QString::fromStdString(rec.uid);
      r.name = QString::fromStdString(rec.name);
      r.start_unix_s = rec.start_time;
      r.player = std::make_shared<ReplayPlayer>(
          db, rec.uid, [queue](const Event& e) { queue->push(e); }, 1.0);
    } catch (const std::exception& e) {
      r.error = QString::fromUtf8(e.what());
    }
    return r;
  }));
}

void ReplayController::pause() {
  if (!playing_ || !player_) return;
  player_->pause();  // returns with no event being delivered
  pump_->pump();     // what was queued is shown
  pump_->stop();
  playing_ = false;
}

void ReplayController::resume() {
  if (playing_ || !player_ || finished()) return;
  player_->resume();  // from exactly the event it held
  playing_ = true;
  pump_->start();
}

void ReplayController::seek(int64_t step) {
  if (!player_) return;
  // The run up to `step` at once (read on the player's thread), then play
  // on from there, or hold there when paused. The player holds first (once
  // pause returns no event is being delivered), so what is queued is all
  // from before the seek and is dropped.
  player_->pause();
  queue_->drain();
  dash_.clear();
  dash_.begin_run(uid_, name_, start_unix_s_);
  player_->fast_forward(step, !playing_);
  position_ = std::max<int64_t>(0, step - 1);
  Q_EMIT position_changed(position_);
  pump_->start();
}

void ReplayController::set_speed(double speed) {
  speed_ = speed;
  if (player_) player_->set_speed(speed);
}

void ReplayController::stop() {
  opening_ = 0;
  player_.reset();  // stops and joins its thread
  if (pump_) pump_->stop();
  queue_->drain();
  playing_ = false;
}

}  // namespace baton::ui
