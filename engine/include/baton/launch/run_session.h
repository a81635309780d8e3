// One way to start a run, for `baton train` (on every rank of an mpirun job
// or alone) and the studio's embedded runs alike. A RunSession assembles
// what a run needs around the Trainer:
//  - its place in the MPI job (checked against TF_CONFIG) and, on the chief,
//    the run id (a new one, or the resumed run's), agreed by every rank;
//  - the plugin registry, the checkpoint directory, the stop flag;
//  - on the chief: a check that the history database is Baton's, then the
//    run directory (config.json as run, events.jsonl, summary.json), the
//    history record (HistorySink, with the job's hosts and topology).
// The caller adds its own telemetry sinks (progress, an event stream, the
// studio's queue) to the Telemetry it passes in; the session adds the
// run's files and the history on the chief. Construction builds and so
// validates everything: a bad config fails there, before anything is
// written.
#pragma once

#include <baton/core/process_identity.h>

#include <baton/launch/job_place.h>
#include <baton/telemetry/telemetry.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <baton/train/run_dir.h>
#include <baton/train/trainer.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace baton {

class HistorySink;

struct RunSpec {
  RunConfig config;            // parsed: load_run_config / parse_run_config
  std::string plugin_dir;      // model and dataset plugins
  // The CUDA backends (TrainOptions::gpu_library_dir); "" : the folder
  // above plugin_dir (<exe>/../lib/baton, in the build and installed).
  std::string gpu_library_dir;
  std::string runs_root;       // "" = default_runs_root()
  std::string checkpoint_dir;  // "" = the config's checkpoint.dir, else <run dir>/checkpoints
  std::string run_id;          // "" = a new id from the config's name (or the resumed run's)
  bool resume = false;         // continue the newest run of this config with a checkpoint
  int64_t resume_step_at_least = 0;  // TrainOptions::resume_step_at_least
  bool in_mpi_job = true;      // take the place from MPI and TF_CONFIG (false: alone)
  bool record_history = true;  // record the run in the history (the chief)
  std::string history_db;      // "" = default_history_db_path()
  // Who answers for the run in the history while it is running: this
  // process when unset; `baton launch` names itself (HistorySinkOptions::owner).
  std::optional<ProcessIdentity> history_owner;
  // Merged into the topology recorded with the run ("launcher", "cluster").
  nlohmann::json topology = nlohmann::json::object();
  const std::atomic<bool>* stop = nullptr;   // set to stop at the next step
  std::atomic<int64_t>* progress = nullptr;  // steps done (TrainOptions::progress)
  std::string sample_log_dir;                // TrainOptions::sample_log_dir
  bool timeline = false;                     // TrainOptions::timeline
  // TrainOptions::ps_join. A worker outside the MPI job (worker >= 1) is
  // that worker of the job, alone in its own process: never the chief.
  PsJoin ps_join;
  // Called (on the history's writer thread) when the history database
  // fails during the run; the session also emits it as an error log event.
  std::function<void(const std::string&)> on_history_error;
};

struct RunOutcome {
  TrainSummary summary;
  bool chief = true;
  RunDir dir;  // the chief's run directory (empty elsewhere)
  std::string checkpoint_dir;
  std::string history_db;     // where the run was recorded ("" = not recorded)
  int64_t history_run = 0;    // its row there
  std::string history_error;  // why the record is incomplete ("" = complete)
  int64_t history_lost = 0;   // events that were not recorded
};

class RunSession {
 public:
  // `telemetry` must outlive the session. Throws InputError for bad input
  // (config, TF_CONFIG, plugins, a foreign history file) and RuntimeError.
  RunSession(RunSpec request, Telemetry& telemetry);
  ~RunSession();
  RunSession(const RunSession&) = delete;
  RunSession& operator=(const RunSession&) = delete;

  const JobPlace& place() const { return place_; }
  bool chief() const { return place_.chief(); }
  const std::string& run_id() const { return run_id_; }
  const std::string& runs_root() const { return root_; }
  const std::string& checkpoint_dir() const { return checkpoint_dir_; }
  const std::vector<std::string>& hosts() const { return hosts_; }
  // --resume found no earlier run with a checkpoint (it starts fresh).
  bool resume_found_nothing() const { return resume_missing_; }
  Trainer& trainer() { return *trainer_; }

  // Trains. On the chief first the run directory and the history record,
  // then the run, then the history closed and summary.json written. What
  // the trainer throws goes up after its run_end is recorded.
  RunOutcome run();

 private:
  void open_records(RunOutcome& out);
  void close_history(RunOutcome& out);

  RunSpec req_;
  Telemetry& telemetry_;
  JobPlace place_;
  std::string root_, run_id_, checkpoint_dir_, db_path_;
  bool resume_missing_ = false;
  std::vector<std::string> hosts_, rank_hosts_;
  Registry registry_;
  std::unique_ptr<Trainer> trainer_;
  std::shared_ptr<HistorySink> history_;
};

// summary.json: the run's outcome in the run directory.
nlohmann::json summary_json(const std::string& run_id, const TrainSummary& s);

}  // namespace baton
