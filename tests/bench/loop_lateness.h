// The GUI event loop's lateness, as the studio's benchmarks measure it: a
// 5 ms precise timer's overshoot at each tick while the loop runs for a
// set time; its p50, p99 and max in ms.
#pragma once

#include <QApplication>
#include <QElapsedTimer>
#include <QTimer>
#include <algorithm>
#include <functional>
#include <vector>

namespace baton_bench {

struct Latency {
  double p50 = 0, p99 = 0, max = 0;
};

// Runs the application's event loop for `seconds`; `on_tick` (optional)
// gets the seconds since the start at every tick, on the GUI thread.
inline Latency run_loop_measuring_lateness(double seconds,
                                           const std::function<void(double)>& on_tick = {}) {
  std::vector<double> late;
  late.reserve(static_cast<size_t>(seconds * 250));
  QElapsedTimer clock;
  clock.start();
  qint64 last = clock.nsecsElapsed();
  QTimer tick;
  tick.setTimerType(Qt::PreciseTimer);
  tick.setInterval(5);
  QObject::connect(&tick, &QTimer::timeout, [&] {
    const qint64 now = clock.nsecsElapsed();
    late.push_back(std::max(0.0, static_cast<double>(now - last) / 1e6 - 5.0));
    last = now;
    if (on_tick) on_tick(static_cast<double>(now) / 1e9);
    if (now > seconds * 1e9) QApplication::quit();
  });
  tick.start();
  QApplication::exec();
  std::sort(late.begin(), late.end());
  Latency l;
  if (!late.empty()) {
    l.p50 = late[late.size() / 2];
    l.p99 = late[std::min(late.size() - 1, late.size() * 99 / 100)];
    l.max = late.back();
  }
  return l;
}

}  // namespace baton_bench
