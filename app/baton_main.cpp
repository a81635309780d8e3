// baton: the headless command line. Wiring only: each command parses its
// arguments and calls the engine. Exit codes: 0 success, 2 bad input (the
// message names the file, key or line), 1 runtime failure.
#include <baton/comm/nccl.h>
#include <baton/core/error.h>
#include <baton/discovery/discovery.h>
#include <baton/nn/kernels.h>
#include <baton_build_info.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>
#include <string>

#include "bench_command.h"
#include "history_command.h"
#include "launch_command.h"
#include "output_file.h"
#include "plan_command.h"
#include "predict_command.h"
#include "probe_command.h"
#include "sample_command.h"
#include "train_command.h"

namespace {

std::string self_exe(const char* argv0) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n > 0) return std::string(buf, static_cast<size_t>(n));
  return argv0;
}

std::string version_text() {
  const std::string no_nccl = baton::nccl_build_unavailable_reason();
  std::string kernels;
  try {
    kernels = baton::cpu::kernel_path();
  } catch (const std::exception& e) {  // a bad BATON_MAX_CPU_ISA
    kernels = std::string("error: ") + e.what();
  }
  return std::string("baton ") + BATON_VERSION_STRING + " (" + BATON_BUILD_TYPE + ")\n" +
         "kernels: " + kernels + "\n" +
         "nccl: " + (no_nccl.empty() ? std::string("built") : "not built: " + no_nccl);
}

// A word where a command is expected that names none ("baton nosuch",
// "baton history lst"): CLI11 would only say that a subcommand is
// required. Returns the message, or "" when the words name commands.
std::string unknown_command(const CLI::App& app, int argc, char** argv) {
  const CLI::App* at = &app;
  std::string path = "baton";
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') break;  // options (and their values) from here
    const auto subs = at->get_subcommands([](const CLI::App*) { return true; });
    if (subs.empty()) break;
    const CLI::App* next = nullptr;
    std::string names;
    for (const CLI::App* s : subs) {
      if (s->get_name() == word) next = s;
      names += (names.empty() ? "" : ", ") + s->get_name();
    }
    if (next == nullptr) {
      return path + ": unknown command \"" + word + "\" (expected one of: " + names + ")";
    }
    at = next;
    path += " " + word;
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Baton: distributed training from the command line"};
  app.set_version_flag("--version", version_text);
  app.require_subcommand(1);
  baton::cli::TrainArgs train;
  baton::cli::add_train_command(app, train);
  baton::cli::LaunchArgs launch;
  baton::cli::add_launch_command(app, launch);
  baton::cli::ProbeArgs probe;
  baton::cli::add_probe_command(app, probe);
  baton::cli::BenchArgs bench;
  baton::cli::add_bench_command(app, bench);
  baton::cli::HistoryArgs history;
  baton::cli::add_history_command(app, history);
  baton::cli::SampleArgs sample;
  baton::cli::add_sample_command(app, sample);
  baton::cli::CalibrateArgs calibrate;
  baton::cli::add_calibrate_command(app, calibrate);
  baton::cli::PredictArgs predict;
  baton::cli::add_predict_command(app, predict);
  baton::cli::PlanArgs plan;
  baton::cli::add_plan_command(app, plan);

  if (const std::string unknown = unknown_command(app, argc, argv); !unknown.empty()) {
    std::fprintf(stderr, "%s\nRun with --help for more information.\n", unknown.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  try {
    int code = 0;
    if (app.got_subcommand("train")) {
      code = baton::cli::run_train(train, self_exe(argv[0]));
    } else if (app.got_subcommand("probe")) {
      code = baton::cli::run_probe(probe, self_exe(argv[0]));
    } else if (app.got_subcommand("bench")) {
      code = baton::cli::run_bench(bench, baton::default_cuda_library(self_exe(argv[0])));
    } else if (app.got_subcommand("history")) {
      code = baton::cli::run_history(history);
    } else if (app.got_subcommand("launch")) {
      code = baton::cli::run_launch(launch, self_exe(argv[0]));
    } else if (app.got_subcommand("sample")) {
      code = baton::cli::run_sample(sample, self_exe(argv[0]));
    } else if (app.got_subcommand("calibrate")) {
      code = baton::cli::run_calibrate(calibrate);
    } else if (app.got_subcommand("predict")) {
      code = baton::cli::run_predict(predict, self_exe(argv[0]));
    } else if (app.got_subcommand("plan")) {
      code = baton::cli::run_plan(plan, self_exe(argv[0]));
    }
    // What was printed must have reached its reader ("> /dev/full").
    baton::cli::finish_stdout();
    return code;
  } catch (const baton::InputError& e) {
    std::fprintf(stderr, "baton: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "baton: failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
