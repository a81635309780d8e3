// The studio's loaders: what the History view and the replay run off the
// GUI thread (QtConcurrent) while a run is being recorded - the list with
// the interrupted rule, a run loaded as events for the overlay, a replay
// opened on one thread and feeding the event queue from its own. The Qt
// plumbing around them (QFutureWatcher, the pump's timer) stays on the GUI
// thread; these are the parts that meet the writer's thread. Also built
// under ThreadSanitizer (test_studio_loaders_tsan) from their sources.
#include <gtest/gtest.h>

#include <baton/history/replay.h>
#include <baton/history/sink.h>
#include <baton/history/store.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "common/event_queue.h"
#include "history/run_loader.h"
#include "history_test_util.h"

namespace baton {
namespace {

using namespace std::chrono_literals;
using history_test::TempDir;

// Records `steps` steps of run `uid` on its own thread, as a live run does.
// Halfway, with that half committed, it calls `midway` (which may hold it
// until a reader has read).
class LiveRun {
 public:
  LiveRun(const std::string& db, const std::string& uid, int steps,
          std::function<void()> midway = {})
      : sink_(db, {}, options()), uid_(uid) {
    RunStartEvent start;
    start.run = uid;
    start.name = uid;
    sink_.emit(start);
    sink_.flush();
    thread_ = std::thread([this, steps, midway = std::move(midway)] {
      for (int i = 1; i <= steps; ++i) {
        StepEvent e;
        e.run = uid_;
        e.step = i;
        e.loss = 1.0 / i;
        e.samples_per_s = 100.0 + i;
        sink_.emit(e);
        if (i == steps / 2 && midway) {
          sink_.flush();
          midway();
        }
      }
      sink_.flush();
      writing_ = false;
    });
  }
  ~LiveRun() { finish(); }
  bool writing() const { return writing_.load(); }
  void finish() {
    if (thread_.joinable()) thread_.join();
  }
  void close() {
    finish();
    RunEndEvent end;
    end.run = uid_;
    end.status = "completed";
    sink_.emit(end);
    sink_.close();
  }

 private:
  static HistorySinkOptions options() {
    HistorySinkOptions o;
    o.commit_every_ms = 2;
    o.commit_every_rows = 64;
    return o;
  }
  HistorySink sink_;
  std::string uid_;
  std::atomic<bool> writing_{true};
  std::thread thread_;
};

int64_t step_events(const ui::LoadedRun& run, int64_t* last_step, bool* ordered) {
  int64_t n = 0, last = 0;
  *ordered = true;
  for (const Event& e : run.events) {
    if (const auto* s = std::get_if<StepEvent>(&e)) {
      if (s->step <= last) *ordered = false;
      last = s->step;
      ++n;
    }
  }
  *last_step = last;
  return n;
}

// The History view's two loaders at once, as a user who refreshes the list
// and overlays the run being recorded would start them: each sees a run
// that only grows, in whole steps, and never marks the live run
// interrupted (its process is this one).
TEST(StudioLoaders, ListAndOverlayLoadersReadWhileARunIsRecorded) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  constexpr int kSteps = 4000;
  std::atomic<int> failures{0};
  std::atomic<int64_t> lists{0}, loads{0}, partial{0};
  // Halfway the writer waits for a whole load that began after its first
  // half was committed (two more than when it stopped): the loads surely
  // overlap the recording, however the threads are scheduled.
  LiveRun live(db, "live", kSteps, [&loads] {
    const int64_t base = loads.load();
    while (loads.load() < base + 2) std::this_thread::yield();
  });
  const int64_t id = HistoryStore(db, HistoryStore::Open::kReadOnly).resolve("live");

  std::thread lister([&] {
    do {
      mark_interrupted_runs(db);  // the first list of a studio's life
      const HistoryStore store(db, HistoryStore::Open::kReadOnly);
      const std::vector<RunRecord> runs = store.list_runs();
      if (runs.size() != 1 || runs[0].status != "running") failures.fetch_add(1);
      lists.fetch_add(1);
    } while (live.writing());
  });
  int64_t seen = 0;
  std::thread overlay([&] {
    bool done = false;
    while (!done) {
      done = !live.writing();  // once more after the writer finished
      const ui::LoadedRun run = ui::load_run_events(db, id);
      int64_t last = 0;
      bool ordered = false;
      const int64_t n = step_events(run, &last, &ordered);
      // Whole steps, in order, never fewer than the load before.
      if (!ordered || n < seen || last != n || run.uid != "live") failures.fetch_add(1);
      if (n > 0 && n < kSteps) partial.fetch_add(1);
      seen = n;
      loads.fetch_add(1);
    }
  });
  lister.join();
  overlay.join();
  live.close();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(seen, kSteps);
  EXPECT_GT(partial.load(), 0);  // a load saw the run part-way
  EXPECT_GT(lists.load(), 0);
  EXPECT_EQ(HistoryStore(db).run(id).status, "completed");
}

// The replay as ReplayController runs it: the player is made on a pool
// thread, handed to the GUI thread, and plays on its own thread into the
// event queue, which the GUI thread drains (pausing and seeking on the
// way). A seek as the scrubber makes it (hold, drop what is queued,
// everything before the step at once, then on at the pace): every step
// arrives once, in order.
TEST(StudioLoaders, AReplayOpenedOffTheGuiThreadFeedsTheQueue) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  constexpr int kSteps = 600;
  {
    LiveRun run(db, "done", kSteps);
    run.close();
  }
  auto queue = std::make_shared<ui::EventQueue>();
  std::shared_ptr<ReplayPlayer> player;
  std::thread opener([&] {
    const HistoryStore store(db, HistoryStore::Open::kReadOnly);
    const RunRecord rec = store.run(store.resolve("done"));
    player = std::make_shared<ReplayPlayer>(
        db, rec.uid, [queue](const Event& e) { queue->push(e); }, 1.0);
  });
  opener.join();
  ASSERT_NE(player, nullptr);
  player->set_speed(1e6);
  player->start();
  player->pause();
  queue->drain();  // what came before the seek is dropped, as the view does
  player->fast_forward(250, false);
  int64_t next = 1, wrong = 0;
  auto take = [&] {
    for (const Event& e : queue->drain()) {
      if (const auto* s = std::get_if<StepEvent>(&e)) {
        if (s->step != next) ++wrong;
        next = s->step + 1;
      }
    }
  };
  while (!player->finished()) {
    take();
    std::this_thread::yield();
  }
  ASSERT_TRUE(player->wait_finished(10s));
  take();
  EXPECT_EQ(player->error(), "");
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(next, kSteps + 1);
}

}  // namespace
}  // namespace baton
