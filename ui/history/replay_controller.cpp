#include "history/replay_controller.h"

#include <baton/history/replay.h>
#include <baton/history/store.h>

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

}  // namespace

ReplayController::ReplayController(Dashboard& dashboard, QObject* parent)
    : QObject(parent), dash_(dashboard), queue_(std::make_shared<EventQueue>()) {
  pump_ = new EventPump(queue_, 30, this);
  connect(pump_, &EventPump::events, this, [this](const std::vector<Event>& batch) {
    dash_.add_events(batch);
    bool end = false;
    for (const Event& e : batch) {
      position_ = std::max(position_, step_of(e));
      end = end || std::holds_alternative<RunEndEvent>(e);
    }
    Q_EMIT position_changed(position_);
    if (end || finished()) {
      playing_ = false;
      pump_->stop();
      Q_EMIT ended();
    }
  });
}

ReplayController::~ReplayController() { stop(); }

bool ReplayController::finished() const { return player_ && player_->finished(); }

bool ReplayController::start(const QString& db_path, const QString& run, double speed,
                             QString* error) {
  stop();
  try {
    // The run's extent for the scrubber; also checks the run exists.
    const HistoryStore store(db_path.toStdString(), HistoryStore::Open::kReadOnly);
    last_step_ = 0;
    for (const MetricSummary& m : store.metric_summary(store.resolve(run.toStdString()))) {
      last_step_ = std::max(last_step_, m.last_step);
    }
  } catch (const std::exception& e) {
    *error = QString::fromUtf8(e.what());
    return false;
  }
  db_ = db_path;
  run_ = run;
  speed_ = speed;
  dash_.clear();
  position_ = 0;
  make_player(0);
  return true;
}

void ReplayController::make_player(int64_t from_step) {
  player_.reset();  // its thread ends before a new one starts
  queue_->drain();
  player_ = std::make_unique<ReplayPlayer>(
      db_.toStdString(), run_.toStdString(), [q = queue_](const Event& e) { q->push(e); }, speed_);
  if (from_step > 0) player_->seek(from_step);
  player_->start();
  playing_ = true;
  pump_->start();
}

void ReplayController::pause() {
  if (!playing_) return;
  player_.reset();
  pump_->pump();
  pump_->stop();
  playing_ = false;
}

void ReplayController::resume() {
  if (playing_ || db_.isEmpty()) return;
  make_player(position_ + 1);
}

void ReplayController::seek(int64_t step) {
  if (db_.isEmpty()) return;
  const bool was_playing = playing_;
  player_.reset();
  queue_->drain();
  // Everything before `step` at once, then play on from there.
  dash_.clear();
  std::vector<Event> before;
  try {
    HistoryReplay r(db_.toStdString(), run_.toStdString());
    while (auto e = r.next()) {
      if (e->step >= step && !std::holds_alternative<RunStartEvent>(e->event)) break;
      before.push_back(std::move(e->event));
    }
  } catch (const std::exception&) {
    return;
  }
  dash_.add_events(before);
  position_ = std::max<int64_t>(0, step - 1);
  Q_EMIT position_changed(position_);
  if (was_playing) {
    make_player(step);
  } else {
    playing_ = false;
  }
}

void ReplayController::set_speed(double speed) {
  speed_ = speed;
  if (player_) player_->set_speed(speed);
}

void ReplayController::stop() {
  player_.reset();
  if (pump_) pump_->stop();
  queue_->drain();
  playing_ = false;
}

}  // namespace baton::ui
