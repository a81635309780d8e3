// `baton train CONFIG`: wiring between the command line and the engine's
// Trainer.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace baton::cli {

struct TrainArgs {
  std::string config;
  std::string events;
  bool resume = false;
  std::string checkpoint_dir;
  std::string runs_dir;
  std::string plugin_dir;
  long long seed = -1;
  std::vector<std::string> overrides;
  bool quiet = false;
  std::string db;          // history database (default: default_history_db_path())
  bool no_db = false;      // do not record the run in the history
  std::string owner;       // HOST:PID:START: who answers for the run in the history
  std::string run_id;      // "" = a new id (or, with --resume, the newest resumable run's)
  int64_t resume_step_at_least = 0;  // --resume-step-at-least (baton launch sets it)
  double heartbeat_s = 0;  // > 0: a heartbeat line on stdout this often (baton launch)
  std::string sample_log;  // a folder: each step's sample indices (train/sample_log.h)
  std::string timeline;    // a Chrome trace of every process's spans, written at the end
  // parameter_server (async) over TCP (baton launch sets these): the job's
  // worker slots; this process's slot outside the MPI job; its servers.
  int ps_workers = 0;
  int ps_worker = -1;
  std::string ps_servers;  // host:port,host:port
  std::string ps_bind;         // --ps-bind: each server's placed host, comma-separated
  int64_t ps_generation = 0;   // --ps-generation: the launcher's count for this worker slot
};

void add_train_command(CLI::App& app, TrainArgs& args);
// Returns the process exit code; throws InputError / RuntimeError upward.
int run_train(const TrainArgs& args, const std::string& exe_path);

}  // namespace baton::cli
