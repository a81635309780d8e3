#include "history/run_loader.h"

#include <baton/history/store.h>

#include <map>

#include "common/dashboard.h"

namespace baton::ui {
namespace {

// The step-event fields by metric name, as HistorySink stores them.
void set_field(StepEvent& e, const std::string& metric, double v) {
  if (metric == "loss")
    e.loss = v;
  else if (metric == "accuracy")
    e.accuracy = v;
  else if (metric == "lr")
    e.lr = v;
  else if (metric == "grad_norm")
    e.grad_norm = v;
  else if (metric == "samples_per_s")
    e.samples_per_s = v;
  else if (metric == "step_time_ms")
    e.step_time_ms = v;
  else if (metric == "data_ms")
    e.data_ms = v;
  else if (metric == "compute_ms")
    e.compute_ms = v;
  else if (metric == "comm_ms")
    e.comm_ms = v;
  else if (metric == "optimizer_ms")
    e.optimizer_ms = v;
}

bool is_step_metric(const std::string& m) {
  static const char* const kNames[] = {"loss",          "accuracy",     "lr",      "grad_norm",
                                       "samples_per_s", "step_time_ms", "data_ms", "compute_ms",
                                       "comm_ms",       "optimizer_ms"};
  for (const char* n : kNames) {
    if (m == n) return true;
  }
  return false;
}

}  // namespace

LoadedRun load_run_events(const std::string& db_path, int64_t run_id, int64_t max_exact_samples,
                          int buckets) {
  const HistoryStore store(db_path, HistoryStore::Open::kReadOnly);
  const RunRecord rec = store.run(run_id);
  LoadedRun out;
  out.uid = rec.uid;
  out.name = rec.name;
  out.start_unix_s = rec.start_time;

  RunStartEvent start;
  start.run = rec.uid;
  start.name = rec.name;
  start.strategy = rec.strategy;
  start.replicas = rec.replicas;
  start.config = rec.config;
  // A language model's window: the overlay's throughput in tokens/s.
  if (rec.start_info.is_object()) {
    start.tokens_per_sample = rec.start_info.value("tokens_per_sample", int64_t{0});
  }
  out.events.emplace_back(start);

  int64_t total = 0;
  for (const MetricSummary& m : store.metric_summary(run_id)) total += m.count;
  // step -> its event (rank 0), and step -> validation figures.
  std::map<int64_t, StepEvent> steps;
  std::map<int64_t, EpochEvent> epochs;
  // Not stored per step: the replicas of a process, from the run's
  // replicas and processes (as the replay has them), so a one-process run
  // shows no per-rank series.
  const int world = rec.topology.is_object() ? rec.topology.value("world_size", 1) : 1;
  const int local_replicas = std::max(1, rec.replicas / std::max(1, world));
  auto step_at = [&](int64_t step) -> StepEvent& {
    StepEvent& e = steps[step];
    e.run = rec.uid;
    e.step = step;
    e.local_replicas = local_replicas;
    return e;
  };
  auto epoch_at = [&](int64_t step) -> EpochEvent& {
    EpochEvent& e = epochs[step];
    e.run = rec.uid;
    e.step = step;
    e.has_validation = true;
    return e;
  };
  if (total <= max_exact_samples) {
    store.for_each_sample(run_id, [&](const MetricSample& s) {
      if (s.rank != 0) return;
      if (is_step_metric(s.metric)) {
        StepEvent& e = step_at(s.step);
        set_field(e, s.metric, s.value);
        e.wall_time_s = s.wall_time_s;
      } else if (s.metric == "val_loss") {
        epoch_at(s.step).val_loss = s.value;
      } else if (s.metric == "val_accuracy") {
        epoch_at(s.step).val_accuracy = s.value;
      }
    });
  } else {
    out.downsampled = true;
    for (const std::string& metric : store.metrics_of(run_id)) {
      const bool step_metric = is_step_metric(metric);
      if (!step_metric && metric != "val_loss" && metric != "val_accuracy") continue;
      for (const SeriesBucket& b : store.downsample(run_id, metric, 0, -1, buckets)) {
        if (step_metric) {
          StepEvent& e = step_at(b.last_step);
          set_field(e, metric, b.last);
          e.wall_time_s = b.last_wall_time_s;  // the relative and wall-clock axes need it
        } else if (metric == "val_loss") {
          epoch_at(b.last_step).val_loss = b.last;
        } else {
          epoch_at(b.last_step).val_accuracy = b.last;
        }
      }
    }
  }
  // In step order, each epoch's validation after the step it closed.
  auto ep = epochs.begin();
  for (auto& [step, e] : steps) {
    out.events.emplace_back(e);
    for (; ep != epochs.end() && ep->first <= step; ++ep) out.events.emplace_back(ep->second);
  }
  for (; ep != epochs.end(); ++ep) out.events.emplace_back(ep->second);
  // Capped as the dashboard would hold them anyway.
  for (const LinkRecord& l : store.links(run_id, Dashboard::kMaxPoints)) {
    LinkEvent e;
    e.run = rec.uid;
    e.step = l.step;
    e.src = l.src;
    e.dst = l.dst;
    e.num_bytes = l.num_bytes;
    e.seconds = l.seconds;
    e.bandwidth_gbps = l.seconds > 0 ? static_cast<double>(l.num_bytes) / l.seconds / 1e9 : 0.0;
    e.estimated = l.estimated;
    e.wait_s = l.wait_s;
    out.events.emplace_back(e);
  }
  // A run on GPUs: each GPU's state (device events, a few a minute).
  for (const RunEventRecord& r : store.events(run_id)) {
    if (r.kind != "device") continue;
    if (auto e = device_event_from_row(rec.uid, r.step, r.message, r.data)) {
      out.events.push_back(std::move(*e));
    }
  }
  return out;
}

}  // namespace baton::ui
