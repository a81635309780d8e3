#include <baton/core/error.h>
#include <baton/data/dataset.h>
#include <baton/train/memory_figures.h>
#include <baton/train/model_figures.h>

#include <algorithm>

#include "gradient_groups.h"
#include "memory_plan.h"

namespace baton {

int optimizer_state_floats(const OptimizerOptions& o) {
  if (o.kind == OptimizerKind::kAdam || o.kind == OptimizerKind::kAdamW) return 2;
  return o.momentum > 0.0f ? 1 : 0;
}

int64_t planned_gradient_window(Sequential& model, const StrategyConfig& strategy, int replicas) {
  const GradientGroups groups =
      gradient_groups(model, std::max<int64_t>(1, strategy.bucket_bytes / 4));
  const FlatLayout layout = flat_layout(model.params(), std::max(1, replicas), groups.of_param);
  std::vector<int64_t> offsets;
  return gradient_window(layout, groups, &offsets);
}

MemoryFigures memory_figures(const MemoryInputs& in, const std::string& sharding) {
  MemoryFigures f;
  f.sharding = sharding;
  f.activation_checkpointing = in.activation_checkpointing;
  f.local_replicas = in.local_replicas;
  const int64_t n = std::max(1, in.replicas);
  f.rows = (in.global_batch + n - 1) / n;
  constexpr int64_t kFloat = 4;
  f.parameters = in.parameters * kFloat;
  f.gradients = in.parameters * kFloat;
  f.activations = f.rows * in.saved_floats_per_sample * kFloat;
  if (sharding != "none") {
    const int64_t piece = (in.parameters + n - 1) / n;
    f.optimizer_state = piece * in.state_floats * kFloat;
    f.communication = 2 * piece * kFloat;  // the gradient sum's piece, the allgather's
    // ZeRO-2: one window of groups' gradients at a time. ZeRO-3: the
    // values too - the window and the piece (its master, no allgather
    // buffer beside it).
    if (sharding == "gradients" || sharding == "parameters") {
      f.gradients = std::min(in.parameters, in.gradient_window) * kFloat;
    }
    if (sharding == "parameters") {
      f.parameters = (std::min(in.parameters, in.gradient_window) + piece) * kFloat;
      f.communication = piece * kFloat;  // the gradients' piece
    }
  } else {
    f.optimizer_state = in.parameters * in.state_floats * kFloat;
  }
  f.data = f.rows * in.local_replicas * in.data_floats_per_row * kFloat;
  f.cache = in.cache_bytes;
  return f;
}

std::vector<std::string> sharding_modes(const StrategyConfig& strategy) {
  if (strategy.type == "mirrored" ||
      (strategy.type == "multi_worker_mirrored" && strategy.replicas == 1)) {
    return {"none", "optimizer", "gradients", "parameters"};
  }
  return {"none"};
}

nlohmann::json memory_figures_json(const MemoryFigures& m) {
  return {{"sharding", m.sharding},
          {"activation_checkpointing", m.activation_checkpointing},
          {"rows_per_replica", m.rows},
          {"replicas_per_process", m.local_replicas},
          {"per_replica",
           {{"parameters", m.parameters},
            {"gradients", m.gradients},
            {"optimizer_state", m.optimizer_state},
            {"activations", m.activations},
            {"communication", m.communication},
            {"total", m.per_replica()}}},
          {"data", m.data},
          {"cache", m.cache},
          {"per_process", m.per_process()}};
}

RunPlan plan_run(const RunConfig& cfg, const Registry& registry, int processes) {
  ConfigModel built = build_config_model(cfg, registry);
  return plan_for_model(cfg, *built.data, *built.model, processes);
}

RunPlan plan_for_model(const RunConfig& cfg, const Dataset& dataset, Sequential& model,
                       int processes) {
  const Dataset* data = &dataset;
  RunPlan p;
  p.model = model.describe();
  p.parameters = model.num_parameters();
  const StrategyConfig& s = cfg.strategy;
  const bool ranks = s.type == "multi_worker_mirrored" || s.type == "parameter_server";
  const int per_process = s.type == "one_device" || s.type == "parameter_server" ? 1 : s.replicas;
  MemoryInputs& in = p.inputs;
  in.parameters = p.parameters;
  in.saved_floats_per_sample = model.saved_floats_per_sample();
  in.data_floats_per_row =
      pipeline_floats_per_row(data->features(), data->target_width(), cfg.data.prefetch);
  // data.cache: every decoded sample, once per process.
  in.cache_bytes =
      cfg.data.cache ? data->size() * (data->features() + data->target_width() + 1) * 4 : 0;
  in.global_batch = cfg.global_batch;
  in.local_replicas = per_process;
  in.replicas = ranks ? std::max(1, processes) * per_process : per_process;
  if (s.type == "parameter_server") {
    in.replicas = std::max(1, processes - std::max(1, s.num_ps));
  }
  in.state_floats = optimizer_state_floats(cfg.optimizer);
  in.activation_checkpointing = cfg.model.value("activation_checkpointing", false);
  in.gradient_window = planned_gradient_window(model, s, in.replicas);
  for (const std::string& mode : sharding_modes(s)) p.modes.push_back(memory_figures(in, mode));
  const MemoryLimit limit = available_memory();
  p.available_bytes = limit.bytes;
  p.available_holder = limit.holder;
  return p;
}

}  // namespace baton
