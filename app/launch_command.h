// `baton launch CONFIG`: an mpirun job under a supervisor that restarts it
// from its newest valid checkpoint when a rank dies or hangs
// (baton/launch/launcher.h).
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <string>
#include <vector>

namespace baton::cli {

struct LaunchArgs {
  std::string config;
  int np = 0;  // 0: the hostfile's slots, or 1
  std::string hostfile;
  std::string tf_config;  // a TF_CONFIG file: its tasks are the ranks, its hosts the hostfile
  int max_restarts = 3;
  double heartbeat_s = 1.0;
  double heartbeat_timeout_s = 30.0;
  double progress_timeout_s = 600.0;
  std::string events;
  std::string db;
  std::string runs_dir;
  std::string plugin_dir;
  std::string run_id;
  bool resume = false;
  long long seed = -1;
  std::vector<std::string> overrides;
  std::vector<std::string> rank_wrapper;
  bool quiet = false;
  std::string sample_log;
  std::string timeline;  // passed on: baton train --timeline
  // Elastic (any of these given): the worker count follows the hosts.
  int min_workers = 0;  // 0: not given
  int max_workers = 0;
  std::string host_discovery;
  double discovery_interval_s = 2.0;
  double host_cooldown_s = 10.0;
  double start_timeout_s = 600.0;
};

void add_launch_command(CLI::App& app, LaunchArgs& args);
// The process exit code: 0 completed, 130 stopped, 1 failed (restarts
// spent), 2 bad input (here or on a rank).
int run_launch(const LaunchArgs& args, const std::string& exe_path);

}  // namespace baton::cli
