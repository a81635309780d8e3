// Replay: a recorded run comes back as the events the live run emitted, in
// order, with seek and a paced, stoppable player.
#include <baton/core/error.h>
#include <baton/history/replay.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "history_test_util.h"

namespace baton {
namespace {

using history_test::TempDir;
using Clock = std::chrono::steady_clock;

nlohmann::json comparable(const Event& e) {
  nlohmann::json j = to_json(e);
  j.erase("time");         // not stored
  j.erase("wall_time_s");  // compared with a tolerance (a resumed clock is shifted)
  return j;
}

double wall_of(const Event& e) {
  if (const auto* s = std::get_if<StepEvent>(&e)) return s->wall_time_s;
  if (const auto* s = std::get_if<RunEndEvent>(&e)) return s->wall_time_s;
  return 0;
}

int64_t step_of(const Event& e, int64_t last) {
  if (const auto* s = std::get_if<StepEvent>(&e)) return s->step;
  if (const auto* s = std::get_if<EpochEvent>(&e)) return s->step;
  if (const auto* s = std::get_if<LinkEvent>(&e)) return s->step;
  if (const auto* s = std::get_if<CheckpointEvent>(&e)) return s->step;
  if (const auto* s = std::get_if<SampleEvent>(&e)) return s->step;
  if (const auto* s = std::get_if<DeviceEvent>(&e)) return s->step;
  if (const auto* s = std::get_if<RunStartEvent>(&e)) return s->start_step;
  if (const auto* s = std::get_if<RunEndEvent>(&e)) return s->step;
  return last;
}

void expect_same(const std::vector<Event>& want, const std::vector<Event>& got) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(comparable(got[i]), comparable(want[i])) << "event " << i;
    EXPECT_NEAR(wall_of(got[i]), wall_of(want[i]), 1e-9) << "event " << i;
  }
}

std::vector<Event> drain(HistoryReplay& r) {
  std::vector<Event> out;
  while (auto e = r.next()) out.push_back(e->event);
  return out;
}

// A log emitted before run_start is recorded just after it.
std::vector<Event> recorded_order(std::vector<Event> emitted) {
  if (emitted.size() > 1 && std::holds_alternative<LogEvent>(emitted[0])) {
    std::swap(emitted[0], emitted[1]);
  }
  return emitted;
}

TEST(HistoryReplay, GivesBackTheEventsOfARunInOrder) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  // 20000 steps: several read chunks, with epochs, links and checkpoints.
  const auto rec = history_test::record_run(db, "replayed", 20000, 7, "completed");
  HistoryReplay replay(db, "replayed");
  EXPECT_EQ(replay.run().uid, "replayed");
  expect_same(recorded_order(rec.events), drain(replay));
  EXPECT_FALSE(replay.next());
  EXPECT_THROW(HistoryReplay(db, "nope"), InputError);
}

TEST(HistoryReplay, SeekGoesToTheFirstEventAtOrAfterAStep) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  const auto rec = history_test::record_run(db, "seek", 9000, 3, "failed");
  const std::vector<Event> all = recorded_order(rec.events);
  HistoryReplay replay(db, "seek");
  for (int64_t target : {4500, 1, 8999, 4097, 9000}) {
    replay.seek(target);
    std::vector<Event> want;
    int64_t last = 0;
    bool in = false;
    for (size_t i = 1; i < all.size(); ++i) {  // after run_start
      last = step_of(all[i], last);
      in = in || last >= target;
      if (in) want.push_back(all[i]);
    }
    expect_same(want, drain(replay));
  }
  replay.seek(0);  // the beginning, run_start included
  expect_same(all, drain(replay));
}

TEST(HistoryReplay, AResumedRunReplaysBothAttemptsInRecordOrder) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  std::vector<Event> want;
  const nlohmann::json config = {{"name", "res"}};
  auto emit_steps = [&](HistorySink& sink, int64_t from, int64_t to) {
    for (int64_t s = from; s <= to; ++s) {
      StepEvent e;
      e.run = "res";
      e.step = s;
      e.loss = 1.0 / static_cast<double>(s);
      e.wall_time_s = 0.01 * static_cast<double>(s - from + 1);
      sink.emit(e);
      want.push_back(e);
    }
  };
  {
    HistorySink first(db);
    RunStartEvent start;
    start.run = "res";
    start.config = config;
    first.emit(start);
    want.push_back(start);
    emit_steps(first, 1, 5000);  // then "dies": no run_end
    first.close();
  }
  {
    HistorySink second(db);
    RunStartEvent start;
    start.run = "res";
    start.config = {{"name", "res"}, {"train", {{"epochs", 2}}}};  // resumed with a change
    start.start_step = 4000;                                       // the last checkpoint
    second.emit(start);
    want.push_back(start);
    emit_steps(second, 4001, 9000);
    RunEndEvent end;
    end.run = "res";
    end.status = "completed";
    end.step = 9000;
    second.emit(end);
    want.push_back(end);
    second.close();
  }
  HistoryReplay replay(db, "res");
  expect_same(want, drain(replay));
  HistoryStore store(db);
  EXPECT_EQ(store.run(store.resolve("res")).config["train"]["epochs"], 2);  // the newest
  const auto events = store.events(store.resolve("res"));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "restart");
  EXPECT_EQ(events[0].message, "resumed from step 4000");
}

TEST(HistoryReplay, ThePlayerKeepsThePaceAndStopsAtOnce) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  {
    HistorySink sink(db);
    RunStartEvent start;
    start.run = "paced";
    sink.emit(start);
    for (int i = 1; i <= 30; ++i) {
      StepEvent e;
      e.run = "paced";
      e.step = i;
      e.wall_time_s = 0.01 * i;  // 0.3 s of run
      sink.emit(e);
    }
    StepEvent late;
    late.run = "paced";
    late.step = 31;
    late.wall_time_s = 1000.0;  // a long gap
    sink.emit(late);
    sink.close();
  }
  std::mutex mu;
  std::vector<Clock::time_point> times;
  std::vector<int64_t> steps;
  auto on_event = [&](const Event& e) {
    std::lock_guard<std::mutex> lk(mu);
    times.push_back(Clock::now());
    steps.push_back(std::holds_alternative<StepEvent>(e) ? std::get<StepEvent>(e).step : 0);
  };
  {
    ReplayPlayer player(db, "paced", on_event, /*speed=*/1.0);
    player.start();
    // Wait (on the player's condition) for step 30, then stop in the gap.
    for (;;) {
      {
        std::lock_guard<std::mutex> lk(mu);
        if (steps.size() >= 31) break;
      }
      ASSERT_FALSE(player.wait_finished(std::chrono::milliseconds(20)));
    }
    const auto t0 = Clock::now();
    player.stop();
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 5.0);
    std::lock_guard<std::mutex> lk(mu);
    ASSERT_EQ(steps.size(), 31u);  // run_start + 30 steps, not the late one
    // 0.29 s of recorded time between step 1 and step 30 at speed 1.
    EXPECT_GE(std::chrono::duration<double>(times[30] - times[1]).count(), 0.25);
  }
  // As fast as possible, then a seek after the end replays from there.
  times.clear();
  steps.clear();
  ReplayPlayer fast(db, "paced", on_event, /*speed=*/0);
  fast.start();
  ASSERT_TRUE(fast.wait_finished(std::chrono::seconds(30)));
  EXPECT_EQ(fast.error(), "");
  {
    std::lock_guard<std::mutex> lk(mu);
    EXPECT_EQ(steps.size(), 32u);  // no run_end: the run never ended
    steps.clear();
  }
  fast.seek(29);
  for (;;) {
    {
      std::lock_guard<std::mutex> lk(mu);
      if (steps.size() >= 3) break;
    }
    fast.wait_finished(std::chrono::milliseconds(20));
  }
  fast.stop();
  EXPECT_EQ(steps, (std::vector<int64_t>{29, 30, 31}));
}

// Pause holds before the next event and resume goes on from exactly there
// (the studio used to restart from the next step and skip what was left of
// the paused one); fast_forward shows everything before a step at once and
// can hold there. Every recorded event arrives once, in order.
TEST(HistoryReplay, PauseAndFastForwardLoseAndRepeatNothing) {
  TempDir tmp;
  const std::string db = tmp.path("runs.db");
  history_test::record_run(db, "held", 3000, 1, "completed");
  std::vector<Event> want;
  {
    HistoryReplay all(db, "held");
    want = drain(all);
  }
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Event> got;
  auto on_event = [&](const Event& e) {
    std::lock_guard<std::mutex> lk(mu);
    got.push_back(e);
    cv.notify_all();
  };
  auto wait_for = [&](size_t n) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(30), [&] { return got.size() >= n; });
  };
  // 3 s of recorded time at 1x: paused long before the end.
  ReplayPlayer player(db, "held", on_event, /*speed=*/1.0);
  player.start();
  ASSERT_TRUE(wait_for(200));
  player.pause();
  size_t held = 0;
  {
    std::lock_guard<std::mutex> lk(mu);
    held = got.size();
  }
  // Nothing arrives while paused (the player waits on its condition, so a
  // short look is enough to see it hold).
  EXPECT_FALSE(player.wait_finished(std::chrono::milliseconds(100)));
  {
    std::lock_guard<std::mutex> lk(mu);
    EXPECT_EQ(got.size(), held);
  }
  player.set_speed(0);
  player.resume();
  ASSERT_TRUE(player.wait_finished(std::chrono::seconds(30)));
  {
    std::lock_guard<std::mutex> lk(mu);
    expect_same(want, got);
    got.clear();
  }
  // Fast forward to step 1500 and hold: the events before it, at once.
  player.fast_forward(1500, /*then_pause=*/true);
  std::vector<Event> before;
  for (const Event& e : want) {
    if (std::holds_alternative<StepEvent>(e) && std::get<StepEvent>(e).step >= 1500) break;
    before.push_back(e);
  }
  ASSERT_TRUE(wait_for(before.size()));
  EXPECT_FALSE(player.wait_finished(std::chrono::milliseconds(100)));
  {
    std::lock_guard<std::mutex> lk(mu);
    expect_same(before, got);
  }
  player.resume();
  ASSERT_TRUE(player.wait_finished(std::chrono::seconds(30)));
  std::lock_guard<std::mutex> lk(mu);
  expect_same(want, got);
}

}  // namespace
}  // namespace baton
