// A run's memory, known before Start: what each replica holds (its
// parameters, their gradients, its optimizer state, the activations its
// layers save at the planned batch, the sharded layouts' communication
// buffers) and what the process holds beside its replicas (the input
// pipeline's batches, the data cache). Modelled from the layer shapes, not
// measured: the trainer checks it against the machine before any buffer is
// made and reports it beside the measured peak; `baton plan` prints it for
// every sharding mode the strategy can run.
#pragma once

#include <baton/data/dataset.h>
#include <baton/nn/model.h>
#include <baton/optim/optimizer.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace baton {

// What the figures are computed from.
struct MemoryInputs {
  int64_t parameters = 0;               // the model's, in floats
  int64_t saved_floats_per_sample = 0;  // the layers' saved activations and outputs
  int64_t data_floats_per_row = 0;      // the input pipeline's ring of batches, per row
  int64_t cache_bytes = 0;              // data.cache's decoded samples (one per process)
  int64_t global_batch = 0;
  int replicas = 1;        // the job's (N)
  int local_replicas = 1;  // this process's
  int state_floats = 2;    // the optimizer's state per parameter: 0, 1 (momentum), 2 (Adam)
  bool activation_checkpointing = false;  // model.activation_checkpointing (in the saved floats)
  // strategy.sharding "gradients" (ZeRO-2): the floats of the gradient
  // window a replica holds (planned_gradient_window).
  int64_t gradient_window = 0;
};

struct MemoryFigures {
  std::string sharding = "none";
  // model.activation_checkpointing: the activations are one block's
  // intermediates and every block's input and output.
  bool activation_checkpointing = false;
  int local_replicas = 1;
  int64_t rows = 0;  // a replica's share of the global batch (the largest)
  // Bytes each replica holds.
  int64_t parameters = 0, gradients = 0, optimizer_state = 0, activations = 0, communication = 0;
  // Bytes the process holds beside its replicas.
  int64_t data = 0, cache = 0;
  int64_t per_replica() const {
    return parameters + gradients + optimizer_state + activations + communication;
  }
  int64_t per_process() const { return per_replica() * local_replicas + data + cache; }
};

// The input pipeline's ring of batches, in floats per row: features,
// target and label (and the mask's) for each of its prefetch + 2 batches.
inline int64_t pipeline_floats_per_row(int64_t features, int64_t target_width, int64_t prefetch) {
  return (features + target_width + 2) * (prefetch + 2);
}

// The optimizer's state floats per parameter (SGD 0, with momentum 1,
// Adam and AdamW 2).
int optimizer_state_floats(const OptimizerOptions& o);

// The figures of `in` laid out as `sharding` ("none"; "optimizer":
// ZeRO-1's 1/N of the state, and its reduce-scattered gradient piece and
// allgather buffer; "gradients": ZeRO-2's besides a gradient window of
// in.gradient_window floats in place of the whole gradient; "parameters":
// ZeRO-3's, the values too a window and a piece).
MemoryFigures memory_figures(const MemoryInputs& in, const std::string& sharding);

// The floats of ZeRO-2's gradient window for `model` (built and planned)
// under `strategy`'s bucket size over `replicas`.
int64_t planned_gradient_window(Sequential& model, const StrategyConfig& strategy, int replicas);

// The sharding modes `strategy` runs in this version ("none" always;
// "optimizer", "gradients" and "parameters" for mirrored, and
// multi_worker_mirrored with one replica a process).
std::vector<std::string> sharding_modes(const StrategyConfig& strategy);

// A config's plan without training it: the training data read for its
// shapes, the model built for one row, the figures of every sharding mode
// the strategy runs, and the memory the machine has. `processes` is the
// job's process count for the strategies of ranks (multi_worker_mirrored,
// parameter_server's workers); the in-process strategies' replicas come
// from the config.
struct RunPlan {
  std::string model;  // its description
  int64_t parameters = 0;
  MemoryInputs inputs;
  std::vector<MemoryFigures> modes;
  int64_t available_bytes = 0;   // MemAvailable now, or a cgroup's or rlimit's room (0: not known)
  std::string available_holder;  // "": the machine's MemAvailable; else the cap's name
};
RunPlan plan_run(const RunConfig& cfg, const Registry& registry, int processes);
// The same from the config's data and its model, built and planned for
// one row (model_figures.h: build_config_model).
RunPlan plan_for_model(const RunConfig& cfg, const Dataset& data, Sequential& model, int processes);

// The figures as JSON (bytes), as summary.json and `baton plan --json`
// write them.
nlohmann::json memory_figures_json(const MemoryFigures& m);

}  // namespace baton
