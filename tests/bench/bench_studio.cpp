// Studio responsiveness, printed (never fails on time):
//  - GUI event-loop latency while 1,000 telemetry events a second stream
//    into the live dashboard from another thread (the path a run takes:
//    queue -> pump -> dashboard), next to the same loop with no events;
//  - replot time of a 1-million-point series, next to 10,000 points;
//  - a run of 1,000,000 steps: the memory the dashboard holds (next to the
//    same after 100,000 steps) and the time of a smoothing change;
//  - time to open a history of 1,000 runs in the History view, next to the
//    store's own list query.
// Run offscreen: QT_QPA_PLATFORM=offscreen bench_studio
#include <baton/history/sink.h>
#include <baton/history/store.h>
#include <malloc.h>
#include <qcustomplot.h>

#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QTemporaryDir>
#include <QTimer>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/dashboard.h"
#include "loop_lateness.h"
#include "common/event_queue.h"
#include "history/history_view.h"
#include "history/run_table_model.h"

namespace {

using baton_bench::Latency;

// Lateness of a 5 ms timer over `seconds`, with `events_per_s` step events
// streaming into a shown dashboard (0: none).
Latency loop_latency(int events_per_s, double seconds) {
  baton::ui::Dashboard dash;
  dash.resize(1200, 800);
  dash.show();
  auto queue = std::make_shared<baton::ui::EventQueue>();
  baton::ui::EventPump pump(queue);
  QObject::connect(&pump, &baton::ui::EventPump::events, &dash, &baton::ui::Dashboard::add_events);
  pump.start();
  std::atomic<bool> done{false};
  std::thread producer([&] {
    if (events_per_s == 0) return;
    const auto period = std::chrono::microseconds(1000000 / events_per_s);
    auto next = std::chrono::steady_clock::now();
    for (int64_t step = 1; !done; ++step) {
      baton::StepEvent e;
      e.run = "bench";
      e.step = step;
      e.loss = 1.0 / static_cast<double>(step);
      e.samples_per_s = 1000;
      e.wall_time_s = static_cast<double>(step) / events_per_s;
      queue->push(e);
      next += period;
      std::this_thread::sleep_until(next);
    }
  });
  const Latency l = baton_bench::run_loop_measuring_lateness(seconds);
  done = true;
  producer.join();
  return l;
}

// Median of 5 immediate replots of the loss plot holding `points` points.
double replot_ms(int points) {
  baton::ui::Dashboard dash;
  dash.resize(1200, 800);
  dash.show();
  std::vector<baton::Event> events;
  events.reserve(static_cast<size_t>(points));
  for (int i = 1; i <= points; ++i) {
    baton::StepEvent e;
    e.run = "bench";
    e.step = i;
    e.loss = 1.0 / i + 0.01 * static_cast<double>(int64_t{i} * 7919 % 13);
    events.push_back(e);
  }
  dash.add_events(events);
  dash.replot_now();
  std::vector<double> ms;
  QCustomPlot* loss = dash.plot(baton::ui::Dashboard::Plot::kLoss);
  for (int rep = 0; rep < 5; ++rep) {
    QElapsedTimer t;
    t.start();
    loss->replot(QCustomPlot::rpImmediateRefresh);
    ms.push_back(t.nsecsElapsed() / 1e6);
  }
  std::sort(ms.begin(), ms.end());
  std::printf("  (%d points: %d held)\n", points,
              dash.held_points(QStringLiteral("bench"), QStringLiteral("loss/train")));
  return ms[2];
}

// The heap in use (glibc's mallinfo2: small blocks and mmapped ones), in
// MB - what the dashboard holds, unlike RSS, which keeps freed pages.
double rss_mb() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<double>(m.uordblks + m.hblkhd) / (1024.0 * 1024.0);
}

struct LongRun {
  double mb_100k = 0, mb_1m = 0, ingest_s = 0, smoothing_ms = 0;
  int held = 0;
};

// A run of a million step events (every series of a step: loss, accuracy,
// throughput, step time) into a dashboard: the memory it holds after 100k
// and after 1M steps, and the median time of a smoothing change (what a
// slider tick costs).
LongRun long_run() {
  LongRun out;
  baton::ui::Dashboard dash;
  dash.resize(1200, 800);
  dash.show();
  const double base = rss_mb();
  std::vector<baton::Event> batch;
  batch.reserve(10000);
  QElapsedTimer t;
  t.start();
  for (int64_t step = 1; step <= 1000000; ++step) {
    baton::StepEvent e;
    e.run = "long";
    e.step = step;
    e.loss = 1.0 / static_cast<double>(step) + 0.01 * static_cast<double>(step * 7919 % 13);
    e.accuracy = 0.5;
    e.samples_per_s = 1000;
    e.data_ms = e.compute_ms = e.comm_ms = e.optimizer_ms = 0.1;
    e.wall_time_s = 0.001 * static_cast<double>(step);
    batch.push_back(e);
    if (batch.size() == batch.capacity()) {
      dash.add_events(batch);
      batch.clear();
    }
    if (step == 100000) out.mb_100k = rss_mb() - base;
  }
  out.ingest_s = t.nsecsElapsed() / 1e9;
  out.mb_1m = rss_mb() - base;
  out.held = dash.held_points(QStringLiteral("long"), QStringLiteral("loss/train"));
  std::vector<double> ms;
  for (int rep = 0; rep < 5; ++rep) {
    t.restart();
    dash.set_smoothing(rep % 2 ? 0.6 : 0.9);
    ms.push_back(t.nsecsElapsed() / 1e6);
  }
  std::sort(ms.begin(), ms.end());
  out.smoothing_ms = ms[2];
  return out;
}

// A store of `runs` short runs; returns (store list ms, History view open
// ms): the view's constructor until its table holds every run.
std::pair<double, double> open_history(int runs) {
  QTemporaryDir dir;
  const std::string db = dir.filePath(QStringLiteral("runs.db")).toStdString();
  {
    baton::HistorySink sink(db);
    for (int r = 0; r < runs; ++r) {
      baton::RunStartEvent s;
      s.run = "bench-" + std::to_string(r);
      s.name = "bench";
      s.strategy = r % 2 ? "mirrored" : "one_device";
      s.config = {{"name", "bench"}, {"seed", r}};
      sink.emit(s);
      baton::StepEvent e;
      e.run = s.run;
      e.step = 1;
      e.loss = 1;
      sink.emit(e);
      baton::RunEndEvent end;
      end.run = s.run;
      end.status = "completed";
      end.train_loss = 1;
      sink.emit(end);
      sink.flush();
    }
    sink.close();
  }
  QElapsedTimer t;
  t.start();
  {
    const baton::HistoryStore store(db);
    (void)store.list_runs();
  }
  const double list_ms = t.nsecsElapsed() / 1e6;
  baton::ui::StudioContext ctx;
  ctx.history_db = QString::fromStdString(db);
  t.restart();
  baton::ui::HistoryView view(ctx);
  QEventLoop loop;
  QObject::connect(&view, &baton::ui::HistoryView::refreshed, &loop, &QEventLoop::quit);
  if (view.model().rowCount() < runs) loop.exec();
  view.show();
  QCoreApplication::processEvents();
  const double open_ms = t.nsecsElapsed() / 1e6;
  if (view.model().rowCount() != runs)
    std::printf("  (the view shows %d runs, not %d)\n", view.model().rowCount(), runs);
  return {list_ms, open_ms};
}

}  // namespace

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  std::printf("baton-studio responsiveness (%s platform)\n",
              qPrintable(QGuiApplication::platformName()));
  const Latency idle = loop_latency(0, 3.0);
  const Latency busy = loop_latency(1000, 5.0);
  std::printf("\nevent-loop lateness of a 5 ms timer (ms)      p50     p99     max\n");
  std::printf("  idle (anchor)                            %7.2f %7.2f %7.2f\n", idle.p50, idle.p99,
              idle.max);
  std::printf("  1,000 step events/s into the dashboard   %7.2f %7.2f %7.2f\n", busy.p50, busy.p99,
              busy.max);
  const double small = replot_ms(10000);
  const double large = replot_ms(1000000);
  std::printf("\nreplot of the loss plot (ms, median of 5)\n");
  std::printf("  10,000 points (anchor)                   %7.1f\n", small);
  std::printf("  1,000,000 points                         %7.1f\n", large);
  const LongRun lr = long_run();
  std::printf("\na run of 1,000,000 steps in the dashboard (11 series)\n");
  std::printf("  heap held after 100,000 steps (anchor)   %7.1f MB\n", lr.mb_100k);
  std::printf("  heap held after 1,000,000 steps          %7.1f MB\n", lr.mb_1m);
  std::printf("  points held per series                   %7d (cap %d)\n", lr.held,
              baton::ui::Dashboard::kMaxPoints);
  std::printf("  ingest, 1,000,000 step events            %7.2f s\n", lr.ingest_s);
  std::printf("  a smoothing change (median of 5)         %7.2f ms\n", lr.smoothing_ms);
  const auto [list_ms, open_ms] = open_history(1000);
  std::printf("\nopening a history of 1,000 runs (ms)\n");
  std::printf("  the store's list query (anchor)          %7.1f\n", list_ms);
  std::printf("  the History view, table filled and shown %7.1f\n", open_ms);
  return 0;
}
