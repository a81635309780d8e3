// The run history's speed: ingest of a 1-million-sample run through the
// HistorySink (the path a training run takes), listing 1,000 runs, and a
// downsampled 1-million-point series. Prints figures next to the goals;
// never fails on a time.
//
//   bench_history [DIR]   (default: a temporary directory, removed after)
#include <baton/history/sink.h>
#include <baton/history/store.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// VmHWM of this process, in MB.
double peak_rss_mb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  }
  return 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::string dir;
  bool owned = false;
  if (argc > 1) {
    dir = argv[1];
    fs::create_directories(dir);
  } else {
    std::string tmpl = (fs::temp_directory_path() / "baton-bench-history-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return 1;
    dir = tmpl;
    owned = true;
  }
  const std::string db = dir + "/runs.db";
  fs::remove(db);
  fs::remove(db + "-wal");
  fs::remove(db + "-shm");

  // 1. Ingest: 100,000 step events x 11 metrics = 1,100,000 samples, timed
  // from the first emit to the end of the final commit.
  constexpr int64_t kSteps = 100000;
  double ingest_s = 0;
  {
    baton::HistorySink sink(db);
    baton::RunStartEvent start;
    start.run = "bench-ingest";
    start.name = "bench-ingest";
    const auto t0 = Clock::now();
    sink.emit(start);
    for (int64_t s = 1; s <= kSteps; ++s) {
      baton::StepEvent e;
      e.run = "bench-ingest";
      e.step = s;
      e.loss = 1.0 / std::sqrt(static_cast<double>(s));
      e.accuracy = 0.5;
      e.lr = 1e-3;
      e.grad_norm = 1.0;
      e.samples_per_s = 1e5;
      e.step_time_ms = 0.2;
      e.wall_time_s = 0.0002 * static_cast<double>(s);
      sink.emit(e);
    }
    sink.flush();
    ingest_s = since(t0);
    sink.close();
  }
  const double samples = static_cast<double>(kSteps) * 11;

  // 2. List 1,000 runs (999 more, short, with final metrics and a tag).
  {
    baton::HistoryRunInfo info;
    info.tags = {"bench"};
    baton::HistorySink sink(db, info);
    for (int i = 0; i < 999; ++i) {
      const std::string id = "bench-run-" + std::to_string(i);
      baton::RunStartEvent start;
      start.run = id;
      start.name = "bench-run";
      start.strategy = i % 2 ? "mirrored" : "one_device";
      start.config = {{"seed", i}, {"optimizer", {{"lr", 0.001 * (i % 7 + 1)}}}};
      sink.emit(start);
      baton::StepEvent e;
      e.run = id;
      e.step = 1;
      sink.emit(e);
      baton::RunEndEvent end;
      end.run = id;
      end.status = "completed";
      end.train_loss = 0.1;
      sink.emit(end);
    }
    sink.close();
  }
  std::vector<double> list_ms;
  size_t listed = 0;
  {
    baton::HistoryStore store(db, baton::HistoryStore::Open::kExisting);
    for (int rep = 0; rep < 7; ++rep) {
      const auto t0 = Clock::now();
      listed = store.list_runs().size();
      list_ms.push_back(since(t0) * 1e3);
    }
  }

  // 3. A downsampled series of 1,000,000 points (one metric, one sample a
  // step), into 1,000 and 2,000 buckets, from a fresh connection each time
  // (what a plot opening a run pays).
  {
    baton::HistorySink sink(db);
    baton::RunStartEvent start;
    start.run = "bench-series";
    sink.emit(start);
    // A million step events (11 M samples in all); "loss" is the
    // 1-million-point series that is plotted.
    for (int64_t s = 1; s <= 1000000; ++s) {
      baton::StepEvent e;
      e.run = "bench-series";
      e.step = s;
      e.loss = std::sin(static_cast<double>(s) * 1e-4) + (s == 777777 ? 50.0 : 0.0);
      sink.emit(e);
    }
    baton::RunEndEvent end;
    end.run = "bench-series";
    end.step = 1000000;
    end.status = "completed";
    sink.emit(end);
    sink.close();
  }
  std::vector<double> ds1000, ds2000, ds_zoom;
  size_t buckets = 0;
  double spike = 0;
  for (int rep = 0; rep < 7; ++rep) {
    baton::HistoryStore store(db, baton::HistoryStore::Open::kExisting);
    const int64_t run = store.resolve("bench-series");
    auto t0 = Clock::now();
    const auto b = store.downsample(run, "loss", 1, 1000000, 1000);
    ds1000.push_back(since(t0) * 1e3);
    buckets = b.size();
    for (const auto& x : b) spike = std::max(spike, x.max);
    t0 = Clock::now();
    store.downsample(run, "loss", 1, 1000000, 2000);
    ds2000.push_back(since(t0) * 1e3);
    t0 = Clock::now();
    store.downsample(run, "loss", 333333, 433333, 1500);  // a zoomed-in window
    ds_zoom.push_back(since(t0) * 1e3);
  }

  // 4. history export --format csv of the 11-million-sample run, to
  // /dev/null: time and the peak RSS it adds (the high-water mark is reset
  // first through /proc/self/clear_refs).
  double export_s = 0, export_rss_mb = 0;
  int64_t exported = 0;
  {
    const baton::HistoryStore store(db, baton::HistoryStore::Open::kReadOnly);
    const int64_t run = store.resolve("bench-series");
    std::FILE* sink = std::fopen("/dev/null", "w");
    { std::ofstream("/proc/self/clear_refs") << "5"; }
    const double rss0 = peak_rss_mb();
    const auto t0 = Clock::now();
    baton::export_run_csv(store, run, sink);
    export_s = since(t0);
    export_rss_mb = peak_rss_mb() - rss0;
    std::fclose(sink);
    store.for_each_sample(
        run, [&](const baton::MetricSample&) { ++exported; }, "loss");
    exported *= 11;
  }

  // 5. Deleting that run (11 M samples) while another run is recorded:
  // the delete's time, and the recorder's longest wait for a commit (it
  // flushes every 20 ms). The delete goes in transactions of 20,000 rows.
  double delete_s = 0, worst_flush_ms = 0, flush_anchor_ms = 0;
  int64_t recorded = 0;
  {
    // The recorder's flush alone first (the anchor).
    auto record_for = [&](const std::string& id, const std::function<bool()>& go_on,
                          double* worst) {
      baton::HistorySink sink(db);
      baton::RunStartEvent start;
      start.run = id;
      sink.emit(start);
      int64_t s = 0;
      while (go_on()) {
        for (int k = 0; k < 50; ++k) {
          baton::StepEvent e;
          e.run = id;
          e.step = ++s;
          e.loss = 1.0;
          sink.emit(e);
        }
        const auto t0 = Clock::now();
        sink.flush();
        *worst = std::max(*worst, since(t0) * 1e3);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      sink.close();
      return s;
    };
    const auto anchor_end = Clock::now() + std::chrono::seconds(2);
    record_for(
        "bench-alone", [&] { return Clock::now() < anchor_end; }, &flush_anchor_ms);
    std::atomic<bool> deleting{true};
    std::thread remover([&] {
      baton::HistoryStore store(db, baton::HistoryStore::Open::kExisting);
      const auto t0 = Clock::now();
      store.remove_run(store.resolve("bench-series"));
      delete_s = since(t0);
      deleting = false;
    });
    recorded = record_for(
        "bench-meanwhile", [&] { return deleting.load(); }, &worst_flush_ms);
    remover.join();
  }

  std::printf("# Baton run history benchmark (%s)\n", db.c_str());
  std::printf("%-46s %14s %16s\n", "measure", "result", "goal");
  std::printf("%-46s %10.0f /s %16s\n", "ingest, 1,100,000 metric samples (HistorySink)",
              samples / ingest_s, ">= 500000 /s");
  std::printf("%-46s %11.2f ms %16s\n",
              ("list " + std::to_string(listed) + " runs (median of 7)").c_str(), median(list_ms),
              "< 100 ms");
  std::printf("%-46s %11.2f ms %16s\n", "downsample 1 M points -> 1000 buckets (median)",
              median(ds1000), "< 50 ms");
  std::printf("%-46s %11.2f ms %16s\n", "downsample 1 M points -> 2000 buckets (median)",
              median(ds2000), "< 50 ms");
  std::printf("%-46s %11.2f ms %16s\n", "downsample 100 k-step window -> 1500 (median)",
              median(ds_zoom), "< 50 ms");
  std::printf("%-46s %11.1f MB %16s\n",
              ("export csv, " + std::to_string(exported) + " samples: peak RSS added").c_str(),
              export_rss_mb, "bounded");
  std::printf("%-46s %10.0f /s\n", "export csv rate", static_cast<double>(exported) / export_s);
  std::printf("%-46s %11.2f s\n", "delete the 11,000,000-sample run", delete_s);
  std::printf("%-46s %11.1f ms %16s\n", "  a recorder's longest commit meanwhile", worst_flush_ms,
              "no failure");
  std::printf("%-46s %11.1f ms\n", "  the same recorder alone (anchor)", flush_anchor_ms);
  std::printf("(%lld steps recorded during the delete)\n", static_cast<long long>(recorded));
  std::printf("(ingest took %.2f s; %zu buckets; spike of 50 kept: %s; database %.1f MB)\n",
              ingest_s, buckets, spike > 50.0 ? "yes" : "NO",
              static_cast<double>(fs::file_size(db)) / 1e6);
  if (owned) fs::remove_all(dir);
  return 0;
}
