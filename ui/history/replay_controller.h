// Replays a recorded run into a dashboard through the live path (engine
// thread -> EventQueue -> EventPump -> Dashboard): play at 1x to 100x the
// recorded pace, pause, and scrub. Scrubbing to step S shows the run up to
// S at once and plays on from there (or stays paused there). Nothing here
// reads the database on the GUI thread: opening a run happens on a worker,
// and the player reads on its own thread.
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

  // Opens `run` (a row id or uid) of the database off the GUI thread and
  // plays it at `speed` (0: as fast as it goes): opened(last step) then,
  // or failed(message).
  void open(const QString& db_path, const QString& run, double speed);
  void pause();
  void resume();
  void seek(int64_t step);
  void set_speed(double speed);
  void stop();
  bool playing() const { return playing_; }
  bool opening() const { return opening_ != 0; }
  int64_t position() const { return position_; }
  int64_t last_step() const { return last_step_; }
  bool finished() const;

 Q_SIGNALS:
  void opened(qint64 last_step);
  void failed(const QString& message);
  // The newest step shown, for the scrubber.
  void position_changed(qint64 step);
  void ended();

 private:
  void deliver(const std::vector<baton::Event>& batch);
  Dashboard& dash_;
  std::shared_ptr<EventQueue> queue_;
  EventPump* pump_ = nullptr;
  std::shared_ptr<ReplayPlayer> player_;
  QString uid_, name_;
  double start_unix_s_ = 0;
  double speed_ = 10;
  bool playing_ = false;
  quint64 opening_ = 0, open_job_ = 0;  // the open in flight (0: none)
  int64_t position_ = 0, last_step_ = 0;
};

}  // namespace baton::ui
