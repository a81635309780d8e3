// Replays a recorded run into a dashboard through the live path (engine
// thread -> EventQueue -> EventPump -> Dashboard): play at 1x to 100x the
// recorded pace, pause, and scrub. Scrubbing to step S shows the run up to
// S at once and plays on from there.
#pragma once

#include <QObject>
#include <QString>
#include <memory>

#include "common/event_queue.h"

namespace baton {
class ReplayPlayer;
}

namespace baton::ui {

class Dashboard;

class ReplayController : public QObject {
  Q_OBJECT
 public:
  ReplayController(Dashboard& dashboard, QObject* parent = nullptr);
  ~ReplayController() override;

  // Starts replaying `run` (a row id or uid) of the database at `speed`.
  // false (and *error) when the run cannot be read.
  bool start(const QString& db_path, const QString& run, double speed, QString* error);
  void pause();
  void resume();
  void seek(int64_t step);
  void set_speed(double speed);
  void stop();
  bool playing() const { return playing_; }
  int64_t position() const { return position_; }
  int64_t last_step() const { return last_step_; }
  bool finished() const;

 Q_SIGNALS:
  // The newest step shown, for the scrubber.
  void position_changed(qint64 step);
  void ended();

 private:
  void make_player(int64_t from_step);
  Dashboard& dash_;
  std::shared_ptr<EventQueue> queue_;
  EventPump* pump_ = nullptr;
  std::unique_ptr<ReplayPlayer> player_;
  QString db_, run_;
  double speed_ = 10;
  bool playing_ = false;
  int64_t position_ = 0, last_step_ = 0;
};

}  // namespace baton::ui
