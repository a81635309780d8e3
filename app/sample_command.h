// `baton sample RUN|CHECKPOINT`: text from a trained GPT, streamed to
// standard output as it is generated (a key/value cache: one position per
// token).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace baton::cli {

struct SampleArgs {
  std::string source;  // a run id (history row or uid), run dir, checkpoint dir or file
  std::string prompt;
  long long tokens = 256;
  double temperature = 0.8;
  long long top_k = 0;
  long long seed = 0;
  std::string runs_dir, db, plugin_dir;
};

void add_sample_command(CLI::App& app, SampleArgs& args);
int run_sample(const SampleArgs& args, const std::string& exe_path);

}  // namespace baton::cli
