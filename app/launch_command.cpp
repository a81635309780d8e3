#include "launch_command.h"

#include <baton/cluster/cluster_spec.h>
#include <baton/core/child_process.h>
#include <baton/core/error.h>
#include <baton/core/temp_file.h>
#include <baton/history/sink.h>
#include <baton/history/store.h>
#include <baton/launch/host_pool.h>
#include <baton/launch/launcher.h>
#include <baton/launch/stop_signals.h>
#include <baton/train/run_config.h>
#include <baton/train/run_dir.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli_checks.h"
#include "cli_paths.h"
#include "output_file.h"

namespace baton::cli {

void add_launch_command(CLI::App& app, LaunchArgs& a) {
  CLI::App* l = app.add_subcommand(
      "launch",
      "Run a config as an mpirun job that restarts from its newest checkpoint when a rank "
      "dies or hangs");
  l->add_option("config", a.config, "Run config file (JSON; '-': standard input)")->required();
  l->add_option("--np", a.np, "Ranks (default: the hostfile's slots, or 1)")
      ->check(integer_in(1, 1 << 20));
  CLI::Option* hostfile =
      l->add_option("--hostfile", a.hostfile, "OpenMPI hostfile: the hosts and their slots");
  l->add_option("--tf-config", a.tf_config,
                "A TF_CONFIG file (JSON): one rank per task - chief, workers, then parameter "
                "servers - on the hosts it names")
      ->excludes(hostfile);
  l->add_option("--max-restarts", a.max_restarts,
                "Restarts after a failure before the run is failed (default 3)")
      ->check(integer_in(0, 1 << 20));
  l->add_option("--heartbeat", a.heartbeat_s, "Seconds between the ranks' heartbeats (default 1)")
      ->check(positive_seconds());
  l->add_option("--heartbeat-timeout", a.heartbeat_timeout_s,
                "A rank silent this many seconds is hung: restart (default 30)")
      ->check(positive_seconds());
  l->add_option("--progress-timeout", a.progress_timeout_s,
                "No rank finishing a step for this many seconds (all still beating) is a stuck "
                "collective: restart (default 600)")
      ->check(positive_seconds());
  l->add_option("--min-workers", a.min_workers,
                "Elastic: start (and go on) with at least this many workers, waiting for hosts "
                "while there are fewer slots (default 1)")
      ->check(integer_in(1, 1 << 20));
  l->add_option("--max-workers", a.max_workers,
                "Elastic: at most this many workers; more hosts joining while the job has fewer "
                "make it continue with more (default: every slot)")
      ->check(integer_in(1, 1 << 20));
  l->add_option("--host-discovery", a.host_discovery,
                "Elastic: a command (run by /bin/sh) that prints the usable hosts, one "
                "\"host:slots\" per line; read at the start and every --discovery-interval");
  l->add_option("--discovery-interval", a.discovery_interval_s,
                "Elastic: seconds between readings of the host list (default 2)")
      ->check(positive_seconds());
  l->add_option("--host-cooldown", a.host_cooldown_s,
                "Elastic: a host whose rank failed is left out this many seconds, doubled for "
                "each of its earlier failures (default 10)")
      ->check(positive_seconds());
  l->add_option("--start-timeout", a.start_timeout_s,
                "Elastic: how long to wait for --min-workers slots before the run fails "
                "(default 600)")
      ->check(positive_seconds());
  l->add_option("--events", a.events,
                "Append the chief's telemetry and the launcher's restart events as JSON lines to "
                "PATH ('-' for stdout)");
  l->add_option("--db", a.db,
                "History database (default: $XDG_DATA_HOME/baton/runs.db); the run's attempts and "
                "restarts are recorded there");
  l->add_option("--runs-dir", a.runs_dir, "Where run directories go");
  l->add_option("--plugin-dir", a.plugin_dir, "Load model/dataset plugins from DIR");
  l->add_option("--run-id", a.run_id, "The run's id (default: a new one from the config's name)");
  l->add_flag("--resume", a.resume,
              "Continue a run (--run-id, else the newest of this config's) from its newest "
              "checkpoint");
  l->add_option("--seed", a.seed, "Override the config's seed")
      ->check(integer_in(0, std::numeric_limits<long long>::max()));
  l->add_option("--set", a.overrides, "Override a config value: key.path=value (repeatable)")
      ->take_all();
  l->add_option("--rank-wrapper", a.rank_wrapper,
                "A program every rank runs baton under (a profiler, a fault injector); "
                "repeatable, in order")
      ->take_all();
  l->add_option("--sample-log", a.sample_log,
                "Passed on to the ranks (baton train --sample-log): each step's sample indices "
                "in files in DIR");
  l->add_option("--timeline", a.timeline,
                "Passed on to the ranks (baton train --timeline): the chief writes a Chrome "
                "trace of every rank's step phases and collectives to FILE at the end of each "
                "attempt; the history keeps each attempt's");
  l->add_flag("-q,--quiet", a.quiet, "Print only restarts and the outcome (not a line per epoch)");
}

namespace {

std::string absolute(const std::string& path) {
  return path.empty() ? path : std::filesystem::absolute(path).lexically_normal().string();
}

// A run whose every attempt failed before its chief recorded it: its
// record, failed with `why`, and the launcher's error event.
void record_unstarted_run(const std::string& db_path, const std::string& run_id,
                          const RunConfig& cfg, int ranks, int64_t step, const std::string& why,
                          const std::string& data) {
  {
    HistorySink sink(db_path);
    RunStartEvent start;
    start.run = run_id;
    start.name = cfg.name;
    start.strategy = cfg.strategy.type;
    // One replica a process (the chief would say how many it made); an
    // elastic job's count is the launcher's, unknown here.
    start.replicas = std::max(
        1, cfg.strategy.type == "parameter_server" ? ranks - cfg.strategy.num_ps : ranks);
    start.config = cfg.raw;
    sink.emit(start);
    RunEndEvent end;
    end.run = run_id;
    end.status = "failed";  // and why: the launcher's event below
    sink.emit(end);
    sink.close();
  }
  HistoryStore(db_path, HistoryStore::Open::kExisting)
      .record_launcher_event(run_id, step, "error", why, data, true);
}

}  // namespace

int run_launch(const LaunchArgs& a, const std::string& exe_path) {
  // Everything checked before a rank starts: each error names its flag or
  // file (exit 2).
  std::vector<std::string> overrides = a.overrides;
  if (a.seed >= 0) overrides.push_back("seed=" + std::to_string(a.seed));
  // The config goes to rank 0 on mpirun's standard input, its paths made
  // absolute: a rank on another host needs no copy of the file.
  std::string text, source = a.config == "-" ? "(standard input)" : a.config;
  std::string base = std::filesystem::current_path().string();
  if (a.config == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    if (!std::filesystem::is_regular_file(a.config)) {
      throw InputError("launch: " + a.config + ": no such config file");
    }
    std::ifstream in(a.config);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    base = std::filesystem::absolute(a.config).parent_path().string();
  }
  const RunConfig cfg = load_run_config_text(text, source, overrides);
  if (!a.events.empty() && a.events != "-") check_output_file("--events", a.events);
  if (!a.runs_dir.empty()) check_writable_dir("--runs-dir", a.runs_dir, 400);
  if (!a.plugin_dir.empty()) check_existing_dir("--plugin-dir", a.plugin_dir);
  const bool elastic = a.min_workers > 0 || a.max_workers > 0 || !a.host_discovery.empty();
  if (elastic && !a.tf_config.empty()) {
    throw InputError(
        "--tf-config fixes the tasks; --min-workers, --max-workers and "
        "--host-discovery make the worker count follow the hosts: give one");
  }
  int slots = 0;
  std::vector<HostfileEntry> hosts;
  if (!a.hostfile.empty()) {
    hosts = read_hostfile(a.hostfile);
    slots = total_slots(hosts);
  }
  // TF_CONFIG: its hosts, a slot per task, become the job's hostfile
  // (mpirun fills them in order: chief, workers, then servers).
  std::optional<TempFile> tf_hostfile;
  // An asynchronous parameter-server job's MPI job: the chief's and the
  // servers' tasks (the workers take the other tasks' slots).
  std::vector<HostfileEntry> tf_core_hosts;
  if (!a.tf_config.empty()) {
    std::ifstream in(a.tf_config);
    if (!in) throw InputError("--tf-config " + a.tf_config + ": cannot open the file");
    const std::string doc((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const ClusterSpec cluster = parse_tf_config(doc, a.tf_config);
    hosts = hostfile_from_spec(cluster);
    slots = total_slots(hosts);
    if (a.np > 0 && a.np != slots) {
      throw InputError("--np " + std::to_string(a.np) + ": " + a.tf_config + " has " +
                       std::to_string(slots) + " tasks (one rank each); leave --np out");
    }
    const int servers = static_cast<int>(cluster.ps.size());
    const bool ps = cfg.strategy.type == "parameter_server";
    if (ps ? servers != cfg.strategy.num_ps : servers > 0) {
      throw InputError(a.tf_config + ": " + std::to_string(servers) +
                       " ps task(s), but the config's strategy is " + cfg.strategy.type +
                       (ps ? " with num_ps " + std::to_string(cfg.strategy.num_ps) : "") +
                       " (set strategy.num_ps to the ps tasks, or drop them)");
    }
    tf_hostfile.emplace("baton-tf-hosts", to_hostfile(hosts));
    if (!cluster.chief.empty() || !cluster.ps.empty()) {
      ClusterSpec core;
      core.chief = cluster.chief;
      core.ps = cluster.ps;
      tf_core_hosts = hostfile_from_spec(core);
    }
  }
  if (elastic) {
    if (a.np > 0) {
      throw InputError(
          "--np fixes the worker count; with --min-workers, --max-workers or "
          "--host-discovery the count follows the hosts (leave --np out)");
    }
    if (!a.host_discovery.empty() && !a.hostfile.empty()) {
      throw InputError("--host-discovery and --hostfile both list the hosts: give one of them");
    }
    if (a.host_discovery.empty() && a.hostfile.empty()) {
      throw InputError(
          "--min-workers/--max-workers need the hosts: --host-discovery CMD or --hostfile FILE");
    }
    if (a.min_workers > 0 && a.max_workers > 0 && a.min_workers > a.max_workers) {
      throw InputError("--min-workers " + std::to_string(a.min_workers) +
                       " is above --max-workers " + std::to_string(a.max_workers));
    }
    // The command's first reading is checked here: a command that fails or
    // prints garbage is the user's to fix before anything starts.
    if (!a.host_discovery.empty()) hosts = discover_hosts(a.host_discovery, 10.0);
  }
  const std::string mpirun = find_on_path("mpirun");
  if (mpirun.empty()) throw InputError("launch: mpirun is not on PATH (install openmpi-bin)");
  check_run_id("--run-id", a.run_id);
  if (a.heartbeat_timeout_s <= a.heartbeat_s || a.progress_timeout_s <= a.heartbeat_s) {
    throw InputError(
        "--heartbeat-timeout and --progress-timeout must be longer than --heartbeat (" +
        std::to_string(a.heartbeat_s) + " s): a rank is heard only that often");
  }
  for (const auto& w : a.rank_wrapper) {
    if (w.empty()) throw InputError("--rank-wrapper: an empty program");
  }

  LaunchSpec spec;
  spec.mpirun = mpirun;
  spec.job.ranks = a.np > 0 ? a.np : std::max(1, slots);
  // Asynchronous parameter servers on this host outlive their workers: the
  // MPI job holds the chief and the servers, the other workers join them
  // over TCP and are replaced when they die (LaunchSpec::ps_workers).
  const int total_ranks = spec.job.ranks;
  const int num_ps = std::max(1, cfg.strategy.num_ps);
  // Elastic (--max-workers ranks at most): the workers come and go with
  // their hosts while the servers go on.
  // A fixed hostfile is placed the same way, its hosts never changing.
  const bool ps_async = cfg.strategy.type == "parameter_server" && cfg.strategy.mode == "async";
  const bool ps_fixed_hosts = ps_async && !elastic &&
                              (!a.hostfile.empty() || !a.tf_config.empty()) &&
                              total_ranks - num_ps >= 2;
  if (ps_async && !elastic && a.hostfile.empty() && a.tf_config.empty() &&
      total_ranks - num_ps >= 2) {
    spec.ps_workers = total_ranks - num_ps;
    spec.ps_servers = num_ps;
    spec.job.ranks = 1 + num_ps;
  } else if (ps_fixed_hosts) {
    spec.ps_workers = total_ranks - num_ps;
    spec.ps_servers = num_ps;
  } else if (ps_async && elastic && a.max_workers - num_ps >= 2) {
    spec.ps_workers = a.max_workers - num_ps;
    spec.ps_servers = num_ps;
  }
  // The job's secret only where its tasks prove it to each other: the
  // parameter servers and the workers that join them over TCP.
  spec.job.send_secret = spec.ps_workers > 0;
  for (const auto& [k, v] :
       mpirun_environment(spec.job.send_secret ? JobSecret::kMade : JobSecret::kLeftOut)) {
    spec.mpirun_env.push_back(k + "=" + v);
  }
  spec.job.hostfile = tf_hostfile ? tf_hostfile->path() : absolute(a.hostfile);
  spec.job.available_slots = slots;
  spec.job.baton = exe_path;
  spec.job.config = "-";
  spec.config_text = absolutize_paths(nlohmann::json::parse(text), base).dump() + "\n";
  spec.job.runs_dir = absolute(a.runs_dir);
  spec.job.history_db = absolute(a.db);
  spec.job.wrapper = a.rank_wrapper;
  for (const auto& o : overrides)
    spec.job.train_args.insert(spec.job.train_args.end(), {"--set", o});
  if (!a.plugin_dir.empty()) {
    spec.job.train_args.insert(spec.job.train_args.end(), {"--plugin-dir", absolute(a.plugin_dir)});
  }
  if (!a.sample_log.empty()) {
    check_writable_dir("--sample-log", a.sample_log, 64);
    spec.job.train_args.insert(spec.job.train_args.end(), {"--sample-log", absolute(a.sample_log)});
  }
  if (!a.timeline.empty()) {
    check_output_file("--timeline", a.timeline);
    spec.job.train_args.insert(spec.job.train_args.end(), {"--timeline", absolute(a.timeline)});
  }
  std::string run_id = a.run_id;
  if (run_id.empty() && a.resume) {
    const auto found =
        find_resumable_run(a.runs_dir.empty() ? default_runs_root() : a.runs_dir, cfg.name);
    if (!found)
      throw InputError("--resume: no earlier run of \"" + cfg.name + "\" with a checkpoint");
    run_id = found->id;
  }
  spec.run_id = run_id.empty() ? make_run_id(cfg.name) : run_id;
  spec.resume = a.resume;
  spec.max_restarts = a.max_restarts;
  spec.heartbeat_s = a.heartbeat_s;
  spec.heartbeat_timeout_s = a.heartbeat_timeout_s;
  spec.progress_timeout_s = a.progress_timeout_s;
  if (elastic) {
    ElasticSpec& el = spec.elastic;
    el.enabled = true;
    el.discovery = a.host_discovery;
    el.hosts = hosts;
    el.min_workers = a.min_workers > 0 ? a.min_workers : 1;
    if (a.max_workers > 0) el.max_workers = a.max_workers;
    el.discovery_interval_s = a.discovery_interval_s;
    el.cooldown_s = a.host_cooldown_s;
    el.start_timeout_s = a.start_timeout_s;
    spec.job.hostfile.clear();
  } else if (ps_fixed_hosts) {
    ElasticSpec& el = spec.elastic;
    el.enabled = true;
    el.hosts = hosts;
    spec.ps_core_hosts = tf_core_hosts;
    el.min_workers = el.max_workers = total_ranks;
    el.cooldown_s = a.host_cooldown_s;
    el.start_timeout_s = a.start_timeout_s;
    spec.job.hostfile.clear();
  }

  // Streamed as the lines come (a reader follows the file while it grows),
  // appended to what the file holds, as `baton train --events` does.
  std::unique_ptr<LineAppender> events;
  if (!a.events.empty()) events = std::make_unique<LineAppender>("--events", a.events);
  const std::string db_path = a.db.empty() ? default_history_db_path() : a.db;
  std::FILE* human = a.events == "-" ? stderr : stdout;

  // A write to --events that failed is said at once on stderr and goes
  // into the run's history as an error log (once the chief has recorded
  // the run there: tried again at most once a second until then).
  std::string events_unrecorded;
  auto events_tried = std::chrono::steady_clock::time_point{};
  const auto record_events_failure = [&](bool now) {
    if (events_unrecorded.empty()) return;
    const auto t = std::chrono::steady_clock::now();
    if (!now && t - events_tried < std::chrono::seconds(1)) return;
    events_tried = t;
    try {
      std::error_code ec;
      if (!std::filesystem::exists(db_path, ec)) return;
      HistoryStore store(db_path, HistoryStore::Open::kExisting);
      const std::string data =
          nlohmann::json{{"source", "launcher"}, {"events_file", a.events}}.dump();
      if (store.record_launcher_event(spec.run_id, 0, "error", events_unrecorded, data, false)) {
        events_unrecorded.clear();
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "baton launch: warning: could not record that in %s: %s\n",
                   db_path.c_str(), e.what());
      events_unrecorded.clear();
    }
  };
  const auto events_failed = [&](const std::string& failure) {
    if (failure.empty()) return;
    std::fprintf(stderr, "baton launch: error: %s\n", failure.c_str());
    std::fflush(stderr);
    events_unrecorded = failure;
    record_events_failure(true);
  };

  LaunchObserver obs;
  obs.on_event = [&](const std::string& line) {
    if (events) {
      events_failed(events->write_line(line));
      record_events_failure(false);
    }
    if (a.quiet) return;
    // Progress: a line per epoch of the chief's, and the run's end (a line
    // whose fields have other types is only in the events).
    const auto js = nlohmann::json::parse(line, nullptr, false);
    if (!js.is_object()) return;
    try {
      const std::string type = js.value("type", "");
      if (type == "epoch") {
        std::fprintf(human, "epoch %lld  step %lld  train loss %.4f", js.value("epoch", 0LL),
                     js.value("step", 0LL), js.value("train_loss", 0.0));
        if (js.contains("val_loss"))
          std::fprintf(human, "  val loss %.4f", js.value("val_loss", 0.0));
        std::fprintf(human, "\n");
      } else if (type == "run_end") {
        std::fprintf(human, "attempt ended: %s at step %lld\n", js.value("status", "").c_str(),
                     js.value("step", 0LL));
      }
    } catch (const nlohmann::json::exception&) {
    }
  };
  obs.on_output = [&](int rank, const std::string& line) {
    if (rank < 0) {
      std::fprintf(stderr, "%s\n", line.c_str());
    } else {
      std::fprintf(stderr, "[rank %d] %s\n", rank, line.c_str());
    }
  };
  obs.on_restart = [&](const Restart& r) {
    const bool last = r.last;
    const std::string message = "attempt " + std::to_string(r.attempt) + ": " + r.cause;
    const std::string data =
        nlohmann::json{{"source", "launcher"}, {"attempt", r.attempt}, {"rank", r.rank},
                       {"host", r.host},       {"step", r.step},       {"restarting", !last}}
            .dump();
    std::fprintf(human, "baton launch: attempt %d failed: %s%s\n", r.attempt, r.cause.c_str(),
                 last ? "" : "; restarting from the newest checkpoint");
    std::fflush(human);
    // The run's history keeps the cause (the next attempt's chief records
    // its resume).
    try {
      std::error_code ec;
      if (std::filesystem::exists(db_path, ec)) {
        HistoryStore store(db_path, HistoryStore::Open::kExisting);
        if (store.record_launcher_event(spec.run_id, r.step, "error", message, data, last)) return;
      }
      // No attempt got as far as recording the run (its ranks died before
      // the chief's start, every time): the launcher records it, failed,
      // with why, once there is no attempt left to do so.
      if (last) {
        record_unstarted_run(db_path, spec.run_id, cfg, total_ranks, r.step, message, data);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "baton launch: warning: could not record the failure in %s: %s\n",
                   db_path.c_str(), e.what());
    }
  };

  obs.on_replace = [&](const Restart& r) {
    const std::string message = "attempt " + std::to_string(r.attempt) + ": " + r.cause +
                                "; replaced, the servers and the other workers going on";
    std::fprintf(human, "baton launch: %s\n", message.c_str() + message.find(": ") + 2);
    std::fflush(human);
    try {
      std::error_code ec;
      if (std::filesystem::exists(db_path, ec)) {
        HistoryStore store(db_path, HistoryStore::Open::kExisting);
        const std::string data = nlohmann::json{{"source", "launcher"}, {"attempt", r.attempt},
                                                {"rank", r.rank},        {"host", r.host},
                                                {"step", r.step},        {"replaced", true}}
                                     .dump();
        store.record_launcher_event(spec.run_id, r.step, "warning", message, data, false);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "baton launch: warning: could not record the replacement in %s: %s\n",
                   db_path.c_str(), e.what());
    }
  };

  obs.on_rescale = [&](const Rescale& r) {
    std::fprintf(
        human, "baton launch: attempt %d stopped at step %lld: %s; going on with %d worker%s\n",
        r.attempt, static_cast<long long>(r.step), r.cause.c_str(), r.to, r.to == 1 ? "" : "s");
    std::fflush(human);
    try {
      std::error_code ec;
      if (std::filesystem::exists(db_path, ec)) {
        HistoryStore store(db_path, HistoryStore::Open::kExisting);
        const nlohmann::json data = {{"source", "launcher"}, {"attempt", r.attempt},
                                     {"from", r.from},       {"to", r.to},
                                     {"step", r.step},       {"rescale", true}};
        store.record_launcher_event(spec.run_id, r.step, "info",
                                    "attempt " + std::to_string(r.attempt) + ": " + r.cause + ": " +
                                        std::to_string(r.from) + " -> " + std::to_string(r.to) +
                                        " workers",
                                    data.dump(), false);
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "baton launch: warning: could not record the rescale in %s: %s\n",
                   db_path.c_str(), e.what());
    }
  };

  const StopSignals signals;
  if (!a.quiet) {
    if (elastic) {
      std::fprintf(human, "baton launch: run %s, %d to %s workers on %s, up to %d restart%s\n",
                   spec.run_id.c_str(), spec.elastic.min_workers,
                   a.max_workers > 0 ? std::to_string(a.max_workers).c_str() : "every slot's",
                   describe_hosts(hosts).c_str(), spec.max_restarts,
                   spec.max_restarts == 1 ? "" : "s");
    } else {
      std::fprintf(human, "baton launch: run %s, %d rank%s, up to %d restart%s\n",
                   spec.run_id.c_str(), total_ranks, total_ranks == 1 ? "" : "s",
                   spec.max_restarts, spec.max_restarts == 1 ? "" : "s");
      if (spec.ps_workers > 0) {
        std::fprintf(human,
                     "baton launch: the chief and %d server%s in one MPI job; workers 1-%d join "
                     "them over TCP, each replaced if it dies\n",
                     spec.ps_servers, spec.ps_servers == 1 ? "" : "s", spec.ps_workers - 1);
      }
    }
  }
  const LaunchOutcome out = launch(spec, obs, signals.flag());
  if (events) {
    events_failed(events->close());
    record_events_failure(true);
  }
  std::fprintf(human, "\n== %s: %s after %d attempt%s (%zu restart%s", spec.run_id.c_str(),
               out.status.c_str(), out.attempts, out.attempts == 1 ? "" : "s", out.restarts.size(),
               out.restarts.size() == 1 ? "" : "s");
  if (elastic) {
    std::fprintf(human, ", %zu rescale%s", out.rescales.size(),
                 out.rescales.size() == 1 ? "" : "s");
  }
  if (spec.ps_workers > 0) {
    std::fprintf(human, ", %zu worker%s replaced", out.replacements.size(),
                 out.replacements.size() == 1 ? "" : "s");
  }
  std::fprintf(human, ") ==\n");
  if (!out.reason.empty()) std::fprintf(human, "reason          %s\n", out.reason.c_str());
  std::fprintf(human, "history         %s\n", db_path.c_str());
  if (events && !events->failure().empty()) {
    // What was asked for - the events in that file - was not kept: exit 1
    // (unless the run's own outcome already says worse, or a stop).
    std::fprintf(stderr, "baton launch: failed: output was lost: %s\n", events->failure().c_str());
    if (out.exit_code == 0) return 1;
  }
  return out.exit_code;
}

}  // namespace baton::cli
