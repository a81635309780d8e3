// Timelines across MPI ranks: the chief's one event holds every rank's
// spans on its own clock. A collective cannot end on one rank before it
// started on another, so each bucket's allreduce must overlap across ranks
// once the clocks are aligned - within the alignment's stated error.
// Run by ctest under mpiexec -n 2 and 3.
#include <baton/comm/mpi.h>
#include <baton/telemetry/chrome_trace.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/trainer.h>
#include <gtest/gtest.h>

#include "../engine/strategy_test_config.h"

#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <map>

namespace baton {
namespace {

struct Span {
  std::string name;
  int64_t lane, step, start, end, index;
};

nlohmann::json run(const nlohmann::json& doc) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  Telemetry t;
  nlohmann::json record;
  int events = 0;
  t.add(std::make_shared<CallbackSink>([&](const Event& e) {
    if (const auto* tl = std::get_if<TimelineEvent>(&e)) {
      record = tl->trace;
      ++events;
    }
  }));
  TrainOptions opt;
  opt.run_id = "mpi-timeline";
  opt.timeline = true;
  Trainer trainer(parse_run_config(doc, "timeline.json"), registry, t, opt);
  (void)trainer.run();
  EXPECT_EQ(events, trainer.strategy().is_chief() ? 1 : 0) << "the chief alone emits it";
  return record;
}

std::map<int64_t, std::vector<Span>> spans_by_rank(const nlohmann::json& record) {
  std::map<int64_t, std::vector<Span>> out;
  for (const auto& part : record["ranks"]) {
    auto& v = out[part["rank"].get<int64_t>()];
    for (const auto& s : part["spans"]) {
      const int64_t start = s[3];
      v.push_back({part["names"][s[0].get<size_t>()][0].get<std::string>(), s[1], s[2], start,
                   start + s[4].get<int64_t>(), s[6]});
    }
  }
  return out;
}

TEST(TimelineMpi, EveryRanksBucketsOverlapOnTheChiefsClock) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const nlohmann::json record =
      run(equivalence_config({{"type", "multi_worker_mirrored"},
                              {"allreduce", {{"algorithm", "ring"}, {"bucket_mb", 0.0005}}}},
                             {{"type", "sgd"}, {"lr", 0.05}}, 30));
  if (rank != 0) return;
  ASSERT_EQ(record["ranks"].size(), static_cast<size_t>(size));
  int64_t slack = 0;  // the alignment's error bound: half the worst best round trip
  for (const auto& part : record["ranks"]) {
    slack = std::max(slack, part["round_trip_ns"].get<int64_t>() / 2);
    if (part["rank"] != 0) {
      EXPECT_GT(part["round_trip_ns"].get<int64_t>(), 0);
    }
  }
  slack += 50'000;  // and the clock readings around a span's edges
  const auto by_rank = spans_by_rank(record);
  // (step, bucket) -> every rank's allreduce span of it
  std::map<std::pair<int64_t, int64_t>, std::vector<Span>> buckets;
  for (const auto& [r, spans] : by_rank) {
    for (const auto& s : spans) {
      if (s.name == "allreduce") buckets[{s.step, s.index}].push_back(s);
    }
  }
  ASSERT_FALSE(buckets.empty());
  int checked = 0;
  for (const auto& [key, list] : buckets) {
    ASSERT_EQ(list.size(), static_cast<size_t>(size))
        << "step " << key.first << " bucket " << key.second << ": not on every rank";
    int64_t latest_start = INT64_MIN, earliest_end = INT64_MAX;
    for (const auto& s : list) {
      latest_start = std::max(latest_start, s.start);
      earliest_end = std::min(earliest_end, s.end);
    }
    EXPECT_LE(latest_start, earliest_end + slack)
        << "step " << key.first << " bucket " << key.second << ": a rank's allreduce ended "
        << (latest_start - earliest_end) / 1000 << " us before another's began (slack "
        << slack / 1000 << " us)";
    ++checked;
  }
  std::printf("checked %d bucket allreduces on %d ranks, alignment slack %.1f us\n", checked, size,
              slack / 1000.0);
  // The record makes a valid trace with a process per rank.
  const nlohmann::json trace = chrome_trace(record);
  int processes = 0;
  for (const auto& e : trace["traceEvents"]) processes += e["name"] == "process_name";
  EXPECT_EQ(processes, size);
}

TEST(TimelineMpi, ClockOffsetsFindAKnownSkewOverMpi) {
  MpiCommunicator comm(CommOptions{});
  const auto base = std::chrono::steady_clock::now();
  const int64_t skew = int64_t{comm.rank()} * 2'500'000'000;
  const ClockOffset f = clock_offset_over(comm, 0, [&] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                base)
               .count() +
           skew;
  });
  // The processes' bases differ by when each read the clock (MPI_Init
  // skew): measure that with the real clocks' offset, then check the skew.
  const ClockOffset real = clock_offset_over(comm, 0, [&] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                base)
        .count();
  });
  if (comm.rank() == 0) {
    EXPECT_EQ(f.offset_ns, 0);
    return;
  }
  EXPECT_LE(std::llabs(f.offset_ns - real.offset_ns + skew),
            f.round_trip_ns / 2 + real.round_trip_ns / 2 + 1000)
      << "rank " << comm.rank() << ": " << f.offset_ns << " vs " << real.offset_ns << " - " << skew;
}

TEST(TimelineMpi, ParameterServersUpdatesAreOnTheTimeline) {
  int size = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (size < 3) GTEST_SKIP() << "a parameter server job needs 3 ranks (2 workers + 1 server)";
  const nlohmann::json record =
      run(equivalence_config({{"type", "parameter_server"}, {"num_ps", 1}, {"mode", "sync"}},
                             {{"type", "sgd"}, {"lr", 0.05}}, 30));
  if (rank != 0) return;
  ASSERT_EQ(record["ranks"].size(), static_cast<size_t>(size));
  const auto by_rank = spans_by_rank(record);
  int updates = 0, pushes = 0;
  for (const auto& s : by_rank.at(size - 1)) updates += s.name == "update";
  for (const auto& s : by_rank.at(0)) pushes += s.name == "push and pull";
  EXPECT_GT(pushes, 0);
  EXPECT_EQ(updates, pushes) << "sync: one server update per step of the chief";
}

}  // namespace
}  // namespace baton
