#include <baton/history/sink.h>
#include <baton/history/store.h>
#include <baton/launch/run_session.h>

#include <cstdlib>
#include <exception>
#include <filesystem>

namespace baton {

RunSession::RunSession(RunSpec request, Telemetry& telemetry)
    : req_(std::move(request)), telemetry_(telemetry) {
  const RunConfig& cfg = req_.config;
  if (req_.ps_join.worker >= 1) {
    place_ = JobPlace{req_.ps_join.worker, 1};
  } else if (req_.in_mpi_job) {
    place_ = place_in_job(cfg.strategy.type);
  }
  registry_.load_plugin_dir(req_.plugin_dir);

  root_ = req_.runs_root.empty() ? default_runs_root() : req_.runs_root;
  std::optional<RunDir> found;
  // A given run id names the run to continue; otherwise the newest of
  // this config's runs with a checkpoint.
  if (chief() && req_.resume && req_.checkpoint_dir.empty() && req_.run_id.empty()) {
    found = find_resumable_run(root_, cfg.name);
    resume_missing_ = !found;
  }
  std::string id = req_.run_id;
  if (found) id = found->id;
  if (id.empty() && chief()) id = make_run_id(cfg.name);
  run_id_ = agree_on_run_id(place_, id);
  const RunDir planned{run_id_, root_ + "/" + run_id_};
  checkpoint_dir_ = !req_.checkpoint_dir.empty()  ? req_.checkpoint_dir
                    : !cfg.checkpoint.dir.empty() ? cfg.checkpoint.dir
                                                  : planned.checkpoints();

  // A history database that is not Baton's (or is from a newer Baton) fails
  // the run before anything else is built or written.
  db_path_ = req_.history_db.empty() ? default_history_db_path() : req_.history_db;
  if (chief() && req_.record_history) const HistoryStore check(db_path_);

  TrainOptions opt;
  opt.run_id = run_id_;
  opt.resume = req_.resume;
  opt.resume_step_at_least = req_.resume_step_at_least;
  opt.stop = req_.stop;
  opt.progress = req_.progress;
  opt.sample_log_dir = req_.sample_log_dir;
  opt.timeline = req_.timeline;
  opt.ps_join = req_.ps_join;
  opt.checkpoint_dir = checkpoint_dir_;
  opt.gpu_library_dir =
      !req_.gpu_library_dir.empty()
          ? req_.gpu_library_dir
          : std::filesystem::path(req_.plugin_dir).lexically_normal().parent_path().string();
  // Building the trainer validates the model and data against the plugins.
  trainer_ = std::make_unique<Trainer>(cfg, registry_, telemetry_, opt);
  rank_hosts_ = job_rank_hosts(place_);
  hosts_ = unique_hosts(rank_hosts_);
}

RunSession::~RunSession() = default;

void RunSession::open_records(RunOutcome& out) {
  if (req_.record_history) {
    HistoryRunInfo info;
    info.hosts = hosts_;
    info.topology = {{"world_size", place_.size},
                     {"replicas", trainer_->strategy().num_replicas()},
                     {"communication", trainer_->strategy().communication()},
                     {"hosts", hosts_},
                     // Which host each rank ran on: what `baton calibrate
                     // --from-history` needs to tell a link's class.
                     {"rank_hosts", rank_hosts_}};
    if (const char* tf = std::getenv("TF_CONFIG");
        req_.in_mpi_job && tf != nullptr && *tf != '\0') {
      info.topology["tf_config"] = nlohmann::json::parse(tf, nullptr, false);
    }
    if (req_.topology.is_object()) {
      for (auto it = req_.topology.begin(); it != req_.topology.end(); ++it) {
        info.topology[it.key()] = it.value();
      }
    }
    HistorySinkOptions hopt;
    hopt.owner = req_.history_owner;
    // A failing database is said at once, in the run's log (the studio shows
    // it) and to the caller; the training goes on unrecorded.
    hopt.on_error = [this](const std::string& message) {
      telemetry_.emit(LogEvent{run_id_, LogLevel::kError,
                               message + " (the run goes on; it is no longer recorded)"});
      if (req_.on_history_error) req_.on_history_error(message);
    };
    history_ = std::make_shared<HistorySink>(db_path_, info, hopt);
    telemetry_.add(history_);
    out.history_db = db_path_;
  }
  out.dir = create_run_dir(root_, run_id_);
  telemetry_.add(std::make_shared<JsonLinesSink>(out.dir.events()));
  write_file_atomic(out.dir.config(), req_.config.raw.dump(2) + "\n");
}

void RunSession::close_history(RunOutcome& out) {
  if (!history_) return;
  try {
    history_->close();
    out.history_run = history_->run_row_id();
  } catch (const std::exception& e) {
    // The training's own outcome stands; the caller reports this.
    out.history_error = e.what();
    out.history_lost = history_->lost_events();
  }
}

RunOutcome RunSession::run() {
  RunOutcome out;
  out.chief = chief();
  out.checkpoint_dir = checkpoint_dir_;
  if (!chief()) {
    out.summary = trainer_->run();
    return out;
  }
  open_records(out);
  try {
    out.summary = trainer_->run();
  } catch (...) {
    // The run_end "failed" is recorded before the error goes up; a
    // recording error must not hide the run's own.
    RunOutcome ignored;
    close_history(ignored);
    throw;
  }
  close_history(out);
  write_file_atomic(out.dir.summary(), summary_json(run_id_, out.summary).dump(2) + "\n");
  return out;
}

nlohmann::json summary_json(const std::string& run_id, const TrainSummary& s) {
  nlohmann::json js = {{"run", run_id},
                       {"status", s.status},
                       {"steps", s.steps},
                       {"start_step", s.start_step},
                       {"train_loss", s.train_loss},
                       {"samples_per_s", s.samples_per_s},
                       {"wall_time_s", s.wall_time_s},
                       {"checkpoint", s.last_checkpoint}};
  if (s.has_validation) {
    js["val_loss"] = s.val_loss;
    js["val_accuracy"] = s.val_accuracy;
  }
  if (s.has_staleness) {
    js["staleness_mean"] = s.staleness_mean;
    js["staleness_max"] = s.staleness_max;
  }
  js["parameters"] = s.parameters;
  if (s.tokens_per_sample > 0) {
    js["tokens_per_sample"] = s.tokens_per_sample;
    js["tokens_per_s"] = s.tokens_per_s;
  }
  if (s.model_flops_per_step > 0) {
    // Counted from the layer shapes, not measured (the per-second figure
    // divides that count by the measured time).
    js["model_flops_per_step"] = s.model_flops_per_step;
    js["model_flops_per_s"] = s.model_flops_per_s;
  }
  if (s.mfu > 0) {
    // Over the devices' peak, which is modelled (peak_note says how).
    js["mfu"] = s.mfu;
    js["peak_flops"] = s.peak_flops;
    js["peak_note"] = s.peak_note;
  }
  if (s.memory.per_process() > 0) {
    // The plan is modelled from the layer shapes; the peak is measured.
    const MemoryFigures& m = s.memory;
    js["memory"] = {
        {"planned_modelled", memory_figures_json(m)},
        {"measured",
         {{"peak_resident", s.memory_peak_bytes}, {"resident_at_start", s.memory_start_bytes}}}};
  }
  if (!s.communication.empty()) js["communication"] = s.communication;
  if (!s.communication_note.empty()) js["communication_note"] = s.communication_note;
  if (!s.device.empty()) js["device"] = s.device;
  if (!s.device_note.empty()) js["device_note"] = s.device_note;
  return js;
}

}  // namespace baton
