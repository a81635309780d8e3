// Where a run's files go: <runs root>/<run id>/ holding config.json,
// events.jsonl, summary.json and checkpoints/. The runs root is
// $XDG_DATA_HOME/baton/runs (default ~/.local/share/baton/runs) unless the
// caller names another.
#pragma once

#include <baton/core/atomic_file.h>  // write_file_atomic, for the run's files

#include <optional>
#include <string>

namespace baton {

std::string default_runs_root();
// "<name>-<YYYYmmdd-HHMMSS>-<4 hex digits>", unique enough for one user.
std::string make_run_id(const std::string& name);

struct RunDir {
  std::string id;
  std::string path;
  std::string checkpoints() const { return path + "/checkpoints"; }
  std::string events() const { return path + "/events.jsonl"; }
  std::string config() const { return path + "/config.json"; }
  std::string summary() const { return path + "/summary.json"; }
};

// Creates <root>/<id>. RuntimeError when it cannot.
RunDir create_run_dir(const std::string& root, const std::string& id);
// The newest run of config `name` under root that has a checkpoint file.
std::optional<RunDir> find_resumable_run(const std::string& root, const std::string& name);

}  // namespace baton
