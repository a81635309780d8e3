#include "plan_command.h"

#include <baton/cluster/cost_model.h>
#include <baton/core/error.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/step_probe.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_checks.h"
#include "cli_paths.h"
#include "predict_command.h"

namespace baton::cli {

namespace {

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

nlohmann::json figures_json(const MemoryFigures& m, int64_t available) {
  nlohmann::json j = memory_figures_json(m);
  if (available > 0) j["fits"] = m.per_process() <= available;
  return j;
}

}  // namespace

void add_plan_command(CLI::App& app, PlanArgs& a) {
  CLI::App* p = app.add_subcommand(
      "plan",
      "A run's memory before Start, without training it: each replica's parameters, "
      "gradients, optimizer state, activations and communication buffers, and the process's, "
      "for every sharding mode the strategy runs, against this machine's available memory "
      "(modelled from the layer shapes)");
  p->add_option("config", a.config, "Run config file (JSON)")->required();
  p->add_option("--set", a.overrides, "Override a config value: key.path=value (repeatable)")
      ->take_all();
  p->add_option("--processes", a.processes,
                "multi_worker_mirrored and parameter_server: the job's processes (mpirun -n)")
      ->check(integer_in(1, 1 << 20));
  p->add_option("--plugin-dir", a.plugin_dir, "Load model/dataset plugins from DIR");
  p->add_flag("--json", a.json, "Print JSON");
  p->add_flag("--predict", a.predict,
              "Also each layout's step time, predicted (modelled) from the config's step measured "
              "on one device here and the links' figures (baton calibrate's, else nominal)");
  p->add_option("--steps", a.steps, "With --predict: steps measured (after 5 warm-up steps)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
}

namespace {
// The GPT recomputes its blocks' activations when asked.
bool choice_of_recompute(const RunConfig& cfg) { return cfg.model.value("type", "") == "gpt"; }
}  // namespace

int run_plan(const PlanArgs& a, const std::string& exe_path) {
  const RunConfig cfg = load_run_config(a.config, a.overrides);
  Registry registry;
  registry.load_plugin_dir(a.plugin_dir.empty() ? default_plugin_dir(exe_path) : a.plugin_dir);
  RunPlan plan = plan_run(cfg, registry, a.processes);
  // A model that recomputes its blocks' activations (the GPT): each mode
  // with the choice the config does not make as well.
  if (choice_of_recompute(cfg)) {
    RunConfig other = cfg;
    other.model["activation_checkpointing"] = !cfg.model.value("activation_checkpointing", false);
    const RunPlan flipped = plan_run(other, registry, a.processes);
    std::vector<MemoryFigures> both;
    for (size_t i = 0; i < plan.modes.size(); ++i) {
      both.push_back(plan.modes[i]);
      both.push_back(flipped.modes[i]);
    }
    plan.modes = std::move(both);
  }
  const std::string& type = cfg.strategy.type;
  const bool ranks = type == "multi_worker_mirrored" || type == "parameter_server";
  // --predict: the step each layout takes, from one device's step here.
  std::vector<double> step_ms;
  std::string predicted_how;
  if (a.predict) {
    const int devices = std::max(1, plan.inputs.replicas);
    const int64_t batch = (cfg.global_batch + devices - 1) / devices;
    std::vector<std::string> overrides = a.overrides;
    for (auto& o : step_probe_overrides(batch, a.steps)) overrides.push_back(std::move(o));
    // Measured without recomputation; a layout with it adds a forward.
    if (choice_of_recompute(cfg)) overrides.emplace_back("model.activation_checkpointing=false");
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    const int copies = std::clamp(devices, 1, cores);
    const StepProbe probe = measure_step(load_run_config(a.config, overrides), registry, copies);
    Topology topo;
    topo.devices_per_host = devices;
    std::string cal;
    std::error_code ec;
    if (std::filesystem::is_regular_file(default_calibration_path(), ec)) {
      cal = default_calibration_path();
    }
    const LinkCosts links = read_calibration(cal, "calibration");
    for (const MemoryFigures& m : plan.modes) {
      step_ms.push_back(1e3 * predict_sharded_step(topo, links, probe.cost, devices, m.sharding,
                                                   algorithm_from_name(cfg.strategy.algorithm),
                                                   cfg.strategy.bucket_bytes, cfg.strategy.overlap,
                                                   m.activation_checkpointing)
                                  .step_s);
    }
    predicted_how = "one device's step measured here (" + std::to_string(a.steps) + " steps of " +
                    std::to_string(batch) + " samples, " + std::to_string(copies) +
                    " at once), the links " +
                    (cal.empty() ? std::string("nominal (no baton calibrate yet)") : "from " + cal);
  }
  if (a.json) {
    nlohmann::json modes = nlohmann::json::array();
    for (size_t i = 0; i < plan.modes.size(); ++i) {
      nlohmann::json m = figures_json(plan.modes[i], plan.available_bytes);
      if (!step_ms.empty()) {
        m["predicted_step_ms"] = step_ms[i];
        m["predicted_source"] = "modelled";
      }
      modes.push_back(std::move(m));
    }
    nlohmann::json j = {{"source", "modelled"},
                        {"config", a.config},
                        {"model", plan.model},
                        {"parameters", plan.parameters},
                        {"strategy", type},
                        {"replicas", plan.inputs.replicas},
                        {"global_batch", plan.inputs.global_batch},
                        {"modes", modes}};
    if (plan.available_bytes > 0) j["available_bytes"] = plan.available_bytes;
    if (!plan.available_holder.empty()) j["available_limited_by"] = plan.available_holder;
    if (!step_ms.empty()) j["predicted_from"] = predicted_how;
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("plan: %s\n", a.config.c_str());
  std::printf("  model      %s, %lld parameters\n", plan.model.c_str(),
              static_cast<long long>(plan.parameters));
  std::printf("  strategy   %s, %d replica(s)%s, global batch %lld\n", type.c_str(),
              plan.inputs.replicas,
              ranks ? (" over " + std::to_string(a.processes) + " process(es)").c_str() : "",
              static_cast<long long>(plan.inputs.global_batch));
  std::printf("memory, modelled from the layer shapes (MiB):\n");
  // The recomputation column where the model has the choice (the GPT).
  const bool choice = cfg.model.value("type", "") == "gpt";
  auto recompute = [&](const MemoryFigures& m) -> std::string {
    if (!choice) return "";
    char buf[16];
    std::snprintf(buf, sizeof buf, "%-9s ", m.activation_checkpointing ? "yes" : "no");
    return buf;
  };
  std::printf("  %-10s %s%10s %10s %10s %12s %14s %9s %9s  %-4s%s\n", "sharding",
              choice ? "recompute " : "", "parameters", "gradients", "optimizer", "activations",
              "communication", "replica", "process", "fits",
              step_ms.empty() ? "" : "  step ms (predicted)");
  for (size_t i = 0; i < plan.modes.size(); ++i) {
    const MemoryFigures& m = plan.modes[i];
    const std::string fits = plan.available_bytes <= 0                 ? "?"
                             : m.per_process() <= plan.available_bytes ? "yes"
                                                                       : "no";
    char step[32] = "";
    if (!step_ms.empty()) std::snprintf(step, sizeof step, "  %19.1f", step_ms[i]);
    std::printf("  %-10s %s%10s %10s %10s %12s %14s %9s %9s  %-4s%s\n", m.sharding.c_str(),
                recompute(m).c_str(), mib(m.parameters).c_str(), mib(m.gradients).c_str(),
                mib(m.optimizer_state).c_str(), mib(m.activations).c_str(),
                mib(m.communication).c_str(), mib(m.per_replica()).c_str(),
                mib(m.per_process()).c_str(), fits.c_str(), step);
  }
  const MemoryFigures& first = plan.modes.front();
  std::printf(
      "  (a replica: %lld rows of the batch; a process: its %d replica(s), its batches "
      "%s MiB and data cache %s MiB)\n",
      static_cast<long long>(first.rows), first.local_replicas, mib(first.data).c_str(),
      mib(first.cache).c_str());
  if (plan.available_bytes > 0 && plan.available_holder.empty()) {
    std::printf("  fits: against the %s MiB this machine has available now (MemAvailable)\n",
                mib(plan.available_bytes).c_str());
  } else if (plan.available_bytes > 0) {
    std::printf("  fits: against the %s MiB %s leaves this process now\n",
                mib(plan.available_bytes).c_str(), plan.available_holder.c_str());
  }
  if (sharding_modes(cfg.strategy).size() == 1) {
    std::printf("  sharding: %s runs \"none\" only in this version\n", type.c_str());
  }
  if (choice) {
    std::printf(
        "  recompute: model.activation_checkpointing (each block's intermediates computed again "
        "in backward: about one more forward pass a step)\n");
  }
  if (!step_ms.empty()) {
    std::printf("  step: predicted (modelled) from %s; ZeRO's collectives counted unoverlapped\n",
                predicted_how.c_str());
  }
  return 0;
}

std::string memory_summary_text(const TrainSummary& s) {
  const MemoryFigures& m = s.memory;
  if (m.per_process() <= 0) return "";
  std::string text = "memory          planned " + mib(m.per_replica()) + " MiB a replica";
  if (m.local_replicas > 1) text += " x " + std::to_string(m.local_replicas);
  text += " (parameters " + mib(m.parameters) + ", gradients " + mib(m.gradients) + ", optimizer " +
          mib(m.optimizer_state) + ", activations " + mib(m.activations) +
          (m.activation_checkpointing ? " recomputed" : "") + ", communication " +
          mib(m.communication) + "; sharding " + m.sharding + "), " + mib(m.per_process()) +
          " MiB the process with its batches and cache (modelled from the layer shapes)\n";
  if (s.memory_peak_bytes > 0) {
    text += "                measured peak resident set " + mib(s.memory_peak_bytes) + " MiB";
    if (s.memory_start_bytes > 0) {
      text += ", " + mib(s.memory_peak_bytes - s.memory_start_bytes) + " MiB above the " +
              mib(s.memory_start_bytes) + " MiB at start";
    }
    text += "\n";
  }
  return text;
}

}  // namespace baton::cli
