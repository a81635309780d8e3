// `baton plan CONFIG [--set K=V ...] [--processes N] [--json]`: a run's
// memory before Start, without training it - each replica's parameters,
// gradients, optimizer state, activations at the planned batch and
// communication buffers, and what the process holds beside them, for every
// sharding mode the strategy runs, against the memory this machine has
// (modelled from the layer shapes; engine/include/baton/train/memory_figures.h).
// And the lines `baton train` prints of a finished run's plan beside its
// measured peak.
#pragma once

#include <baton/train/memory_figures.h>
#include <baton/train/trainer.h>

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace baton::cli {

struct PlanArgs {
  std::string config;
  std::vector<std::string> overrides;
  int processes = 2;  // multi_worker_mirrored, parameter_server: the job's processes
  std::string plugin_dir;
  bool json = false;
  // Each layout's step time too, predicted (modelled) from the config's
  // step measured on one device here over `steps` steps.
  bool predict = false;
  int64_t steps = 5;
};

void add_plan_command(CLI::App& app, PlanArgs& args);
int run_plan(const PlanArgs& args, const std::string& exe_path);

// "memory ..." lines of a run's summary: its plan, then its measured peak.
std::string memory_summary_text(const TrainSummary& s);

}  // namespace baton::cli
