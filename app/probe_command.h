// `baton probe`: what this machine (or each machine of a cluster, through
// mpirun) offers for training: CPU cores, NUMA nodes, memory, GPUs and the
// links between them.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace baton::cli {

struct ProbeArgs {
  bool json = false;
  bool single_line = false;  // hidden: one compact JSON line (what mpirun's children print)
  std::string hosts;         // "h1,h2": one probe per entry, through mpirun -H
  std::string hostfile;      // one probe per node of an Open MPI hostfile
  double timeout_s = 30;     // mpirun is stopped after this long
};

void add_probe_command(CLI::App& app, ProbeArgs& args);
// Returns the process exit code; throws InputError (a missing hostfile,
// no mpirun) / RuntimeError (mpirun or a remote probe failed) upward.
int run_probe(const ProbeArgs& args, const std::string& exe_path);

}  // namespace baton::cli
