// The studio under a large run's load: a simulated 64-rank run streams
// step events (every rank's, each with its phases) at a set rate from a
// producer thread, the way a launched run's lines reach the studio: into
// the event queue -> pump -> the live dashboard and the Ranks panel on the
// GUI thread, and into the history (a HistorySink, its writer thread).
// Printed: resident memory early and at the end, the GUI event loop's
// lateness (a 5 ms timer: p50, p99, max) against the 50 ms goal, and the
// events the history holds afterwards against those sent.
//   studio_load [--seconds S] [--rate EVENTS_PER_S] [--ranks N] [--early S] [--check]
// Memory is read at --early (10 s) and at the end, and every 10 s. The
// dashboard holds up to 4,096 points a series (then merges neighbours), so
// memory grows until every series is full and then stays: 64 ranks at
// 10,000 events/s fill theirs in about 26 s. With --check (ctest's short
// run: 8 ranks, full within 4 s) the exit code is 1 when an event is
// missing from the history, or the heap in use less SQLite's grew more
// than 8 MB between the early reading and the end (keeping every event
// would take about 150 bytes each: 15 MB over its 10 s), or SQLite holds
// more than its 64 MB page cache and 8 MB; the lateness is printed, never
// a condition (a figure of a shared machine's load).
// Run offscreen: QT_QPA_PLATFORM=offscreen studio_load
#include <baton/history/sink.h>
#include <baton/history/store.h>
#include <malloc.h>
#include <sqlite3.h>
#include <unistd.h>

#include <QApplication>
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/dashboard.h"
#include "common/event_queue.h"
#include "loop_lateness.h"
#include "train/ranks_panel.h"

namespace {

// The heap in use, MB (glibc's mallinfo2: what is held, unlike the
// resident size, which keeps pages an allocator has not given back).
double heap_mb() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<double>(m.uordblks + m.hblkhd) / 1048576.0;
}

// SQLite's share of the heap, MB: mostly the history writer's page cache,
// which fills up to its set size (64 MB) as the database grows.
double sqlite_mb() {
  sqlite3_int64 now = 0, high = 0;
  sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &now, &high, 0);
  return static_cast<double>(now) / 1048576.0;
}

// Resident set size, MB (/proc/self/statm: pages).
double resident_mb() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / 1048576.0;
}

struct Options {
  double seconds = 60;
  int rate = 10000;
  int ranks = 64;
  double early = 10;  // the first memory reading, s
  bool check = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--seconds" && has_value) {
      o.seconds = std::atof(argv[++i]);
    } else if (a == "--rate" && has_value) {
      o.rate = std::atoi(argv[++i]);
    } else if (a == "--ranks" && has_value) {
      o.ranks = std::atoi(argv[++i]);
    } else if (a == "--early" && has_value) {
      o.early = std::atof(argv[++i]);
    } else if (a == "--check") {
      o.check = true;
    } else {
      std::fprintf(stderr,
                   "studio_load: unknown argument %s (expected --seconds S, --rate N, --ranks N, "
                   "--early S, --check)\n",
                   a.c_str());
      std::exit(2);
    }
  }
  if (!(o.seconds > 0) || o.rate <= 0 || o.ranks <= 0 || !(o.early > 0 && o.early < o.seconds)) {
    std::fprintf(stderr,
                 "studio_load: --seconds, --rate and --ranks must be positive, --early less than "
                 "--seconds\n");
    std::exit(2);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  QApplication app(argc, argv);
  QTemporaryDir dir;
  const std::string db = dir.filePath(QStringLiteral("runs.db")).toStdString();

  baton::ui::Dashboard dash;
  dash.resize(1200, 800);
  dash.show();
  baton::ui::RanksPanel ranks;
  ranks.resize(800, 600);
  ranks.show();
  auto queue = std::make_shared<baton::ui::EventQueue>();
  baton::ui::EventPump pump(queue);
  // What the Train view does with a batch: the dashboard, then each step
  // to the Ranks panel.
  QObject::connect(&pump, &baton::ui::EventPump::events, &dash,
                   [&](const std::vector<baton::Event>& batch) {
                     dash.add_events(batch);
                     for (const auto& e : batch) {
                       if (const auto* s = std::get_if<baton::StepEvent>(&e)) ranks.take_step(*s);
                     }
                   });
  pump.start();
  auto sink = std::make_unique<baton::HistorySink>(db);
  {
    baton::RunStartEvent start;
    start.run = "load";
    start.name = "load";
    start.strategy = "multi_worker_mirrored";
    start.replicas = opt.ranks;
    queue->push(start);
    sink->emit(start);
  }

  std::atomic<bool> done{false};
  std::atomic<int64_t> sent{0};
  std::thread producer([&] {
    // Bursts of one step of every rank, paced to the rate.
    const auto period = std::chrono::nanoseconds(static_cast<int64_t>(1e9 * opt.ranks / opt.rate));
    auto next = std::chrono::steady_clock::now();
    for (int64_t step = 1; !done; ++step) {
      for (int r = 0; r < opt.ranks; ++r) {
        baton::StepEvent e;
        e.run = "load";
        e.step = step;
        e.rank = r;
        e.replica = r;
        e.loss = 2.0 / static_cast<double>(step) + 0.001 * r;
        e.accuracy = 0.5;
        e.samples_per_s = 64.0 * opt.rate;
        e.rank_samples_per_s = 64.0 * opt.rate / opt.ranks;
        e.step_time_ms = 6.0;
        e.data_ms = 0.5;
        e.compute_ms = 3.0 + 0.01 * r;
        e.comm_ms = 2.0;
        e.optimizer_ms = 0.5;
        e.wall_time_s = static_cast<double>(step) * opt.ranks / opt.rate;
        queue->push(e);
        sink->emit(e);
        sent.fetch_add(1, std::memory_order_relaxed);
      }
      next += period;
      std::this_thread::sleep_until(next);
    }
  });

  // The GUI loop's lateness (a 5 ms timer's overshoot); memory readings
  // at its ticks.
  const double early_at = opt.early;
  double early_mb = 0, early_heap = 0, early_sqlite = 0;
  double next_reading = 10;  // a line every 10 s
  const baton_bench::Latency late =
      baton_bench::run_loop_measuring_lateness(opt.seconds, [&](double now_s) {
        if (early_mb == 0 && now_s > early_at) {
          early_mb = resident_mb(), early_heap = heap_mb(), early_sqlite = sqlite_mb();
        }
        if (now_s > next_reading) {
          std::printf("  at %3.0f s: resident %.1f MB, heap in use %.1f MB (SQLite's %.1f MB)\n",
                      next_reading, resident_mb(), heap_mb(), sqlite_mb());
          next_reading += 10;
        }
      });
  const double end_mb = resident_mb(), end_heap = heap_mb(), end_sqlite = sqlite_mb();
  done = true;
  producer.join();
  pump.pump();
  {
    baton::RunEndEvent end;
    end.run = "load";
    end.status = "completed";
    sink->emit(end);
  }
  QElapsedTimer drain;
  drain.start();
  sink->close();
  const double drain_s = static_cast<double>(drain.nsecsElapsed()) / 1e9;
  sink.reset();

  const double p99 = late.p99;
  const baton::HistoryStore store(db, baton::HistoryStore::Open::kReadOnly);
  int64_t recorded = 0;
  store.for_each_sample(
      store.resolve("load"), [&](const baton::MetricSample&) { ++recorded; }, "loss");
  const int64_t n = sent.load();
  std::printf("studio load: %d ranks, %d events/s for %.0f s (%lld step events sent)\n",
              opt.ranks, opt.rate, opt.seconds, static_cast<long long>(n));
  std::printf("  resident memory: %.1f MB at %.0f s, %.1f MB at %.0f s (heap in use: %.1f MB, "
              "%.1f MB, of which SQLite's: %.1f MB, %.1f MB)\n",
              early_mb, early_at, end_mb, opt.seconds, early_heap, end_heap, early_sqlite,
              end_sqlite);
  std::printf("  GUI loop lateness (5 ms timer): p50 %.2f ms, p99 %.2f ms, max %.2f ms; goal p99 "
              "< 50 ms: %s\n",
              late.p50, p99, late.max, p99 < 50 ? "met" : "NOT met");
  std::printf("  history: %lld of %lld step events recorded (the writer finished %.2f s after "
              "the last)\n",
              static_cast<long long>(recorded), static_cast<long long>(n), drain_s);
  if (!opt.check) return 0;
  int failed = 0;
  if (recorded != n) {
    std::printf("FAIL: %lld step events are not in the history\n",
                static_cast<long long>(n - recorded));
    failed = 1;
  }
  // Bounded: once every series is full, what the dashboard, the Ranks
  // panel and the history's queue hold must not grow with the run; SQLite's
  // page cache fills to its set size and no further.
  const double bound_mb = 8;
  const double grew = (end_heap - end_sqlite) - (early_heap - early_sqlite);
  if (grew > bound_mb) {
    std::printf("FAIL: the heap in use (less SQLite's) grew %.1f MB between %.0f s and %.0f s "
                "(bound %.0f MB)\n",
                grew, early_at, opt.seconds, bound_mb);
    failed = 1;
  }
  if (end_sqlite > 64 + bound_mb) {
    std::printf("FAIL: SQLite holds %.1f MB, past its page cache's 64 MB\n", end_sqlite);
    failed = 1;
  }
  return failed;
}
