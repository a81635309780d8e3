// The timeline recorder (core/timeline.h), the clock alignment between
// processes, and the Chrome trace made from a record
// (telemetry/chrome_trace.h).
#include <baton/comm/local.h>
#include <baton/core/error.h>
#include <baton/core/timeline.h>
#include <baton/telemetry/chrome_trace.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <set>
#include <thread>
#include <vector>

#include "comm_test_util.h"

namespace baton {
namespace {

TEST(Timeline, RecordsSpansFromSeveralThreadsAndCountsWhatDidNotFit) {
  Timeline tl(100);
  tl.set_step(7);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&tl, t] {
      for (int i = 0; i < 30; ++i) {
        const int64_t a = tl.now_ns();
        tl.record("work", "compute", timeline_lane(TimelineLane::kReplica, t), -1, a, a + 5, 0, i);
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto spans = tl.spans();
  ASSERT_EQ(spans.size(), 100u);
  EXPECT_EQ(tl.dropped(), 20);
  std::set<std::pair<int32_t, int32_t>> seen;
  for (const auto& s : spans) {
    EXPECT_EQ(s.step, 7) << "a span recorded with step -1 takes the timeline's step";
    EXPECT_EQ(s.duration_ns, 5);
    EXPECT_TRUE(seen.insert({s.lane, s.index}).second) << "a slot was written twice";
  }
}

TEST(Timeline, AScopeTimesWhatItEncloses) {
  Timeline tl(4);
  {
    const TimelineScope span(&tl, "checkpoint", "io", timeline_lane(TimelineLane::kStepLoop), 3,
                             1234);
    const int64_t until = tl.now_ns() + 2'000'000;
    while (tl.now_ns() < until) {
    }
  }
  const TimelineScope nothing(nullptr, "x", "y", 1, 1);  // no timeline: no effect
  const auto spans = tl.spans();
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_STREQ(spans[0].name, "checkpoint");
  EXPECT_EQ(spans[0].step, 3);
  EXPECT_EQ(spans[0].num_bytes, 1234);
  EXPECT_GE(spans[0].duration_ns, 2'000'000);
}

// Three "processes" (threads on a local group) whose clocks are seconds
// apart: each finds its offset to rank 0 within its best round trip.
TEST(ClockOffset, FindsAKnownSkewBetweenRanks) {
  CommOptions o;
  LocalGroup g(3, o);
  std::vector<ClockOffset> found(3);
  const auto base = std::chrono::steady_clock::now();
  on_ranks<LocalGroup, Communicator>(g, [&](Communicator& c) {
    const int64_t skew = int64_t{c.rank()} * 3'000'000'000 + (c.rank() == 2 ? 17'000 : 0);
    found[static_cast<size_t>(c.rank())] = clock_offset_over(c, 0, [&] {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(
                 std::chrono::steady_clock::now() - base)
                 .count() +
             skew;
    });
  });
  EXPECT_EQ(found[0].offset_ns, 0);
  for (int r = 1; r < 3; ++r) {
    const int64_t want = -(int64_t{r} * 3'000'000'000 + (r == 2 ? 17'000 : 0));
    const auto& f = found[static_cast<size_t>(r)];
    EXPECT_GT(f.round_trip_ns, 0);
    EXPECT_LE(std::llabs(f.offset_ns - want), f.round_trip_ns / 2 + 1000)
        << "rank " << r << ": offset " << f.offset_ns << " ns, want " << want << " ns (round trip "
        << f.round_trip_ns << " ns)";
  }
}

TEST(GatherStrings, EveryRanksBytesReachTheRootInRankOrder) {
  CommOptions o;
  LocalGroup g(3, o);
  std::vector<std::string> got;
  on_ranks<LocalGroup, Communicator>(g, [&](Communicator& c) {
    // Lengths that do not fill the last float, and bytes of every value.
    std::string mine(static_cast<size_t>(5 + c.rank() * 3), '\0');
    for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<char>(c.rank() * 97 + i * 31);
    auto all = gather_strings(c, mine, 1);
    if (c.rank() == 1) {
      got = std::move(all);
    } else {
      EXPECT_TRUE(all.empty());
    }
  });
  ASSERT_EQ(got.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    const std::string& s = got[static_cast<size_t>(r)];
    ASSERT_EQ(s.size(), static_cast<size_t>(5 + r * 3));
    for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(s[i], static_cast<char>(r * 97 + i * 31));
  }
}

nlohmann::json two_rank_record() {
  Timeline a(8), b(8);
  a.record("step", "step", timeline_lane(TimelineLane::kStepLoop), 0, 1000, 9000);
  a.record("allreduce", "comm", timeline_lane(TimelineLane::kReplicaComm, 0), 0, 2000, 4000, 4096,
           0);
  b.record("step", "step", timeline_lane(TimelineLane::kStepLoop), 0, 500, 8000);
  return timeline_record({timeline_part(b, 1, "hostB", 700, 300), timeline_part(a, 0, "hostA", 0, 0)},
                         1.7e9, "test");
}

TEST(ChromeTrace, ProcessesThreadsAndCompleteEventsOnTheChiefsClock) {
  const nlohmann::json record = two_rank_record();
  ASSERT_EQ(record["ranks"].size(), 2u);
  EXPECT_EQ(record["ranks"][0]["rank"], 0) << "parts are sorted by rank";
  const nlohmann::json trace = chrome_trace(record);
  ASSERT_TRUE(trace["traceEvents"].is_array());
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  int complete = 0;
  std::set<std::string> process_names, thread_names;
  for (const auto& e : trace["traceEvents"]) {
    ASSERT_TRUE(e["pid"].is_number_integer());
    const std::string ph = e["ph"];
    if (ph == "M") {
      if (e["name"] == "process_name") process_names.insert(e["args"]["name"]);
      if (e["name"] == "thread_name") thread_names.insert(e["args"]["name"]);
      continue;
    }
    ASSERT_EQ(ph, "X");
    ++complete;
    ASSERT_TRUE(e["tid"].is_number_integer());
    ASSERT_TRUE(e["ts"].is_number());
    ASSERT_TRUE(e["dur"].is_number());
    if (e["pid"] == 1) {
      // Rank 1's span moved by its offset: (500 + 700) ns = 1.2 us.
      EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1.2);
      EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 7.5);
    }
    if (e["name"] == "allreduce") {
      EXPECT_EQ(e["args"]["bytes"], 4096);
      EXPECT_EQ(e["args"]["bucket"], 0);
      EXPECT_EQ(e["cat"], "comm");
    }
  }
  EXPECT_EQ(complete, 3);
  EXPECT_EQ(process_names, (std::set<std::string>{"rank 0 (hostA)", "rank 1 (hostB)"}));
  EXPECT_EQ(thread_names, (std::set<std::string>{"step loop", "replica 0 allreduce"}));
}

TEST(ChromeTrace, AMalformedRecordNamesTheField) {
  nlohmann::json r = two_rank_record();
  r["ranks"][1]["spans"][0][4] = "long";
  try {
    (void)chrome_trace(r);
    FAIL() << "accepted a string duration";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("ranks[1].spans[0][4]"), std::string::npos) << e.what();
  }
  nlohmann::json v = two_rank_record();
  v["version"] = 2;
  EXPECT_THROW((void)chrome_trace(v), RuntimeError);
  nlohmann::json n = two_rank_record();
  n["ranks"][0]["spans"][0][0] = 9;
  EXPECT_THROW((void)chrome_trace(n), RuntimeError);
}

}  // namespace
}  // namespace baton
