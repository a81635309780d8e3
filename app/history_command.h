// `baton history list|show|export|diff|timeline|tag|note|delete`: the run history
// (engine/include/baton/history.h) from the command line.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace baton::cli {

struct HistoryArgs {
  std::string db;  // default: default_history_db_path()
  bool json = false;
  std::vector<std::string> filters;
  long long limit = 0;
  std::string id, id2;
  std::string format;
  std::string out;
  std::string text;  // tag / note
  CLI::App* list = nullptr;
  CLI::App* show = nullptr;
  CLI::App* export_ = nullptr;
  CLI::App* diff = nullptr;
  CLI::App* tag = nullptr;
  CLI::App* note = nullptr;
  CLI::App* remove = nullptr;
  CLI::App* timeline = nullptr;
  long long attempt = 0;  // timeline: which recorded one (0: the last)
};

void add_history_command(CLI::App& app, HistoryArgs& args);
// Returns the process exit code; throws InputError (an unknown run, a bad
// filter, a file that is not a Baton history) / RuntimeError upward.
int run_history(const HistoryArgs& args);

}  // namespace baton::cli
