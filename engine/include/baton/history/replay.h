// Replay: a recorded run read back as the telemetry events the live run
// produced, in the order it produced them, so the studio shows a recorded
// run through the same code path as a live one.
//
// What comes back: run_start (from the runs row), then every step, epoch,
// link, log and checkpoint event in record order (a --resume shows as a
// second run_start where it happened), then run_end when the run has
// ended; a run marked interrupted ends with a run_end of status
// "interrupted". A run still being recorded ends where its committed
// events end. Fields that were never stored are left at their defaults
// (the events' JSON "time" is not kept; wall_time_s is). The `error`
// events stored with failures are not replayed as events: their text is in
// run_end's `error`.
#pragma once

#include <baton/history/store.h>
#include <baton/telemetry/telemetry.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace baton {

struct ReplayedEvent {
  Event event;
  int64_t step = 0;
  double wall_time_s = 0;  // seconds since the run first started
};

// A cursor over one run's events. Reads the database in chunks of steps,
// so a long run is never loaded whole. One thread at a time.
class HistoryReplay {
 public:
  // `run` as HistoryStore::resolve takes it. InputError for an unknown run
  // or a database that is not Baton's.
  HistoryReplay(const std::string& db_path, const std::string& run);
  ~HistoryReplay();
  HistoryReplay(HistoryReplay&&) noexcept;
  HistoryReplay& operator=(HistoryReplay&&) noexcept;

  const RunRecord& run() const;
  // The next event, or nullopt after the last.
  std::optional<ReplayedEvent> next();
  // Positions at the first recorded event (in record order) whose step is
  // >= step; step <= 0 goes back to the very beginning (run_start).
  void seek(int64_t step);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Plays a run on its own thread at `speed` times the recorded pace (the
// gaps between events' wall times divided by speed; speed <= 0: as fast as
// possible), calling on_event for each event ON THAT THREAD (a UI hops to
// its own thread itself). Waits are on a condition variable: stop(),
// seek() and set_speed() take effect at once, even in a long gap.
class ReplayPlayer {
 public:
  using Callback = std::function<void(const Event&)>;
  ReplayPlayer(const std::string& db_path, const std::string& run, Callback on_event,
               double speed = 1.0);
  ~ReplayPlayer();  // stop()
  ReplayPlayer(const ReplayPlayer&) = delete;
  ReplayPlayer& operator=(const ReplayPlayer&) = delete;

  void start();
  // Ends playback; on_event is not called after stop() returns.
  void stop();
  // Continues from the first event at or after `step` (see HistoryReplay).
  void seek(int64_t step);
  // Holds playback before the next event (pause returns once no callback
  // runs), and goes on from exactly there, its pace restarted. During a
  // fast-forward the events before its step still come at once, and the
  // hold is at its step.
  void pause();
  void resume();
  // Delivers every event before `step` at once (no pacing), then plays at
  // the pace from there - or holds there, paused, when `then_pause`.
  void fast_forward(int64_t step, bool then_pause);
  void set_speed(double speed);
  // Waits until the last event was delivered (true) or the timeout passed.
  bool wait_finished(std::chrono::milliseconds timeout);
  bool finished() const;
  // The error that ended playback early, or "".
  std::string error() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace baton
