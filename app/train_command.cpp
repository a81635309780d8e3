#include "train_command.h"

#include <baton/cluster.h>
#include <baton/comm.h>
#include <baton/comm_mpi.h>
#include <baton/error.h>
#include <baton/history.h>
#include <baton/history_sink.h>
#include <baton/registry.h>
#include <baton/run_config.h>
#include <baton/run_dir.h>
#include <baton/trainer.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>

#include "progress_printer.h"

#ifdef BATON_HAVE_MPI
// The C API only (not OpenMPI's deprecated C++ bindings).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace baton::cli {

void add_train_command(CLI::App& app, TrainArgs& a) {
  CLI::App* train = app.add_subcommand("train", "Train a model from a run config (JSON)");
  train->add_option("config", a.config, "Run config file (JSON)")->required();
  train->add_option("--events", a.events,
                    "Also write telemetry as JSON lines to PATH ('-' for stdout)");
  train->add_flag("--resume", a.resume, "Continue from the newest valid checkpoint");
  train->add_option("--checkpoint-dir", a.checkpoint_dir,
                    "Checkpoint directory (default: <run dir>/checkpoints)");
  train->add_option("--runs-dir", a.runs_dir,
                    "Where run directories go (default: $XDG_DATA_HOME/baton/runs)");
  train->add_option("--plugin-dir", a.plugin_dir, "Load model/dataset plugins from DIR");
  train->add_option("--seed", a.seed, "Override the config's seed")->check(CLI::NonNegativeNumber);
  train->add_option("--set", a.overrides, "Override a config value: key.path=value (repeatable)")
      ->take_all();
  train->add_flag("-q,--quiet", a.quiet, "Print only the summary");
  CLI::Option* db = train->add_option("--db", a.db,
                                      "Record the run in this history database (default: "
                                      "$XDG_DATA_HOME/baton/runs.db)");
  train->add_flag("--no-db", a.no_db, "Do not record the run in the history database")
      ->excludes(db);
}

namespace {

// Stop requests. SIGINT (Ctrl-C), SIGTERM and SIGUSR1 (the signal mpirun
// passes on to every rank; the studio's Stop sends it) end the run at the
// next step boundary - every rank at the same step - with a checkpoint and
// the status "interrupted"; a second SIGINT or SIGTERM kills as usual. The
// flag has static storage because a signal handler can reach nothing else.
std::atomic<bool> g_stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the handler needs a lock-free flag");

extern "C" void on_stop_signal(int /*signo*/) { g_stop_requested.store(true); }

// Installs the handlers for the run and puts the old ones back after it.
class StopSignals {
 public:
  StopSignals() {
    g_stop_requested.store(false);
    for (size_t i = 0; i < kSignals.size(); ++i) {
      struct sigaction sa {};
      sa.sa_handler = on_stop_signal;
      sigemptyset(&sa.sa_mask);
      // Once is a request; twice (Ctrl-C again) is the default: terminate.
      sa.sa_flags = kSignals[i] == SIGUSR1 ? 0 : SA_RESETHAND;
      sigaction(kSignals[i], &sa, &old_[i]);
    }
  }
  ~StopSignals() {
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &old_[i], nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGUSR1};
  std::array<struct sigaction, 3> old_{};
};

// Exit codes: 0 completed; 130 stopped on request (as a shell reports
// Ctrl-C); 1 otherwise.
int exit_code(const std::string& status) {
  if (status == "completed") return 0;
  return status == "interrupted" ? 130 : 1;
}

// Under mpirun: this process's rank and the job's size, checked against
// TF_CONFIG when it is set (chief = rank 0, then workers, then ps).
struct JobPlace {
  int rank = 0, size = 1;
};

JobPlace place_in_job([[maybe_unused]] const RunConfig& cfg) {
  JobPlace p;
#ifdef BATON_HAVE_MPI
  if (MpiRuntime::is_initialized()) {
    MpiCommunicator world;
    p.rank = world.rank();
    p.size = world.size();
  }
#endif
  if (const char* tf = std::getenv("TF_CONFIG"); tf != nullptr && *tf != '\0') {
    const ClusterSpec spec = parse_tf_config(std::string(tf), "TF_CONFIG");
    validate_for_strategy(spec, cfg.strategy.type, "TF_CONFIG");
    if (spec.num_tasks() != p.size) {
      throw InputError("TF_CONFIG: cluster: lists " + std::to_string(spec.num_tasks()) +
                       " tasks, but the job has " + std::to_string(p.size) + " process(es)");
    }
    if (spec.task_type != TaskRole::kUnset &&
        spec.rank_of(spec.task_type, spec.task_index) != p.rank) {
      throw InputError("TF_CONFIG: task: " + std::string(to_string(spec.task_type)) + " " +
                       std::to_string(spec.task_index) + " is rank " +
                       std::to_string(spec.rank_of(spec.task_type, spec.task_index)) +
                       " of the cluster, but this process is rank " + std::to_string(p.rank));
    }
  }
  return p;
}

// The chief's choice of run id, given to every rank.
std::string agree_on_run_id([[maybe_unused]] const JobPlace& place, std::string id) {
#ifdef BATON_HAVE_MPI
  if (place.size > 1) {
    MpiCommunicator world;
    broadcast_string(world, id, 0);
  }
#endif
  return id;
}

// The host of every rank, in rank order without repeats (a collective:
// every rank calls it).
std::vector<std::string> job_hosts([[maybe_unused]] const JobPlace& place) {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) std::strcpy(name, "unknown");
  std::vector<std::string> hosts{name};
#ifdef BATON_HAVE_MPI
  if (place.size > 1) {
    std::vector<char> all(static_cast<size_t>(place.size) * sizeof(name));
    MPI_Allgather(name, sizeof(name), MPI_CHAR, all.data(), sizeof(name), MPI_CHAR, MPI_COMM_WORLD);
    hosts.clear();
    for (int r = 0; r < place.size; ++r) {
      std::string h(all.data() + static_cast<size_t>(r) * sizeof(name));
      if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
    }
  }
#endif
  return hosts;
}

int train_in_process(const TrainArgs& a, const std::string& exe_path) {
  std::vector<std::string> overrides = a.overrides;
  if (a.seed >= 0) overrides.push_back("seed=" + std::to_string(a.seed));
  RunConfig cfg = load_run_config(a.config, overrides);
  const JobPlace place = place_in_job(cfg);
  const bool chief = place.rank == 0;

  Registry registry;
  registry.load_plugin_dir(a.plugin_dir.empty() ? default_plugin_dir(exe_path) : a.plugin_dir);

  // Human output goes to stderr when stdout carries the event stream.
  std::FILE* human = a.events == "-" ? stderr : stdout;
  const std::string root = a.runs_dir.empty() ? default_runs_root() : a.runs_dir;
  std::optional<RunDir> found;
  if (chief && a.resume && a.checkpoint_dir.empty()) found = find_resumable_run(root, cfg.name);
  const std::string run_id =
      agree_on_run_id(place, found ? found->id : (chief ? make_run_id(cfg.name) : ""));
  const RunDir planned{run_id, root + "/" + run_id};

  TrainOptions opt;
  opt.run_id = run_id;
  opt.resume = a.resume;
  opt.stop = &g_stop_requested;
  opt.checkpoint_dir = !a.checkpoint_dir.empty()     ? a.checkpoint_dir
                       : !cfg.checkpoint.dir.empty() ? cfg.checkpoint.dir
                                                     : planned.checkpoints();

  // Every rank may stream its events to stdout (mpirun forwards them, one
  // whole line at a time); files, the progress and the summary are the
  // chief's.
  Telemetry telemetry;
  if (a.events == "-" || (chief && !a.events.empty())) {
    telemetry.add(std::make_shared<JsonLinesSink>(a.events));
  }
  if (chief && !a.quiet) {
    telemetry.add(std::make_shared<ProgressPrinter>(human, ::isatty(::fileno(human)) == 1));
  }

  // A history database that is not Baton's (or is from a newer Baton)
  // fails the command before anything else is built or written.
  const std::string db_path = a.db.empty() ? default_history_db_path() : a.db;
  if (chief && !a.no_db) HistoryStore check(db_path);

  // Building the trainer validates the model and data against the plugins:
  // a bad config fails here, before anything is written.
  Trainer trainer(cfg, registry, telemetry, opt);
  const std::vector<std::string> hosts = job_hosts(place);
  const StopSignals signals;
  if (!chief) return exit_code(trainer.run().status);
  // The chief alone records the run in the history (as it alone writes the
  // run directory).
  std::shared_ptr<HistorySink> history;
  if (!a.no_db) {
    HistoryRunInfo info;
    info.hosts = hosts;
    info.topology = {{"world_size", place.size},
                     {"replicas", trainer.strategy().num_replicas()},
                     {"communication", trainer.strategy().communication()},
                     {"hosts", hosts}};
    if (const char* tf = std::getenv("TF_CONFIG"); tf != nullptr && *tf != '\0') {
      info.topology["tf_config"] = nlohmann::json::parse(tf, nullptr, false);
    }
    history = std::make_shared<HistorySink>(db_path, info);
    telemetry.add(history);
  }
  const RunDir dir = create_run_dir(root, run_id);
  telemetry.add(std::make_shared<JsonLinesSink>(dir.events()));
  write_file_atomic(dir.config(), cfg.raw.dump(2) + "\n");
  if (a.resume && !found && a.checkpoint_dir.empty()) {
    std::fprintf(human, "no earlier run of \"%s\" with a checkpoint under %s; starting fresh\n",
                 cfg.name.c_str(), root.c_str());
  }

  TrainSummary s = trainer.run();
  std::string history_line = "off (--no-db)";
  if (history) {
    try {
      history->close();
      history_line = "run " + std::to_string(history->run_row_id()) + " in " + db_path;
    } catch (const std::exception& e) {
      // The training itself succeeded: its exit code stands.
      std::fprintf(stderr, "baton: warning: the run was not fully recorded: %s\n", e.what());
      history_line = "incomplete (see the warning above)";
    }
  }

  nlohmann::json js = {{"run", dir.id},
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
  write_file_atomic(dir.summary(), js.dump(2) + "\n");

  std::fprintf(human, "\n== %s: %s after %lld steps ==\n", dir.id.c_str(), s.status.c_str(),
               static_cast<long long>(s.steps));
  std::fprintf(human, "train loss      %.4f\n", s.train_loss);
  if (s.has_validation) {
    std::fprintf(human, "val loss        %.4f\n", s.val_loss);
    std::fprintf(human, "val accuracy    %.2f%%\n", 100.0 * s.val_accuracy);
  }
  if (s.has_staleness) {
    std::fprintf(human, "staleness       mean %.2f, max %lld (chief's updates)\n", s.staleness_mean,
                 static_cast<long long>(s.staleness_max));
  }
  std::fprintf(human, "throughput      %.0f samples/s\n", s.samples_per_s);
  std::fprintf(human, "wall time       %.2f s\n", s.wall_time_s);
  std::fprintf(human, "run directory   %s\n", dir.path.c_str());
  std::fprintf(human, "  events        %s\n", dir.events().c_str());
  std::fprintf(human, "  checkpoints   %s\n", opt.checkpoint_dir.c_str());
  std::fprintf(human, "  summary       %s\n", dir.summary().c_str());
  std::fprintf(human, "history         %s\n", history_line.c_str());
  return exit_code(s.status);
}

}  // namespace

int run_train(const TrainArgs& a, const std::string& exe_path) {
#ifdef BATON_HAVE_MPI
  if (MpiRuntime::in_mpi_job()) {
    MpiRuntime mpi;
    if (mpi.world_size() > 1) {
      // One rank failing must end the job: the others would wait in a
      // collective forever. MPI_Abort is how an MPI program does that.
      int code = 0;
      try {
        return train_in_process(a, exe_path);
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
    return train_in_process(a, exe_path);
  }
#endif
  return train_in_process(a, exe_path);
}

}  // namespace baton::cli
