// TrainOptions::timeline in one process: every step's phases on the step
// loop, forward and backward on each replica's lane, each bucket's
// allreduce on its replica's allreduce lane - one "timeline" event from the
// chief, spans nested as a Chrome trace needs them.
#include <baton/telemetry/chrome_trace.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/trainer.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "strategy_test_config.h"
#include "timeline_test_util.h"

namespace baton {
namespace {

nlohmann::json run_with_timeline(const nlohmann::json& doc, TrainSummary* sum) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  Telemetry t;
  std::vector<nlohmann::json> records;
  t.add(std::make_shared<CallbackSink>([&](const Event& e) {
    if (const auto* tl = std::get_if<TimelineEvent>(&e)) records.push_back(tl->trace);
  }));
  TrainOptions opt;
  opt.run_id = "timeline";
  opt.timeline = true;
  Trainer trainer(parse_run_config(doc, "timeline.json"), registry, t, opt);
  *sum = trainer.run();
  EXPECT_EQ(records.size(), 1u) << "one timeline event per run";
  return records.empty() ? nlohmann::json() : records[0];
}

TEST(TrainerTimeline, MirroredStepsPhasesReplicasAndBuckets) {
  nlohmann::json doc = equivalence_config(
      {{"type", "mirrored"}, {"replicas", 2}, {"allreduce", {{"bucket_mb", 0.0005}}}},
      {{"type", "sgd"}, {"lr", 0.05}}, 30);
  TrainSummary sum;
  const nlohmann::json record = run_with_timeline(doc, &sum);
  ASSERT_TRUE(record.is_object());
  ASSERT_EQ(record["ranks"].size(), 1u);
  const auto spans = spans_of(record["ranks"][0]);
  EXPECT_EQ(record["ranks"][0]["dropped"], 0);

  const int32_t loop = timeline_lane(TimelineLane::kStepLoop);
  std::map<int64_t, Span> steps;
  std::map<std::pair<int64_t, int64_t>, std::set<std::string>> per_lane;  // (lane, step) -> names
  std::map<int64_t, std::set<int64_t>> buckets_of_step;
  for (const auto& s : spans) {
    if (s.lane == loop && s.name == "step") steps[s.step] = s;
    per_lane[{s.lane, s.step}].insert(s.name);
    if (s.name == "allreduce") {
      EXPECT_GT(s.bytes, 0);
      EXPECT_NE(s.index, -1) << "a bucket's allreduce carries its bucket number";
      buckets_of_step[s.step].insert(s.index);
    }
  }
  ASSERT_EQ(static_cast<int64_t>(steps.size()), sum.steps) << "a step span per step";
  for (const auto& [step, st] : steps) {
    EXPECT_EQ((per_lane[{loop, step}]),
              (std::set<std::string>{"step", "data wait", "forward and backward", "gradient sync",
                                     "optimizer", "step totals"}))
        << "step " << step;
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ((per_lane[{timeline_lane(TimelineLane::kReplica, r), step}]),
                (std::set<std::string>{"forward", "backward"}))
          << "replica " << r << " step " << step;
      EXPECT_EQ((per_lane[{timeline_lane(TimelineLane::kReplicaComm, r), step}]),
                (std::set<std::string>{"allreduce"}))
          << "replica " << r << " step " << step;
    }
    EXPECT_GE(buckets_of_step[step].size(), 3u) << "tiny buckets: several per step";
  }
  // Nesting, as Chrome's complete events need it: the loop's phases lie
  // inside their step; each replica's forward/backward inside the step too.
  for (const auto& s : spans) {
    if (s.name == "step" || s.step < 0 || steps.count(s.step) == 0) continue;
    if (s.lane != loop && s.name != "forward" && s.name != "backward") continue;
    const Span& st = steps[s.step];
    EXPECT_GE(s.start, st.start) << s.name << " step " << s.step;
    EXPECT_LE(s.start + s.dur, st.start + st.dur) << s.name << " step " << s.step;
  }
  // And the trace itself is well formed.
  const nlohmann::json trace = chrome_trace(record);
  EXPECT_GT(trace["traceEvents"].size(), spans.size());
}

TEST(TrainerTimeline, ADroppedSpanIsCountedNotWritten) {
  Registry registry;
  registry.load_plugin_dir(BATON_PLUGIN_DIR);
  Telemetry t;
  nlohmann::json record;
  t.add(std::make_shared<CallbackSink>([&](const Event& e) {
    if (const auto* tl = std::get_if<TimelineEvent>(&e)) record = tl->trace;
  }));
  TrainOptions opt;
  opt.run_id = "small";
  opt.timeline = true;
  opt.timeline_capacity = 10;
  Trainer trainer(parse_run_config(equivalence_config({{"type", "one_device"}},
                                                      {{"type", "sgd"}, {"lr", 0.05}}, 30),
                                   "timeline.json"),
                  registry, t, opt);
  const TrainSummary sum = trainer.run();
  ASSERT_TRUE(record.is_object());
  EXPECT_EQ(record["ranks"][0]["spans"].size(), 10u);
  EXPECT_GT(record["ranks"][0]["dropped"].get<int64_t>(), sum.steps * 6 - 10);
}

}  // namespace
}  // namespace baton
