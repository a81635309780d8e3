// Telemetry events survive to_json -> event_from_json (the path a rank's
// events take to the studio under mpirun); unknown types and newer schemas
// are skipped; a known field of the wrong type is an error naming it.
#include <baton/core/error.h>
#include <baton/telemetry/stragglers.h>
#include <baton/telemetry/telemetry.h>
#include <gtest/gtest.h>

namespace baton {
namespace {

template <class E>
E round_trip(const E& e) {
  const auto back = event_from_json(nlohmann::json::parse(to_json(Event{e}).dump()));
  EXPECT_TRUE(back.has_value());
  EXPECT_TRUE(std::holds_alternative<E>(*back));
  return std::get<E>(*back);
}

TEST(Telemetry, EveryEventRoundTrips) {
  RunStartEvent s;
  s.run = "r1";
  s.name = "digits";
  s.strategy = "mirrored";
  s.communication = "local/ring";
  s.replicas = 3;
  s.total_steps = 700;
  s.global_batch = 64;
  s.start_step = 12;
  s.config = {{"seed", 4}};
  const auto s2 = round_trip(s);
  EXPECT_EQ(s2.run, "r1");
  EXPECT_EQ(s2.strategy, "mirrored");
  EXPECT_EQ(s2.communication, "local/ring");
  EXPECT_EQ(s2.replicas, 3);
  EXPECT_EQ(s2.total_steps, 700);
  EXPECT_EQ(s2.start_step, 12);
  EXPECT_EQ(s2.config, s.config);

  StepEvent st;
  st.run = "r1";
  st.step = 40;
  st.loss = 0.25;
  st.accuracy = 0.875;
  st.comm_ms = 1.5;
  st.rank = 2;
  st.replica = 6;
  st.local_replicas = 3;
  st.rank_samples_per_s = 1234.5;
  st.wall_time_s = 3.25;
  const auto st2 = round_trip(st);
  EXPECT_EQ(st2.replica, 6);
  EXPECT_EQ(st2.local_replicas, 3);
  EXPECT_DOUBLE_EQ(st2.rank_samples_per_s, 1234.5);
  EXPECT_EQ(st2.step, 40);
  EXPECT_DOUBLE_EQ(st2.loss, 0.25);
  EXPECT_DOUBLE_EQ(st2.accuracy, 0.875);
  EXPECT_DOUBLE_EQ(st2.comm_ms, 1.5);
  EXPECT_EQ(st2.rank, 2);
  EXPECT_DOUBLE_EQ(st2.wall_time_s, 3.25);

  // A stream from before replica and rank_samples_per_s: "rank" was the
  // first replica and samples_per_s the process's rate.
  const auto old_step = baton::event_from_json(nlohmann::json{
      {"v", 1}, {"type", "step"}, {"run", "r0"}, {"rank", 4}, {"samples_per_s", 9.0}});
  ASSERT_TRUE(old_step.has_value());
  const auto& os = std::get<StepEvent>(*old_step);
  EXPECT_EQ(os.replica, 4);
  EXPECT_DOUBLE_EQ(os.rank_samples_per_s, 9.0);

  EpochEvent ep;
  ep.epoch = 3;
  ep.has_validation = true;
  ep.val_accuracy = 0.5;
  const auto ep2 = round_trip(ep);
  EXPECT_TRUE(ep2.has_validation);
  EXPECT_DOUBLE_EQ(ep2.val_accuracy, 0.5);
  EpochEvent no_val;
  EXPECT_FALSE(round_trip(no_val).has_validation);

  LogEvent lg;
  lg.level = LogLevel::kWarning;
  lg.message = "skipped";
  EXPECT_EQ(round_trip(lg).level, LogLevel::kWarning);
  EXPECT_EQ(round_trip(lg).message, "skipped");

  CheckpointEvent ck;
  ck.path = "/tmp/c";
  ck.num_bytes = 99;
  EXPECT_EQ(round_trip(ck).num_bytes, 99);

  LinkEvent ln;
  ln.src = 1;
  ln.dst = 2;
  ln.num_bytes = 4096;
  ln.estimated = true;
  const auto ln2 = round_trip(ln);
  EXPECT_EQ(ln2.src, 1);
  EXPECT_EQ(ln2.dst, 2);
  EXPECT_TRUE(ln2.estimated);
  EXPECT_FALSE(ln2.eager);
  // The eager mark (messages under MPI's eager limit) survives the trip,
  // and an event written before the field reads as not eager.
  LinkEvent eager = ln;
  eager.estimated = false;
  eager.eager = true;
  const nlohmann::json ej = to_json(Event{eager});
  EXPECT_EQ(ej.at("eager"), true);
  EXPECT_TRUE(round_trip(eager).eager);
  nlohmann::json old = ej;
  old.erase("eager");
  const auto read_old = event_from_json(old);
  ASSERT_TRUE(read_old.has_value());
  EXPECT_FALSE(std::get<LinkEvent>(*read_old).eager);

  RunEndEvent end;
  end.status = "failed";
  end.error = "boom";
  EXPECT_EQ(round_trip(end).status, "failed");
  EXPECT_EQ(round_trip(end).error, "boom");

  DeviceEvent dev;
  dev.run = "r1";
  dev.step = 9;
  dev.device = "gpu:1";
  dev.utilization_pct = 87;
  dev.memory_used_mib = 1024.5;
  dev.memory_total_mib = 81559;
  dev.power_w = 310.25;
  dev.temperature_c = 61;
  const auto dev2 = round_trip(dev);
  EXPECT_EQ(dev2.step, 9);
  EXPECT_EQ(dev2.device, "gpu:1");
  EXPECT_DOUBLE_EQ(dev2.utilization_pct, 87);
  EXPECT_DOUBLE_EQ(dev2.memory_used_mib, 1024.5);
  EXPECT_DOUBLE_EQ(dev2.memory_total_mib, 81559);
  EXPECT_DOUBLE_EQ(dev2.power_w, 310.25);
  EXPECT_DOUBLE_EQ(dev2.temperature_c, 61);
  EXPECT_FALSE(dev2.emulated);
  dev.emulated = true;
  dev.utilization_pct = -1;  // not known on the emulator
  EXPECT_TRUE(round_trip(dev).emulated);
  EXPECT_DOUBLE_EQ(round_trip(dev).utilization_pct, -1);
  EXPECT_STREQ(event_type(Event{dev}), "device");
}

TEST(Telemetry, UnknownTypesAndNewerSchemasAreSkipped) {
  EXPECT_FALSE(event_from_json({{"v", 1}, {"type", "weather"}, {"run", "r"}}).has_value());
  EXPECT_FALSE(event_from_json({{"v", 2}, {"type", "step"}, {"run", "r"}}).has_value());
  EXPECT_FALSE(event_from_json(nlohmann::json::array()).has_value());
  // Unknown fields are ignored.
  const auto e = event_from_json({{"v", 1}, {"type", "step"}, {"step", 5}, {"future", true}});
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(std::get<StepEvent>(*e).step, 5);
}

TEST(Telemetry, WrongFieldTypeNamesTheField) {
  try {
    event_from_json({{"v", 1}, {"type", "step"}, {"loss", "high"}});
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("\"loss\""), std::string::npos) << e.what();
  }
}

TEST(Stragglers, TheRankWhoseOwnWorkLagsIsFoundWithItsPhase) {
  // Rank 3 computes 40% longer than the median of the others; rank 1's
  // data is slow too but by less than the absolute floor.
  std::vector<RankStepPhases> r = {{0, 5, 1.0, 10.0, 2.0},
                                   {1, 5, 1.4, 10.2, 2.0},
                                   {2, 5, 1.0, 9.8, 2.1},
                                   {3, 5, 1.0, 14.0, 2.0}};
  auto found = find_stragglers(r, 0.25, 0.5);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].rank, 3);
  EXPECT_EQ(found[0].phase, "compute");
  EXPECT_DOUBLE_EQ(found[0].others_median_ms, 10.0);
  EXPECT_NEAR(found[0].lag(), 0.4, 1e-12);
  // A lower floor catches rank 1's data too.
  found = find_stragglers(r, 0.25, 0.1);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].rank, 1);
  EXPECT_EQ(found[0].phase, "data");
  // Within the threshold, or alone: nobody.
  r[3].compute_ms = 12.0;
  EXPECT_TRUE(find_stragglers(r, 0.25, 0.5).empty());
  EXPECT_TRUE(find_stragglers({r[0]}).empty());
}

}  // namespace
}  // namespace baton

// Every write of an events file is checked: on a full device the first
// failure names the file and the reason, the sink writes nothing after it,
// and the other sinks get one error log event saying so (the history keeps
// it); a failed close is kept too.
TEST(Telemetry, AnEventsFileThatCannotBeWrittenIsSaidOnce) {
  auto file = std::make_shared<baton::JsonLinesSink>("/dev/full");
  std::vector<baton::LogEvent> logs;
  int others = 0;
  baton::Telemetry t;
  t.add(file);
  t.add(std::make_shared<baton::CallbackSink>([&](const baton::Event& e) {
    ++others;
    if (const auto* l = std::get_if<baton::LogEvent>(&e)) logs.push_back(*l);
  }));
  EXPECT_TRUE(t.write_failures().empty());
  for (int64_t step = 1; step <= 3; ++step) {
    baton::StepEvent s;
    s.run = "r1";
    s.step = step;
    t.emit(s);
  }
  EXPECT_EQ(others, 4);  // three steps and one error log
  ASSERT_EQ(logs.size(), 1u);
  EXPECT_EQ(logs[0].run, "r1");
  EXPECT_EQ(logs[0].level, baton::LogLevel::kError);
  EXPECT_EQ(
      logs[0].message.rfind("events file /dev/full: write failed (No space left on device)", 0), 0u)
      << logs[0].message;
  t.close_outputs();
  ASSERT_EQ(t.write_failures().size(), 1u);
  EXPECT_EQ(t.write_failures()[0], logs[0].message);
}
