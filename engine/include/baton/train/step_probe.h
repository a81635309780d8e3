// The model's side of the scaling predictor (cluster/cost_model.h): its
// training step on one device here, measured. A short one_device run of
// the config at the per-device batch - `copies` of it at once on threads
// of their own when the devices of a host share it (CPU cores share caches
// and memory) - and the slowest copy's median data, forward+backward
// (split 1:2, their FLOPs' ratio) and optimizer times after 5 warm-up
// steps. What `baton predict` and the studio's prediction measure.
#pragma once

#include <baton/cluster/cost_model.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>

#include <string>
#include <vector>

namespace baton {

inline constexpr int64_t kStepProbeWarmup = 5;

// The --set overrides that make a config the probe's run: one device,
// `batch` samples a step, warm-up + `steps` steps, a step event each, no
// checkpoints.
std::vector<std::string> step_probe_overrides(int64_t batch, int64_t steps);

struct StepProbe {
  ModelCost cost;
  std::string model;  // the model's description
  int64_t parameters = 0;
  int copies = 1;
};

// `cfg` is the config with step_probe_overrides applied. Throws what
// training throws.
StepProbe measure_step(const RunConfig& cfg, const Registry& registry, int copies);

}  // namespace baton
