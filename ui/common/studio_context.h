// What the studio's views share, passed explicitly (no global state): where
// the plugins, the CLI (for mpirun launches), the examples and the history
// database are.
#pragma once

#include <QString>
#include <cstdint>

namespace baton::ui {

struct StudioContext {
  QString plugin_dir;    // model and dataset plugins
  QString baton_exe;     // the `baton` CLI, started under mpirun for multi-process runs
  QString examples_dir;  // resources/examples (the default run config)
  QString history_db;    // the run store; "" = the default ($XDG_DATA_HOME/baton/runs.db)
  QString runs_dir;      // run directories; "" = the CLI's default
  // Probing hosts through mpirun gives up after this long (an unreachable
  // host makes ssh wait for minutes); the Cluster view also has Cancel.
  double probe_timeout_s = 30;
  // The memory the run form's plan is held against; 0: what this machine
  // has available now (MemAvailable). Tests set it.
  int64_t memory_available_bytes = 0;
};

}  // namespace baton::ui
