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
#include "probe_command.h"
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
  return std::string("baton ") + BATON_VERSION_STRING + " (" + BATON_BUILD_TYPE + ")\n" +
         "kernels: " + baton::cpu::kernel_path() + "\n" +
         "nccl: " + (no_nccl.empty() ? std::string("built") : "not built: " + no_nccl);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Baton: distributed training from the command line"};
  app.set_version_flag("--version", version_text);
  app.require_subcommand(1);
  baton::cli::TrainArgs train;
  baton::cli::add_train_command(app, train);
  baton::cli::ProbeArgs probe;
  baton::cli::add_probe_command(app, probe);
  baton::cli::BenchArgs bench;
  baton::cli::add_bench_command(app, bench);
  baton::cli::HistoryArgs history;
  baton::cli::add_history_command(app, history);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  try {
    if (app.got_subcommand("train")) return baton::cli::run_train(train, self_exe(argv[0]));
    if (app.got_subcommand("probe")) return baton::cli::run_probe(probe, self_exe(argv[0]));
    if (app.got_subcommand("bench"))
      return baton::cli::run_bench(bench, baton::default_cuda_library(self_exe(argv[0])));
    if (app.got_subcommand("history")) return baton::cli::run_history(history);
  } catch (const baton::InputError& e) {
    std::fprintf(stderr, "baton: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "baton: failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
