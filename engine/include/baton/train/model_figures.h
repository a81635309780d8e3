// What a run config's model is, before it trains: its parameter count and
// the model FLOPs of a training step, for the studio's run form. The data
// is read to learn its shape (features, classes); the model is built and
// planned for one sample.
#pragma once

#include <baton/data/dataset.h>
#include <baton/nn/model.h>
#include <baton/train/memory_figures.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>

#include <cstdint>
#include <memory>
#include <string>

namespace baton {

struct ModelFigures {
  int64_t parameters = 0;
  // Counted from the layer shapes (Sequential::forward_flops_per_sample):
  // 3x the forward products per sample, times the global batch.
  double flops_per_step = 0;
  int64_t tokens_per_sample = 0;  // a language model's window (0 otherwise)
  std::string description;
  // Its memory before Start (memory_figures.h), `processes` processes for
  // the strategies of ranks.
  RunPlan plan;
};

// InputError (naming the config's file and key) when the data or the
// model cannot be built.
ModelFigures model_figures(const RunConfig& config, const Registry& registry, int processes = 2);

// The config's training data, read, and its model, built and planned for
// one row (on the CPU): what the figures and the memory plan are taken
// from.
struct ConfigModel {
  std::shared_ptr<const Dataset> data;
  std::unique_ptr<Sequential> model;
};
ConfigModel build_config_model(const RunConfig& config, const Registry& registry);

}  // namespace baton
