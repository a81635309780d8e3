#include "train_command.h"

#include <baton/comm/mpi.h>
#include <baton/comm/tcp.h>
#include <baton/core/atomic_file.h>
#include <baton/core/error.h>
#include <baton/discovery/discovery.h>
#include <baton/launch/heartbeat.h>
#include <baton/launch/job_place.h>
#include <baton/launch/run_session.h>
#include <baton/launch/stop_signals.h>
#include <baton/telemetry/chrome_trace.h>
#include <baton/telemetry/telemetry.h>
#include <baton/train/registry.h>
#include <baton/train/run_config.h>
#include <unistd.h>

#include "cli_checks.h"
#include "cli_paths.h"
#include "plan_command.h"
#include "progress_printer.h"

#ifdef BATON_HAVE_MPI
// The C API only (not OpenMPI's deprecated C++ bindings).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

#include <atomic>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace baton::cli {

void add_train_command(CLI::App& app, TrainArgs& a) {
  CLI::App* train = app.add_subcommand("train", "Train a model from a run config (JSON)");
  train
      ->add_option("config", a.config,
                   "Run config file (JSON; '-': standard input). Under mpirun the chief reads "
                   "it and every rank gets its text")
      ->required();
  train->add_option("--events", a.events,
                    "Also write telemetry as JSON lines to PATH ('-' for stdout)");
  CLI::Option* resume =
      train->add_flag("--resume", a.resume, "Continue from the newest valid checkpoint");
  train
      ->add_option("--resume-step-at-least", a.resume_step_at_least,
                   "With --resume: fail (exit 1) unless the checkpoint folder holds a checkpoint "
                   "at step N or later, rather than train again from an earlier step or from 0. "
                   "baton launch sets it on each attempt to the step of the newest checkpoint "
                   "the job's chief reported (the chief may now run on another host)")
      ->check(CLI::NonNegativeNumber)
      ->needs(resume);
  train->add_option("--checkpoint-dir", a.checkpoint_dir,
                    "Checkpoint directory (default: <run dir>/checkpoints)");
  train->add_option("--runs-dir", a.runs_dir,
                    "Where run directories go (default: $XDG_DATA_HOME/baton/runs)");
  train->add_option("--plugin-dir", a.plugin_dir, "Load model/dataset plugins from DIR");
  train->add_option("--seed", a.seed, "Override the config's seed")
      ->check(integer_in(0, std::numeric_limits<long long>::max()));
  train->add_option("--set", a.overrides, "Override a config value: key.path=value (repeatable)")
      ->take_all();
  train->add_flag("-q,--quiet", a.quiet, "Print only the summary");
  CLI::Option* db = train->add_option("--db", a.db,
                                      "Record the run in this history database (default: "
                                      "$XDG_DATA_HOME/baton/runs.db)");
  train->add_flag("--no-db", a.no_db, "Do not record the run in the history database")
      ->excludes(db);
  train->add_option("--run-id", a.run_id,
                    "The run's id (letters, digits, '.', '_', '-'); with --resume, continue "
                    "that run from its newest valid checkpoint");
  train->add_option("--owner", a.owner,
                    "HOST:PID:START: the process that answers for the run in the history while "
                    "it is running (default: this one). baton launch names itself, so a rank's "
                    "death and the restart after it leave the run running");
  train
      ->add_option("--heartbeat", a.heartbeat_s,
                   "Write a heartbeat JSON line to stdout every SECONDS, also while waiting in "
                   "a collective (what `baton launch` watches)")
      ->check(positive_seconds());
  train->add_option("--timeline", a.timeline,
                    "Write a Chrome trace (open it in Perfetto or chrome://tracing) of every "
                    "process's step phases and collectives, on one clock, to FILE when the run "
                    "ends; the history keeps it too (baton history timeline ID)");
  train
      ->add_option("--ps-workers", a.ps_workers,
                   "parameter_server (async): the job's worker slots, with workers reaching "
                   "the servers over TCP so one can die and be replaced while the others go on. "
                   "The MPI job then holds the chief and the servers; other workers run with "
                   "--ps-worker (baton launch sets these)")
      ->check(CLI::PositiveNumber);
  train
      ->add_option("--ps-worker", a.ps_worker,
                   "With --ps-workers: this process is worker K (1 to slots - 1) outside the "
                   "MPI job, joining the servers at --ps-servers")
      ->check(CLI::PositiveNumber);
  train->add_option("--ps-servers", a.ps_servers,
                    "With --ps-worker: the servers' HOST:PORT, comma-separated, in server order "
                    "(the chief's run_start event lists them)");
  train->add_option("--ps-bind", a.ps_bind,
                    "With --ps-workers: where the servers listen - the host name or numeric "
                    "address the job places each on, comma-separated in server order (or one "
                    "for all); each server listens only on the address it names on its own "
                    "host, and refuses a name that is not its host's (baton launch gives "
                    "127.0.0.1 when every task is on one host, else the hostfile's or "
                    "TF_CONFIG's hosts)");
  train
      ->add_option("--ps-generation", a.ps_generation,
                   "With --ps-worker: the launcher's count of the processes it started for this "
                   "slot; a server hands a held slot only to a higher one (a replacement)")
      ->check(CLI::NonNegativeNumber);
  train->add_option("--sample-log", a.sample_log,
                    "Write the dataset indices every replica trains on at each step to files "
                    "in DIR (one per process): for checking that restarts and rescales skip and "
                    "repeat no sample");
}

namespace {

// Exit codes: 0 completed; 130 stopped on request (as a shell reports
// Ctrl-C); 1 otherwise.
int exit_code(const std::string& status) {
  if (status == "completed") return 0;
  return status == "interrupted" ? 130 : 1;
}

void print_summary(std::FILE* out, const RunOutcome& o, const std::string& history_line) {
  const TrainSummary& s = o.summary;
  std::fprintf(out, "\n== %s: %s after %lld steps ==\n", o.dir.id.c_str(), s.status.c_str(),
               static_cast<long long>(s.steps));
  const bool lm = s.tokens_per_sample > 0;
  std::fprintf(out, "train loss      %.4f%s\n", s.train_loss,
               lm ? ("  (" + lm_text(s.train_loss) + ")").c_str() : "");
  if (s.has_validation) {
    std::fprintf(out, "val loss        %.4f%s\n", s.val_loss,
                 lm ? ("  (" + lm_text(s.val_loss) + ")").c_str() : "");
    std::fprintf(out, "val accuracy    %.2f%%%s\n", 100.0 * s.val_accuracy,
                 lm ? " (next byte)" : "");
  }
  if (s.has_staleness) {
    std::fprintf(out, "staleness       mean %.2f, max %lld (chief's updates)\n", s.staleness_mean,
                 static_cast<long long>(s.staleness_max));
  }
  if (!s.device_note.empty()) std::fprintf(out, "device          %s\n", s.device_note.c_str());
  if (!s.communication.empty()) {
    std::fprintf(out, "communication   %s\n", s.communication.c_str());
    if (!s.communication_note.empty()) {
      std::fprintf(out, "                (%s)\n", s.communication_note.c_str());
    }
  }
  std::fprintf(out, "throughput      %.0f samples/s", s.samples_per_s);
  if (lm) std::fprintf(out, ", %.0f tokens/s", s.tokens_per_s);
  std::fprintf(out, "\n");
  std::fprintf(out, "parameters      %lld\n", static_cast<long long>(s.parameters));
  if (s.model_flops_per_step > 0) {
    std::fprintf(out,
                 "model FLOPs     %sFLOP per step, %sFLOP/s (counted from the layer shapes, "
                 "over the measured time)\n",
                 si_text(s.model_flops_per_step).c_str(), si_text(s.model_flops_per_s).c_str());
  }
  if (s.mfu > 0) {
    std::fprintf(out, "MFU             %.2g%% of %sFLOP/s per GPU (%s)\n", 100.0 * s.mfu,
                 si_text(s.peak_flops).c_str(), s.peak_note.c_str());
  }
  std::fputs(memory_summary_text(s).c_str(), out);
  std::fprintf(out, "wall time       %.2f s\n", s.wall_time_s);
  std::fprintf(out, "run directory   %s\n", o.dir.path.c_str());
  std::fprintf(out, "  events        %s\n", o.dir.events().c_str());
  std::fprintf(out, "  checkpoints   %s\n", o.checkpoint_dir.c_str());
  std::fprintf(out, "  summary       %s\n", o.dir.summary().c_str());
  std::fprintf(out, "history         %s\n", history_line.c_str());
}

// The flags' paths, before anything runs: each failure names the flag
// (exit 2) instead of surfacing from deep in the run.
void check_flag_paths(const TrainArgs& a) {
  if (!a.events.empty() && a.events != "-") check_output_file("--events", a.events);
  // The chief alone writes it: other hosts need not have its folder.
  if (!a.timeline.empty() && rank_from_environment() <= 0) {
    check_output_file("--timeline", a.timeline);
  }
  if (!a.plugin_dir.empty()) check_existing_dir("--plugin-dir", a.plugin_dir);
  // A run directory's name (the config's name, a time stamp, a tag) and
  // its files go under --runs-dir; checkpoint files under --checkpoint-dir.
  if (!a.runs_dir.empty()) check_writable_dir("--runs-dir", a.runs_dir, 400);
  if (!a.checkpoint_dir.empty()) check_writable_dir("--checkpoint-dir", a.checkpoint_dir, 64);
  if (!a.sample_log.empty()) check_writable_dir("--sample-log", a.sample_log, 64);
  std::error_code ec;
  if (!a.db.empty() && std::filesystem::is_directory(a.db, ec)) {
    throw InputError("--db " + a.db + ": is a folder; expected a history database file");
  }
}

PsJoin ps_join_of(const TrainArgs& a) {
  PsJoin j;
  if ((a.ps_worker >= 1 || !a.ps_servers.empty()) && a.ps_workers <= 0) {
    throw InputError("--ps-worker and --ps-servers need --ps-workers (the job's worker slots)");
  }
  if ((a.ps_worker >= 1) != !a.ps_servers.empty()) {
    throw InputError(
        "--ps-worker and --ps-servers go together: a worker outside the MPI job "
        "and the servers it joins");
  }
  j.workers = a.ps_workers;
  j.worker = a.ps_worker;
  for (size_t at = 0; !a.ps_bind.empty() && at <= a.ps_bind.size();) {
    const size_t comma = a.ps_bind.find(',', at);
    std::string one =
        a.ps_bind.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (one.empty()) {
      throw InputError("--ps-bind " + a.ps_bind +
                       ": an empty entry; expected host names or addresses, comma-separated");
    }
    j.bind.push_back(std::move(one));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (!j.bind.empty() && a.ps_workers <= 0) {
    throw InputError("--ps-bind needs --ps-workers (servers that workers reach over TCP)");
  }
  j.generation = a.ps_generation;
  size_t at = 0;
  while (!a.ps_servers.empty() && at <= a.ps_servers.size()) {
    const size_t comma = a.ps_servers.find(',', at);
    const std::string one =
        a.ps_servers.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    std::string host;
    int port = 0;
    tcp::split_address(one, &host, &port, "--ps-servers");
    j.servers.push_back(one);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return j;
}

int train_in_process(const TrainArgs& a, const std::string& exe_path,
                     const std::atomic<bool>* stop) {
  check_flag_paths(a);
  check_run_id("--run-id", a.run_id);
  // From the start (loading data can take long): the supervisor hears this
  // process before the run has a step.
  std::atomic<int64_t> progress{-1};
  std::unique_ptr<Heartbeat> heartbeat;
  if (a.heartbeat_s > 0) {
    heartbeat =
        std::make_unique<Heartbeat>(a.heartbeat_s, rank_from_environment(), progress, stdout);
  }
  std::vector<std::string> overrides = a.overrides;
  if (a.seed >= 0) overrides.push_back("seed=" + std::to_string(a.seed));
  RunSpec req;
  // Under mpirun the chief reads the config ("-": its standard input) and
  // every rank gets its text: the other hosts need no copy of the file.
  req.config = load_run_config_text(read_on_chief(a.config),
                                    a.config == "-" ? "(standard input)" : a.config, overrides);
  req.plugin_dir = a.plugin_dir.empty() ? default_plugin_dir(exe_path) : a.plugin_dir;
  // The CUDA backends beside this executable (strategy.devices).
  req.gpu_library_dir =
      std::filesystem::path(default_cuda_library(exe_path)).parent_path().string();
  req.runs_root = a.runs_dir;
  req.checkpoint_dir = a.checkpoint_dir;
  req.resume = a.resume;
  req.resume_step_at_least = a.resume_step_at_least;
  req.run_id = a.run_id;
  req.progress = &progress;
  req.sample_log_dir = a.sample_log;
  req.timeline = !a.timeline.empty();
  req.ps_join = ps_join_of(a);
  req.record_history = !a.no_db;
  if (!a.owner.empty()) {
    // An owner on another host could never be judged gone from the hosts
    // that read this history (the interrupted rule sees its own host's
    // processes only): then this process answers for the run itself.
    const ProcessIdentity owner = ProcessIdentity::parse(a.owner, "--owner");
    if (owner.host == this_process().host) req.history_owner = owner;
  }
  req.history_db = a.db;
  req.stop = stop;
  req.on_history_error = [](const std::string& message) {
    // Not "baton: error": that is an input error's (exit 2) line, which
    // `baton launch` reads as such.
    std::fprintf(stderr, "baton: %s (training goes on, unrecorded)\n", message.c_str());
  };

  Telemetry telemetry;
  RunSession session(std::move(req), telemetry);
  const bool chief = session.chief();
  // Human output goes to stderr when stdout carries the event stream.
  std::FILE* human = a.events == "-" ? stderr : stdout;
  // Every rank may stream its events to stdout (mpirun forwards them, one
  // whole line at a time); files, the progress and the summary are the
  // chief's.
  if (a.events == "-" || (chief && !a.events.empty())) {
    telemetry.add(std::make_shared<JsonLinesSink>(a.events));
  }
  if (chief && !a.timeline.empty()) {
    // The chief's timeline event (every process's spans) becomes the file.
    telemetry.add(std::make_shared<CallbackSink>([path = a.timeline](const Event& e) {
      if (const auto* t = std::get_if<TimelineEvent>(&e)) {
        write_file_atomic(path, chrome_trace(t->trace).dump(
                                    -1, ' ', false, nlohmann::json::error_handler_t::replace) +
                                    "\n");
      }
    }));
  }
  if (chief && !a.quiet) {
    telemetry.add(std::make_shared<ProgressPrinter>(human, ::isatty(::fileno(human)) == 1));
  }
  if (session.resume_found_nothing()) {
    std::fprintf(human, "no earlier run of \"%s\" with a checkpoint under %s; starting fresh\n",
                 session.trainer().config().name.c_str(), session.runs_root().c_str());
  }
  const RunOutcome o = session.run();
  // Every event file closed and checked; a write that failed was said when
  // it happened (stderr, and an error log event in the history).
  telemetry.close_outputs();
  std::vector<std::string> write_failures = telemetry.write_failures();
  if (heartbeat && !heartbeat->failure().empty()) write_failures.push_back(heartbeat->failure());
  const auto report_write_failures = [&] {
    for (const std::string& f : write_failures) {
      std::fprintf(stderr, "baton: failed: output was lost: %s\n", f.c_str());
    }
    return 1;
  };
  if (!chief) return write_failures.empty() ? exit_code(o.summary.status) : report_write_failures();

  std::string history_line = "off (--no-db)";
  if (!o.history_db.empty()) {
    history_line = "run " + std::to_string(o.history_run) + " in " + o.history_db;
    if (!o.history_error.empty()) history_line = "incomplete: " + o.history_error;
  }
  print_summary(human, o, history_line);
  if (!a.timeline.empty()) {
    std::fprintf(human, "timeline        %s (Chrome trace: Perfetto, chrome://tracing)\n",
                 a.timeline.c_str());
  }
  if (!o.history_error.empty()) {
    // The training ran, but what was promised - a record of it - was not
    // kept: a failure, exit 1 (the run's files are complete).
    std::fprintf(stderr, "baton: failed: the run was not fully recorded: %s\n",
                 o.history_error.c_str());
    if (!write_failures.empty()) report_write_failures();
    return 1;
  }
  // The training ran, but its events were not all written where asked:
  // a failure, exit 1, as for a history that could not be kept.
  // (A run stopped on request still says 130, after the failure.)
  if (!write_failures.empty()) {
    report_write_failures();
    if (o.summary.status != "interrupted") return 1;
  }
  return exit_code(o.summary.status);
}

}  // namespace

int run_train(const TrainArgs& a, const std::string& exe_path) {
  // The stop handlers stay until the process is done, MPI_Finalize
  // included: under mpirun a SIGUSR1 forwarded late (the rank already
  // stopping because another rank was asked first) must not kill it.
  const StopSignals signals;
#ifdef BATON_HAVE_MPI
  if (MpiRuntime::in_mpi_job()) {
    MpiRuntime mpi;
    if (mpi.world_size() > 1) {
      // One rank failing must end the job: the others would wait in a
      // collective forever. MPI_Abort is how an MPI program does that.
      int code = 0;
      try {
        return train_in_process(a, exe_path, signals.flag());
      } catch (const InputError& e) {
        std::fprintf(stderr, "baton: error (rank %d): %s\n", mpi.world_rank(), e.what());
        code = 2;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "baton: failed (rank %d): %s\n", mpi.world_rank(), e.what());
        code = 1;
      }
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, code);
      return code;
    }
    return train_in_process(a, exe_path, signals.flag());
  }
#endif
  return train_in_process(a, exe_path, signals.flag());
}

}  // namespace baton::cli
