#include "train_command.h"

#include "progress_printer.h"

#include <baton/error.h>
#include <baton/registry.h>
#include <baton/run_config.h>
#include <baton/run_dir.h>
#include <baton/trainer.h>

#include <unistd.h>

#include <cstdio>
#include <memory>

namespace baton::cli {

void add_train_command(CLI::App& app, TrainArgs& a) {
  CLI::App* train = app.add_subcommand("train", "Train a model from a run config (JSON)");
  train->add_option("config", a.config, "Run config file (JSON)")->required();
  train->add_option("--events", a.events,
                    "Also write telemetry as JSON lines to PATH ('-' for stdout)");
  train->add_flag("--resume", a.resume, "Continue from the newest valid checkpoint");
  train->add_option("--checkpoint-dir", a.checkpoint_dir,
                    "Checkpoint directory (default: <run dir>/checkpoints)");
  train->add_option("--runs-dir", a.runs_dir,
                    "Where run directories go (default: $XDG_DATA_HOME/baton/runs)");
  train->add_option("--plugin-dir", a.plugin_dir, "Load model/dataset plugins from DIR");
  train->add_option("--seed", a.seed, "Override the config's seed")->check(CLI::NonNegativeNumber);
  train->add_option("--set", a.overrides, "Override a config value: key.path=value (repeatable)")
      ->take_all();
  train->add_flag("-q,--quiet", a.quiet, "Print only the summary");
}

int run_train(const TrainArgs& a, const std::string& exe_path) {
  std::vector<std::string> overrides = a.overrides;
  if (a.seed >= 0) overrides.push_back("seed=" + std::to_string(a.seed));
  RunConfig cfg = load_run_config(a.config, overrides);

  Registry registry;
  registry.load_plugin_dir(a.plugin_dir.empty() ? default_plugin_dir(exe_path) : a.plugin_dir);

  // Human output goes to stderr when stdout carries the event stream.
  std::FILE* human = a.events == "-" ? stderr : stdout;
  const std::string root = a.runs_dir.empty() ? default_runs_root() : a.runs_dir;
  std::optional<RunDir> found;
  if (a.resume && a.checkpoint_dir.empty()) found = find_resumable_run(root, cfg.name);
  const std::string run_id = found ? found->id : make_run_id(cfg.name);
  const RunDir planned{run_id, root + "/" + run_id};

  TrainOptions opt;
  opt.run_id = run_id;
  opt.resume = a.resume;
  opt.checkpoint_dir = !a.checkpoint_dir.empty() ? a.checkpoint_dir
                       : !cfg.checkpoint.dir.empty() ? cfg.checkpoint.dir
                                                    : planned.checkpoints();

  Telemetry telemetry;
  if (!a.events.empty()) telemetry.add(std::make_shared<JsonLinesSink>(a.events));
  if (!a.quiet) {
    telemetry.add(std::make_shared<ProgressPrinter>(human, ::isatty(::fileno(human)) == 1));
  }

  // Building the trainer validates the model and data against the plugins:
  // a bad config fails here, before anything is written.
  Trainer trainer(cfg, registry, telemetry, opt);
  const RunDir dir = create_run_dir(root, run_id);
  telemetry.add(std::make_shared<JsonLinesSink>(dir.events()));
  write_file_atomic(dir.config(), cfg.raw.dump(2) + "\n");
  if (a.resume && !found && a.checkpoint_dir.empty()) {
    std::fprintf(human, "no earlier run of \"%s\" with a checkpoint under %s; starting fresh\n",
                 cfg.name.c_str(), root.c_str());
  }

  TrainSummary s = trainer.run();

  nlohmann::json js = {{"run", dir.id},           {"status", s.status},
                       {"steps", s.steps},         {"start_step", s.start_step},
                       {"train_loss", s.train_loss}, {"samples_per_s", s.samples_per_s},
                       {"wall_time_s", s.wall_time_s}, {"checkpoint", s.last_checkpoint}};
  if (s.has_validation) {
    js["val_loss"] = s.val_loss;
    js["val_accuracy"] = s.val_accuracy;
  }
  write_file_atomic(dir.summary(), js.dump(2) + "\n");

  std::fprintf(human, "\n== %s: %s after %lld steps ==\n", dir.id.c_str(), s.status.c_str(),
               static_cast<long long>(s.steps));
  std::fprintf(human, "train loss      %.4f\n", s.train_loss);
  if (s.has_validation) {
    std::fprintf(human, "val loss        %.4f\n", s.val_loss);
    std::fprintf(human, "val accuracy    %.2f%%\n", 100.0 * s.val_accuracy);
  }
  std::fprintf(human, "throughput      %.0f samples/s\n", s.samples_per_s);
  std::fprintf(human, "wall time       %.2f s\n", s.wall_time_s);
  std::fprintf(human, "run directory   %s\n", dir.path.c_str());
  std::fprintf(human, "  events        %s\n", dir.events().c_str());
  std::fprintf(human, "  checkpoints   %s\n", opt.checkpoint_dir.c_str());
  std::fprintf(human, "  summary       %s\n", dir.summary().c_str());
  return s.status == "completed" ? 0 : 1;
}

}  // namespace baton::cli
