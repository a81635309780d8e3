#include <baton/core/error.h>
#include <baton/core/process_identity.h>
#include <baton/core/running_child.h>
#include <baton/core/temp_file.h>
#include <baton/launch/checkpoint_carry.h>
#include <baton/launch/checkpoint_site.h>
#include <baton/launch/host_pool.h>
#include <baton/launch/launcher.h>
#include <baton/launch/rank_process.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <thread>

namespace baton {

namespace {

// After the chief's run_end, how long the ranks have to exit.
constexpr double kExitWaitS = 120.0;
// How long after a parameter-server worker's death the launcher replaces
// it: the job's own failure, when a server died and took the worker along,
// is reported within this.
constexpr double kSideGraceS = 1.0;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One attempt's view of its job.
struct Attempt {
  int np = 0;                            // its ranks
  std::vector<HostfileEntry> placement;  // elastic: the hosts it runs on, in rank order
  std::string carry_from, carry_why;     // elastic: the checkpoint's host when not the chief's
  std::map<int, RankState> ranks;        // host: where the launcher placed it (elastic)
  std::map<int, std::string> node;       // the host each rank says it runs on
  std::string chief_status;              // the chief's run_end status, when it came
  int64_t chief_step = -1;               // and the step it ended at
  double chief_end_s = -1;               // and when (seconds into the attempt)
  bool ranks_changed = false;  // a rank was heard for the first time since the last report
  std::string rescale;         // why the launcher stopped it to change its worker count
  int rescale_to = 0;
  std::string rank_error;  // the first "baton: failed/error (rank R): ..." line
  int rank_error_rank = -1;
  bool input_error = false;  // a rank's "baton: error" (exit 2)
  std::string mpirun_said;   // mpirun's report of who died
  int mpirun_rank = -1;
  std::string mpirun_host;
  std::string lost_host;     // a host the job lost contact with (its daemon, a peer rank)
  bool daemon_lost = false;  // mpirun's "unable to reliably start ... daemons" once running
  std::vector<std::string> ps_servers;   // the chief's servers (LaunchSpec::ps_workers)
  std::map<int, std::string> side_host;  // elastic ps: where each side worker runs now
  std::set<int> waiting;                 // elastic ps: side workers without a host now
  std::string stalled;                   // the launcher's own finding (hang, stall)
  int stalled_rank = -1;
  double detected_unix_s = 0;

  double newest_beat() const {
    double t = -1;
    for (const auto& [r, st] : ranks) t = std::max(t, st.last_beat_s);
    return t;
  }
  int64_t furthest_step() const {
    int64_t s = -1;
    for (const auto& [r, st] : ranks) s = std::max(s, st.step);
    return s;
  }
};

// mpirun's report of a rank killed by a signal: the rank (of its job), and
// "on NODE was killed by signal N (NAME)"; false for any other line.
bool signal_report(const std::string& line, int* rank, std::string* node, std::string* what) {
  static const std::regex signal_re(
      R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)(?: \(([^)]*)\))?)");
  std::smatch m;
  if (!std::regex_search(line, m, signal_re)) return false;
  *rank = std::stoi(m[1]);
  *node = m[2];
  *what = "on " + m[2].str() + " was killed by signal " + m[3].str() +
          (m[4].matched ? " (" + m[4].str() + ")" : "");
  return true;
}

// A parameter-server worker outside the MPI job (LaunchSpec::ps_workers):
// an mpirun job of its own rank.
struct SideWorker {
  int rank = 0;
  std::string host;                    // elastic: the host it runs on ("" = none now)
  std::unique_ptr<TempFile> hostfile;  // elastic: that host's one slot, for its mpirun
  bool finished = false;               // it ended its run: not started again
  std::unique_ptr<RunningChild> child;
  TaggedLines tagged;
  RunningChild::Lines lines;
  double started_s = 0;  // seconds into the attempt
  std::string said;      // its mpirun's report of how it died
  bool hung = false;     // the launcher killed it for its silence
  double died_s = -1;    // when it died (seconds into the attempt), not yet acted on
  int died_status = 0;   // and its mpirun's wait status
};

class Supervisor {
 public:
  Supervisor(const LaunchSpec& spec, const LaunchObserver& obs, const std::atomic<bool>* stop)
      : spec_(spec),
        obs_(obs),
        stop_(stop),
        pool_(spec.elastic.cooldown_s),
        hosts_(spec.elastic.hosts),
        t_start_(Clock::now()) {
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    local_host_ = host;
  }

  LaunchOutcome run() {
    LaunchOutcome out;
    for (int attempt = 1;; ++attempt) {
      out.attempts = attempt;
      Attempt a;
      std::optional<TempFile> hostfile;  // this attempt's
      if (spec_.elastic.enabled) {
        if (!wait_for_hosts(attempt, a, out)) {
          out.attempts = attempt - 1;
          break;
        }
        // The newest checkpoint to the chief's host, or no attempt.
        if (!bring_checkpoint(attempt, a, out)) break;
        hostfile.emplace("baton-hosts", to_hostfile(a.placement));
      } else {
        a.np = ps_mode() ? spec_.ps_workers + spec_.ps_servers : spec_.job.ranks;
      }
      nlohmann::json hosts = nlohmann::json::array();
      for (const auto& h : a.placement) hosts.push_back({{"host", h.host}, {"ranks", h.slots}});
      emit({{"type", "attempt_start"},
            {"run", spec_.run_id},
            {"attempt", attempt},
            {"workers", a.np},
            {"hosts", hosts}});
      failures_before_ = static_cast<int>(out.restarts.size());
      const int status = run_attempt(attempt, a, hostfile ? hostfile->path() : std::string());
      const bool exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (a.chief_status == "completed" && exited_ok) {
        out.status = "completed";
        out.exit_code = 0;
        emit_ranks(attempt, a, "done");
        break;
      }
      if (a.chief_status == "completed") {
        // The training completed; what failed after it (the chief could not
        // keep the run's history, a rank's exit) is not a crash: nothing to
        // restart, and the outcome says what failed.
        out.status = "completed";
        out.exit_code = 1;
        out.reason =
            "the training completed, but " +
            (a.rank_error.empty()
                 ? "the job then ended with " +
                       std::string(WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                                     : "signal " + std::to_string(WTERMSIG(status)))
                 : a.rank_error);
        emit_ranks(attempt, a, "done");
        break;
      }
      if (stop_requested()) {
        out.status = "interrupted";
        out.exit_code = 130;
        out.reason = "stopped on request";
        emit_ranks(attempt, a, "stopped");
        break;
      }
      if (!a.rescale.empty() && a.chief_status == "interrupted") {
        // Stopped together at a checkpoint for the new worker count: not a
        // failure (mpirun reports the ranks' exit code 130 as an error).
        const Rescale rs{attempt, a.np, a.rescale_to, a.rescale, a.chief_step};
        out.rescales.push_back(rs);
        emit_ranks(attempt, a, "restarting");
        if (obs_.on_rescale) obs_.on_rescale(rs);
        emit({{"type", "rescale"},
              {"run", spec_.run_id},
              {"attempt", attempt},
              {"from", rs.from},
              {"to", rs.to},
              {"cause", rs.cause},
              {"step", rs.step}});
        continue;
      }
      Restart r = diagnose(attempt, a, status);
      if (a.input_error) {
        out.status = "failed";
        out.exit_code = 2;
        out.reason = r.cause + " (an input error: not restarted)";
        emit_ranks(attempt, a, "stopped");
        break;
      }
      out.restarts.push_back(r);
      const int failures = static_cast<int>(out.restarts.size() + replacements_.size());
      const bool again = failures <= spec_.max_restarts;
      r.last = !again;
      out.restarts.back().last = r.last;
      // The host whose rank failed sits out a while (it may be failing).
      if (spec_.elastic.enabled && !r.host.empty()) pool_.failed(r.host, elapsed());
      emit_ranks(attempt, a, again ? "restarting" : "stopped", r.rank,
                 a.stalled.find("heartbeat") != std::string::npos ? "hung" : "dead");
      if (obs_.on_restart) obs_.on_restart(r);
      emit_failure(again ? "restart" : "launch_failure", r,
                   std::max(0, spec_.max_restarts - failures));
      if (!again) {
        out.status = "failed";
        out.exit_code = 1;
        out.reason = r.cause + " (after " + std::to_string(spec_.max_restarts) + " restart" +
                     (spec_.max_restarts == 1 ? "" : "s") + ")";
        break;
      }
    }
    out.replacements = replacements_;
    emit({{"type", "launch_end"},
          {"run", spec_.run_id},
          {"status", out.status},
          {"attempts", out.attempts},
          {"restarts", static_cast<int>(out.restarts.size())},
          {"rescales", static_cast<int>(out.rescales.size())},
          {"replacements", static_cast<int>(out.replacements.size())},
          {"reason", out.reason}});
    return out;
  }

 private:
  bool stop_requested() const { return stop_ != nullptr && stop_->load(); }

  // LaunchSpec::ps_workers: the MPI job holds the chief and the servers;
  // the other workers are jobs of their own.
  bool ps_mode() const { return spec_.ps_workers >= 2; }
  bool is_side(int rank) const { return ps_mode() && rank >= 1 && rank < spec_.ps_workers; }
  // A rank of the MPI job as a rank of the whole job (its servers come
  // after every worker).
  int logical_rank(int mpi_rank) const {
    if (!ps_mode() || mpi_rank <= 0) return mpi_rank;
    return spec_.ps_workers + mpi_rank - 1;
  }
  // The host the launcher placed a rank on (elastic; "" when none).
  std::string placed_host(const Attempt& a, int rank) const {
    if (!ps_mode()) return host_of_rank(a.placement, rank);
    if (is_side(rank)) {
      const auto it = a.side_host.find(rank);
      return it == a.side_host.end() ? std::string() : it->second;
    }
    return host_of_rank(a.placement, rank == 0 ? 0 : rank - spec_.ps_workers + 1);
  }

  void emit(nlohmann::json js) {
    js["v"] = 1;
    js["time"] = unix_now();
    if (obs_.on_event) obs_.on_event(js.dump());
  }

  double elapsed() const { return seconds_since(t_start_); }

  // A failure as an event: "restart", "launch_failure" or "replace".
  void emit_failure(const char* type, const Restart& r, int restarts_left) {
    emit({{"type", type},
          {"run", spec_.run_id},
          {"attempt", r.attempt},
          {"cause", r.cause},
          {"rank", r.rank},
          {"host", r.host},
          {"step", r.step},
          {"detected", r.detected_unix_s},
          {"restarts_left", restarts_left}});
  }

  // The hosts listed now: the discovery command's output (the last good
  // one when it fails: a flaky script does not end a running job), or the
  // fixed list.
  const std::vector<HostfileEntry>& current_hosts() {
    if (spec_.elastic.discovery.empty()) return hosts_;
    try {
      hosts_ = discover_hosts(spec_.elastic.discovery, spec_.elastic.discovery_timeout_s);
      discovery_warning_.clear();
    } catch (const std::exception& e) {
      if (discovery_warning_ != e.what() && obs_.on_output) {
        obs_.on_output(-1, "baton launch: warning: " + std::string(e.what()) +
                               "; keeping the last host list (" + describe_hosts(hosts_) + ")");
      }
      discovery_warning_ = e.what();
    }
    return hosts_;
  }

  std::string cooling_text() const {
    std::string s;
    for (const auto& [host, left] : pool_.cooling(elapsed())) {
      s += (s.empty() ? "" : ", ") + host + " (" + seconds_text(left) + " left)";
    }
    return s;
  }

  // Places the attempt's workers on the usable hosts, waiting up to
  // start_timeout_s for min_workers slots. False (and `out` says why) when
  // they do not come, or on a stop request.
  bool wait_for_hosts(int attempt, Attempt& a, LaunchOutcome& out) {
    const ElasticSpec& el = spec_.elastic;
    const auto t0 = Clock::now();
    bool said = false;
    const std::vector<HostfileEntry>* hosts = attempt == 1 ? &hosts_ : &current_hosts();
    auto last_poll = Clock::now();
    while (true) {
      const auto usable = pool_.usable(*hosts, elapsed());
      const int slots = usable.empty() ? 0 : total_slots(usable);
      if (slots >= el.min_workers && (!ps_mode() || slots >= 1 + spec_.ps_servers)) {
        a.np = std::min(el.max_workers, slots);
        if (ps_mode()) {
          // The chief and the servers first; the other workers take the
          // slots left, each as it starts (place_sides).
          a.np = spec_.ps_workers + spec_.ps_servers;
          a.placement = spec_.ps_core_hosts.empty()
                            ? place_workers(chief_first(usable, a), 1 + spec_.ps_servers)
                            : spec_.ps_core_hosts;
          return true;
        }
        a.placement = place_workers(chief_first(usable, a), a.np);
        return true;
      }
      const std::string cooling = cooling_text();
      const std::string situation = std::to_string(slots) + " usable slot" +
                                    (slots == 1 ? "" : "s") + " (hosts: " + describe_hosts(*hosts) +
                                    (cooling.empty() ? "" : "; left out: " + cooling) +
                                    "), --min-workers is " + std::to_string(el.min_workers);
      if (!said) {
        said = true;
        if (obs_.on_output) obs_.on_output(-1, "baton launch: waiting for hosts: " + situation);
        emit({{"type", "waiting_for_hosts"},
              {"run", spec_.run_id},
              {"attempt", attempt},
              {"slots", slots},
              {"min_workers", el.min_workers}});
      }
      if (stop_requested()) {
        out.status = "interrupted";
        out.exit_code = 130;
        out.reason = "stopped on request while waiting for hosts";
        return false;
      }
      if (seconds_since(t0) > el.start_timeout_s) {
        out.status = "failed";
        out.exit_code = 1;
        out.reason =
            "no hosts for the job within " + seconds_text(el.start_timeout_s) + ": " + situation;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (seconds_since(last_poll) >= el.discovery_interval_s) {
        last_poll = Clock::now();
        hosts = &current_hosts();
      }
    }
  }

  // The usable hosts, the one holding the newest checkpoint first (rank 0
  // goes on the first slot); a.carry_from says when none of them holds it.
  std::vector<HostfileEntry> chief_first(const std::vector<HostfileEntry>& usable, Attempt& a) {
    ChiefPlacement p = place_chief(usable, last_checkpoint_);
    a.carry_from = std::move(p.carry_from);
    a.carry_why = std::move(p.why);
    return std::move(p.hosts);
  }

  void note_chief_checkpoint(const std::string& line, const Attempt& a) {
    const auto report = parse_checkpoint_event(line);
    if (!report) return;
    std::string host = placed_host(a, 0);
    if (host.empty()) {
      const auto it = a.node.find(0);
      host = it == a.node.end() ? local_host_ : it->second;
    }
    note_checkpoint(last_checkpoint_, *report, host);
  }

  // Elastic: the chief's host lacks the newest checkpoint (a.carry_from
  // holds it): it is copied there through mpirun. False, with `out` saying
  // why, when it cannot be: the job fails rather than start over.
  bool bring_checkpoint(int attempt, const Attempt& a, LaunchOutcome& out) {
    if (a.carry_from.empty() || a.placement.empty()) return true;
    const std::string to = a.placement.front().host;
    if (obs_.on_output) {
      obs_.on_output(
          -1, "baton launch: " + a.carry_why + ": copying it to " + to + ", the chief's host now");
    }
    CarryJob job;
    job.mpirun = spec_.mpirun;
    job.env = spec_.mpirun_env;
    job.from_host = a.carry_from;
    job.to_host = to;
    job.path = last_checkpoint_.path;
    const auto t0 = Clock::now();
    const std::string failed = carry_checkpoint(job);
    emit({{"type", "checkpoint_carry"},
          {"run", spec_.run_id},
          {"attempt", attempt},
          {"step", last_checkpoint_.step},
          {"path", job.path},
          {"from", job.from_host},
          {"to", to},
          {"seconds", seconds_since(t0)},
          {"error", failed}});
    if (failed.empty()) {
      note_checkpoint(last_checkpoint_, {last_checkpoint_.step, job.path}, to);
      return true;
    }
    out.status = "failed";
    out.exit_code = 1;
    out.reason = "not starting attempt " + std::to_string(attempt) + ": " + a.carry_why + ", and " +
                 failed + "; the run would train again from an earlier step";
    out.attempts = attempt - 1;
    return false;
  }

  // Why the running attempt should stop for another worker count ("": it
  // should not), and the count.
  std::string rescale_needed(const Attempt& a, const std::vector<HostfileEntry>& listed,
                             int& to) const {
    const auto usable = pool_.usable(listed, elapsed());
    const int slots = usable.empty() ? 0 : total_slots(usable);
    to = std::min(spec_.elastic.max_workers, slots);
    for (const auto& placed : a.placement) {
      const auto it = std::find_if(usable.begin(), usable.end(),
                                   [&](const HostfileEntry& h) { return h.host == placed.host; });
      if (it == usable.end()) return "host " + placed.host + " left the host list";
      if (it->slots < placed.slots) {
        return "host " + placed.host + " has " + std::to_string(it->slots) + " slot" +
               (it->slots == 1 ? "" : "s") + " now (the job had " + std::to_string(placed.slots) +
               " rank" + (placed.slots == 1 ? "" : "s") + " there)";
      }
    }
    if (to > a.np && !ps_mode()) {
      return "hosts joined: " + std::to_string(slots) + " usable slots (" + describe_hosts(usable) +
             ")";
    }
    return {};
  }

  // Every rank's state as a "ranks" event; `others` for every rank at the
  // attempt's end ("" while it runs: from its heartbeats), `blamed` the
  // rank that failed and its state.
  void emit_ranks(int attempt, const Attempt& a, const std::string& others, int blamed = -1,
                  const std::string& blamed_state = {}) {
    const double now = seconds_since(attempt_t0_);
    nlohmann::json list = nlohmann::json::array();
    for (int r = 0; r < a.np; ++r) {
      const auto it = a.ranks.find(r);
      std::string state = others;
      if (r == blamed) {
        state = blamed_state;
      } else if (state.empty()) {
        if (a.waiting.count(r) != 0) {
          state = "waiting";  // for a host with a free slot
        } else if (it == a.ranks.end() || it->second.last_beat_s < 0) {
          state = "starting";
        } else if (it->second.ended) {
          state = "done";
        } else {
          state = now - it->second.last_beat_s > 3 * spec_.heartbeat_s ? "late" : "running";
        }
      }
      nlohmann::json j = {{"rank", r}, {"state", state}};
      std::string host = placed_host(a, r);
      if (it != a.ranks.end()) {
        if (host.empty()) host = it->second.host;
        j["pid"] = it->second.pid;
        j["step"] = it->second.step;
        if (it->second.last_beat_s >= 0) j["beat_age_s"] = now - it->second.last_beat_s;
      }
      j["host"] = host;
      list.push_back(std::move(j));
    }
    emit({{"type", "ranks"}, {"run", spec_.run_id}, {"attempt", attempt}, {"ranks", list}});
  }

  // What every rank the launcher starts runs: the job's command, its events
  // on tagged standard output, the run id and the heartbeat.
  MpirunSpec rank_job() const {
    MpirunSpec job = spec_.job;
    if (!spec_.config_text.empty()) job.config = "-";
    job.tag_output = true;
    job.events = "-";
    job.quiet = true;
    char beat[32];
    std::snprintf(beat, sizeof(beat), "%g", spec_.heartbeat_s);
    job.train_args.insert(job.train_args.end(), {"--run-id", spec_.run_id, "--heartbeat", beat});
    // The launcher answers for the run in the history while it lives: a
    // rank's death between attempts leaves it `running`, not interrupted.
    job.train_args.insert(job.train_args.end(), {"--owner", this_process().text()});
    return job;
  }

  // A parameter-server worker's own job: one rank, the worker `rank` of
  // the servers the chief named.
  std::vector<std::string> side_arguments(const SideWorker& w, const Attempt& a) const {
    const int rank = w.rank;
    MpirunSpec job = rank_job();
    job.ranks = 1;
    job.available_slots = 1;
    job.hostfile = w.hostfile ? w.hostfile->path() : std::string();
    job.bind_none = true;
    // The chief names a server on its own host 127.0.0.1: from another
    // host, that server is at the host the launcher placed it on.
    std::string servers;
    for (size_t i = 0; i < a.ps_servers.size(); ++i) {
      std::string s = a.ps_servers[i];
      const std::string server_host = placed_host(a, spec_.ps_workers + static_cast<int>(i));
      if (!w.host.empty() && s.rfind("127.0.0.1:", 0) == 0 && server_host != w.host &&
          !server_host.empty()) {
        s = server_host + s.substr(9);
      }
      servers += (servers.empty() ? "" : ",") + s;
    }
    // Its generation: when the launcher started it (ms into the attempt,
    // later for each replacement); the servers, started with the attempt,
    // give a held slot only to a later one (ps_tcp_server.h).
    job.train_args.insert(job.train_args.end(),
                          {"--ps-workers", std::to_string(spec_.ps_workers), "--ps-worker",
                           std::to_string(rank), "--ps-servers", servers, "--ps-generation",
                           std::to_string(std::llround(w.started_s * 1000.0) + 1)});
    std::vector<std::string> args{spec_.mpirun};
    for (auto& x : mpirun_arguments(job)) args.push_back(std::move(x));
    return args;
  }

  void start_side(SideWorker& w, const Attempt& a, double now) const {
    std::optional<std::string> input;
    if (!spec_.config_text.empty()) input = spec_.config_text;
    w.tagged = TaggedLines();
    w.said.clear();
    w.hung = false;
    w.started_s = now;
    w.hostfile.reset();
    if (!w.host.empty()) {
      w.hostfile = std::make_unique<TempFile>("baton-side-host", to_hostfile({{w.host, 1, 0}}));
    }
    w.child =
        std::make_unique<RunningChild>(spec_.mpirun, side_arguments(w, a), spec_.mpirun_env, input);
  }

  // Starts every side worker that is not running, has not finished and has
  // a slot: here (not elastic), or on a listed host with a slot free of the
  // chief's, the servers' and the other side workers' (elastic; `hosts`
  // the list now). `joined`: say so in a "scale" event (not at the start).
  void place_sides(std::vector<SideWorker>& sides, Attempt& a, double now, int attempt,
                   const std::vector<HostfileEntry>& hosts, bool joined) {
    if (!spec_.elastic.enabled) {
      for (auto& w : sides) {
        if (!w.child && !w.finished && w.died_s < 0) start_side(w, a, now);
      }
      return;
    }
    const auto usable = pool_.usable(hosts, elapsed());
    std::map<std::string, int> free;
    for (const auto& h : usable) free[h.host] += h.slots;
    for (const auto& p : a.placement) free[p.host] -= p.slots;
    for (const auto& w : sides) {
      if (w.child && !w.host.empty()) free[w.host] -= 1;
    }
    for (auto& w : sides) {
      if (w.child || w.finished || w.died_s >= 0) continue;
      const auto h = std::find_if(usable.begin(), usable.end(),
                                  [&](const HostfileEntry& e) { return free[e.host] > 0; });
      if (h == usable.end()) {
        if (a.waiting.insert(w.rank).second) a.ranks_changed = true;
        continue;
      }
      --free[h->host];
      w.host = h->host;
      a.side_host[w.rank] = w.host;
      a.waiting.erase(w.rank);
      a.ranks_changed = true;
      start_side(w, a, now);
      if (joined) {
        emit({{"type", "scale"},
              {"run", spec_.run_id},
              {"attempt", attempt},
              {"rank", w.rank},
              {"host", w.host},
              {"change", "joined"},
              {"workers", running_workers(sides)}});
      }
    }
  }

  static int running_workers(const std::vector<SideWorker>& sides) {
    int n = 1;  // the chief
    for (const auto& w : sides) n += w.child ? 1 : 0;
    return n;
  }

  // Elastic: a side worker whose host is no longer listed (or is cooling
  // down) is ended, not replaced; its slot waits for a host.
  void retire_sides(std::vector<SideWorker>& sides, Attempt& a, int attempt,
                    const std::vector<HostfileEntry>& hosts) {
    const auto usable = pool_.usable(hosts, elapsed());
    for (auto& w : sides) {
      if (!w.child || w.host.empty()) continue;
      const bool listed = std::any_of(usable.begin(), usable.end(),
                                      [&](const HostfileEntry& e) { return e.host == w.host; });
      if (listed) continue;
      RankState& st = a.ranks[w.rank];
      if (st.ended) continue;
      signal_rank_process(st, SIGKILL);
      w.child->terminate(0.0);
      w.child.reset();
      const std::string host = w.host;
      w.host.clear();
      a.side_host.erase(w.rank);
      a.waiting.insert(w.rank);
      st.last_beat_s = -1;
      st.pid = 0;
      st.pid_start.clear();
      a.ranks_changed = true;
      if (obs_.on_output) {
        obs_.on_output(-1, "baton launch: host " + host + " left the host list: worker " +
                               std::to_string(w.rank) + " ended there; the others go on");
      }
      emit({{"type", "scale"},
            {"run", spec_.run_id},
            {"attempt", attempt},
            {"rank", w.rank},
            {"host", host},
            {"change", "left"},
            {"step", st.step},
            {"workers", running_workers(sides)}});
    }
  }

  // Reads a side worker's output; true when it has exited (reaped).
  bool read_side(SideWorker& w, Attempt& a, double now, bool wait) {
    if (!w.child) return false;
    const bool open = w.child->read(wait ? 0.05 : 0.0, w.lines);
    for (auto* stream : {&w.lines.out, &w.lines.err}) {
      for (const auto& line : *stream) {
        std::vector<TaggedLines::Line> lines;
        w.tagged.feed(line, lines);
        for (const auto& l : lines) {
          if (l.rank >= 0) {
            take_line(w.rank, l.is_stderr, l.text, a, now);
            continue;
          }
          // Its mpirun's own report: how the worker died.
          int job_rank = 0;
          std::string node, what;
          if (signal_report(l.text, &job_rank, &node, &what)) {
            w.said = "worker " + std::to_string(w.rank) + " " + what;
          }
          if (obs_.on_output) obs_.on_output(-1, l.text);
        }
      }
      stream->clear();
    }
    return !open || w.child->exit_status().has_value();
  }

  // A side worker's watch, once per loop: its output, its exit, its
  // silence. A worker that died or hung before the run's end is replaced
  // while restarts are left; "" or the finding that ends the attempt.
  std::string watch_side(SideWorker& w, int attempt, Attempt& a, double now, bool stopping) {
    if (w.died_s >= 0) return act_on_death(w, attempt, a, now, stopping);
    if (!w.child) return {};
    bool exited = read_side(w, a, now, false) && w.child->exit_status().has_value();
    RankState& st = a.ranks[w.rank];
    if (!exited && !st.ended) {
      const double last = st.last_beat_s >= 0 ? st.last_beat_s : w.started_s;
      if (now - last > spec_.heartbeat_timeout_s) {
        // Stopped or hung: its servers would wait for it at the end.
        w.hung = true;
        signal_rank_process(st, SIGKILL);
        w.child->terminate(0.0);
        exited = true;
      }
    }
    if (!exited) return {};
    const auto until = Clock::now() + std::chrono::seconds(1);
    while (!read_side(w, a, now, true) && Clock::now() < until) {
    }
    const int status = w.child->terminate(0.0);
    w.child.reset();
    // Done, or the run over, or stopping: nothing to replace.
    if (st.ended) w.finished = true;
    if (st.ended || a.chief_end_s >= 0 || stopping || stop_requested()) return {};
    w.died_s = now;
    w.died_status = status;
    return {};
  }

  // A side worker's death, acted on kSideGraceS after it: a worker whose
  // server died dies too, and the job's own end (a whole-job restart) is
  // seen first then - not taken for a worker to replace.
  std::string act_on_death(SideWorker& w, int attempt, Attempt& a, double now, bool stopping) {
    if (now - w.died_s < kSideGraceS) return {};
    const int status = w.died_status;
    w.died_s = -1;
    RankState& st = a.ranks[w.rank];
    if (a.chief_end_s >= 0 || stopping || stop_requested()) return {};
    if (WIFEXITED(status) && WEXITSTATUS(status) == 2) {
      a.input_error = true;
      return "worker " + std::to_string(w.rank) + " refused its input: " + a.rank_error;
    }
    std::string cause;
    if (w.hung) {
      cause = "worker " + std::to_string(w.rank) + " (pid " + std::to_string(st.pid) +
              ") sent no heartbeat for " + seconds_text(spec_.heartbeat_timeout_s) +
              " (stopped or hung)";
    } else if (!w.said.empty()) {
      cause = w.said;
    } else {
      cause = "worker " + std::to_string(w.rank) + " (pid " + std::to_string(st.pid) + ") " +
              (WIFEXITED(status) ? "exited with " + std::to_string(WEXITSTATUS(status))
                                 : "was killed by signal " + std::to_string(WTERMSIG(status)));
    }
    if (st.step >= 0) cause += " at step " + std::to_string(st.step);
    const int used = failures_before_ + static_cast<int>(replacements_.size());
    if (used >= spec_.max_restarts) {
      a.stalled_rank = w.rank;
      return cause + "; no restart left to replace it";
    }
    Restart r;
    r.attempt = attempt;
    r.cause = cause;
    r.rank = w.rank;
    r.host = st.host;
    r.step = st.step;
    r.detected_unix_s = unix_now();
    replacements_.push_back(r);
    emit_ranks(attempt, a, {}, w.rank, w.hung ? "hung" : "dead");
    if (obs_.on_replace) obs_.on_replace(r);
    emit_failure("replace", r, spec_.max_restarts - used - 1);
    // The replacement: the same slot; the servers tell it where to go on.
    st.last_beat_s = -1;
    st.pid = 0;
    st.pid_start.clear();
    a.ranks_changed = true;
    if (!spec_.elastic.enabled) {
      start_side(w, a, now);
      return {};
    }
    // Elastic: its host sits out its cooldown; the slot goes to the next
    // free one (place_sides, at the next look at the hosts).
    pool_.failed(w.host, elapsed());
    a.side_host.erase(w.rank);
    w.host.clear();
    a.waiting.insert(w.rank);
    return {};
  }

  std::vector<std::string> arguments(int attempt, const Attempt& a,
                                     const std::string& hostfile) const {
    MpirunSpec job = rank_job();
    if (spec_.elastic.enabled) {
      job.ranks = ps_mode() ? 1 + spec_.ps_servers : a.np;
      job.hostfile = hostfile;
      job.available_slots = job.ranks;
    }
    if (attempt > 1 || spec_.resume) job.train_args.emplace_back("--resume");
    // The chief refuses to resume before the newest checkpoint it reported
    // (on a host without it, it would otherwise start over).
    if ((attempt > 1 || spec_.resume) && last_checkpoint_.step > 0) {
      job.train_args.insert(job.train_args.end(),
                            {"--resume-step-at-least", std::to_string(last_checkpoint_.step)});
    }
    if (ps_mode()) {
      job.train_args.insert(job.train_args.end(),
                            {"--ps-workers", std::to_string(spec_.ps_workers)});
      // Every task on this host: the servers listen on loopback only.
      if (!spec_.elastic.enabled && spec_.job.hostfile.empty()) {
        job.train_args.insert(job.train_args.end(), {"--ps-bind", "127.0.0.1"});
      }
    }
    std::vector<std::string> args{spec_.mpirun};
    for (auto& x : mpirun_arguments(job)) args.push_back(std::move(x));
    return args;
  }

  void take_output_line(const std::string& line, Attempt& a, double now) {
    std::vector<TaggedLines::Line> lines;
    tagged_.feed(line, lines);
    for (const auto& l : lines) take_line(logical_rank(l.rank), l.is_stderr, l.text, a, now);
  }

  void take_line(int rank, bool err, const std::string& text, Attempt& a, double now) {
    const std::string& line = text;
    if (rank < 0) {
      take_mpirun_line(line, a);
      if (obs_.on_output) obs_.on_output(-1, line);
      return;
    }
    const RankLine rl = err ? RankLine{} : parse_rank_line(text);
    if (rl.kind == RankLine::Kind::kHeartbeat) {
      RankState& st = a.ranks[rank];
      if (st.last_beat_s < 0) a.ranks_changed = true;  // heard for the first time
      st.rank = rank;
      a.node[rank] = rl.host;
      note_rank_process(st, rl.pid, rl.host == local_host_);
      st.host = spec_.elastic.enabled ? placed_host(a, rank) : a.node[rank];
      st.step = std::max(st.step, rl.step);
      st.last_beat_s = now;
      return;
    }
    if (rl.kind == RankLine::Kind::kEvent) {
      // A step event says how far its rank got, sooner than its next beat.
      if (rl.type == "step" && a.ranks.count(rank) != 0) {
        RankState& st = a.ranks[rank];
        st.step = std::max(st.step, rl.step);
      }
      if (rl.type == "run_end" && rl.status != "failed" && a.ranks.count(rank) != 0) {
        a.ranks[rank].ended = true;
        a.ranks[rank].step = std::max(a.ranks[rank].step, rl.step);
        a.ranks_changed = true;
      }
      if (rank == 0) {
        if (rl.type == "run_start" && ps_mode()) a.ps_servers = servers_named(text);
        if (rl.type == "checkpoint") note_chief_checkpoint(text, a);
        if (rl.type == "run_end") {
          a.chief_status = rl.status;
          a.chief_step = rl.step;
          // A failed chief's end is its failure (its error line names it).
          if (rl.status != "failed") a.chief_end_s = now;
        }
        if (obs_.on_event) obs_.on_event(text);
        return;
      }
      // The other ranks' events: their own step and link figures go on
      // (each names its rank, or its link); the run's events are the chief's.
      if ((rl.type == "step" || rl.type == "link") && obs_.on_event) obs_.on_event(text);
      return;
    }
    take_lost_host(text, a);
    take_rank_message(rank, text, a);
    if (obs_.on_output) obs_.on_output(rank, text);
  }

  static void take_rank_message(int rank, const std::string& text, Attempt& a) {
    // run_train's last words: "baton: failed (rank R): ..." or "baton:
    // error (rank R): ..." (an input error), or without a rank on one rank.
    const bool failed = text.rfind("baton: failed", 0) == 0;
    const bool input = text.rfind("baton: error", 0) == 0;
    if (!failed && !input) return;
    if (input) a.input_error = true;
    if (a.rank_error.empty()) {
      const size_t head = failed ? 13 : 12;  // after "baton: failed" / "baton: error"
      const size_t close =
          text.compare(head, 7, " (rank ") == 0 ? text.find("): ", head) : std::string::npos;
      const size_t from =
          close != std::string::npos ? close + 3 : text.find_first_not_of(": ", head);
      a.rank_error = text.substr(std::min(from, text.size()));
      a.rank_error_rank = rank;
    }
  }

  // OpenMPI's reports of a host gone: a rank's "Peer host: X" (its peer
  // disconnected) or mpirun's "Remote daemon: [[j,0],d] on node X".
  static void take_lost_host(const std::string& line, Attempt& a) {
    static const std::regex lost_re(
        R"((?:Peer host:|Remote daemon: \[\[\d+,\d+\],\d+\] on node)\s+(\S+))");
    std::smatch m;
    if (a.lost_host.empty() && std::regex_search(line, m, lost_re)) a.lost_host = m[1];
  }

  static std::vector<std::string> servers_named(const std::string& text) {
    std::vector<std::string> out;
    const auto js = nlohmann::json::parse(text, nullptr, false);
    if (!js.is_object() || !js.contains("ps_servers") || !js["ps_servers"].is_array()) return out;
    for (const auto& s : js["ps_servers"]) {
      if (s.is_string()) out.push_back(s.get<std::string>());
    }
    return out;
  }

  void take_mpirun_line(const std::string& line, Attempt& a) const {
    take_lost_host(line, a);
    // What OpenMPI 4.1 says when a running host's daemon dies, too.
    if (line.find("ORTE was unable to reliably start one or more daemons") != std::string::npos &&
        !a.ranks.empty()) {
      a.daemon_lost = true;
    }
    static const std::regex exit_re(R"(Process name: \[\[\d+,\d+\],(\d+)\])");
    std::smatch m;
    int job_rank = 0;
    std::string node, what;
    if (signal_report(line, &job_rank, &node, &what)) {
      a.mpirun_rank = logical_rank(job_rank);
      a.mpirun_host = node;
      a.mpirun_said = "rank " + std::to_string(a.mpirun_rank) + " " + what;
    } else if (std::regex_search(line, m, exit_re) && a.mpirun_rank < 0) {
      a.mpirun_rank = logical_rank(std::stoi(m[1]));
    }
  }

  // Runs one attempt to its end (or until the launcher ends it); returns
  // mpirun's wait status.
  int run_attempt(int attempt, Attempt& a, const std::string& hostfile) {
    tagged_ = TaggedLines();
    std::optional<std::string> input;
    if (!spec_.config_text.empty()) input = spec_.config_text;
    RunningChild child(spec_.mpirun, arguments(attempt, a, hostfile), spec_.mpirun_env, input);
    const auto t0 = Clock::now();
    attempt_t0_ = t0;
    double last_ranks = 0, last_discovery = 0, last_side_look = 0;
    double last_progress = 0;
    int64_t furthest = -1;
    bool stop_sent = false;
    Clock::time_point stop_sent_at;
    RunningChild::Lines lines;
    std::vector<SideWorker> sides;  // ps_mode(): workers 1.. as jobs of their own
    sides.reserve(static_cast<size_t>(std::max(0, spec_.ps_workers)));
    // The side workers go with the job (their mpirun's ranks are in groups
    // of their own: ended by pid too). `finishing`: the job ended by itself
    // - its servers waited for every worker's last push, so the workers are
    // ending too: their last lines (their run_end) are read first, for a
    // few seconds at most.
    const auto end_sides = [&](bool finishing) {
      const auto until = Clock::now() + std::chrono::seconds(finishing ? 5 : 0);
      for (auto& w : sides) {
        while (finishing && w.child && !read_side(w, a, seconds_since(t0), true) &&
               Clock::now() < until) {
        }
        if (!w.child) continue;
        const RankState& st = a.ranks[w.rank];
        signal_rank_process(st, SIGKILL);
        w.child->terminate(0.0);
        w.child.reset();
      }
    };
    const auto drain = [&](double now) {
      for (const auto& l : lines.out) take_output_line(l, a, now);
      for (const auto& l : lines.err) take_output_line(l, a, now);
      lines.out.clear();
      lines.err.clear();
    };
    // The launcher's own finding (empty: mpirun's report): the job is ended
    // now, quickly - the ranks left wait on the failed one and cannot stop
    // cleanly.
    const auto end_now = [&](std::string finding) {
      if (!finding.empty()) a.stalled = std::move(finding);
      a.detected_unix_s = unix_now();
      const int status = child.terminate(std::min(spec_.grace_s, 1.0), &lines);
      drain(seconds_since(t0));
      kill_local_ranks(a);
      end_sides(false);
      return status;
    };
    while (true) {
      child.read(0.1, lines);
      const double now = seconds_since(t0);
      drain(now);
      if (const auto st = child.exit_status()) {
        a.detected_unix_s = unix_now();
        // What is still in the pipes (mpirun's report comes last).
        const auto until = Clock::now() + std::chrono::seconds(2);
        while (child.read(0.1, lines) && Clock::now() < until) drain(seconds_since(t0));
        drain(seconds_since(t0));
        end_sides(true);
        return child.terminate(0);  // its group's leftovers go too
      }
      // Streams closed (read() then waits for the exit, so this loop keeps
      // its pace): the checks below go on - mpirun may close both and run
      // on, and its ranks' silence is then a hang like any other.
      if (ps_mode()) {
        // The chief named its servers: the other workers join them.
        if (sides.empty() && !a.ps_servers.empty() && !stop_sent) {
          for (int k = 1; k < spec_.ps_workers; ++k) {
            sides.emplace_back();
            sides.back().rank = k;
          }
          place_sides(sides, a, now, attempt, hosts_, false);
          last_side_look = now;
        }
        for (auto& w : sides) {
          std::string finding = watch_side(w, attempt, a, now, stop_sent);
          if (!finding.empty()) return end_now(std::move(finding));
        }
        // Elastic: workers leave with their hosts and join on new ones
        // while the job goes on (the chief's and the servers' hosts are
        // watched below: theirs stop the job at a checkpoint).
        if (spec_.elastic.enabled && !sides.empty() && !stop_sent && a.chief_end_s < 0 &&
            now - last_side_look >= spec_.elastic.discovery_interval_s) {
          last_side_look = now;
          const std::vector<HostfileEntry>& listed = current_hosts();
          retire_sides(sides, a, attempt, listed);
          place_sides(sides, a, now, attempt, listed, true);
        }
      }
      if (now - last_ranks >= 1.0 || a.ranks_changed) {
        last_ranks = now;
        a.ranks_changed = false;
        emit_ranks(attempt, a, {});
      }
      // Not before every rank has been heard: a rank's first heartbeat
      // comes after it installed its stop handler, and a SIGUSR1 before
      // that would kill it (a failure, a restart spent) instead of
      // stopping it at a checkpoint. Nor once the run has ended.
      if (spec_.elastic.enabled && !stop_sent && a.chief_end_s < 0 && a.rescale.empty() &&
          every_rank_heard(a) && now - last_discovery >= spec_.elastic.discovery_interval_s) {
        last_discovery = now;
        int to = 0;
        std::string why = rescale_needed(a, current_hosts(), to);
        if (!why.empty()) {
          // Every rank stops at the same step, with a checkpoint; the next
          // attempt continues from it with `to` workers.
          a.rescale = std::move(why);
          a.rescale_to = to;
          if (obs_.on_output) {
            obs_.on_output(-1, "baton launch: " + a.rescale +
                                   ": stopping at a checkpoint to go on with " +
                                   std::to_string(to) + " worker" + (to == 1 ? "" : "s"));
          }
          child.signal_group(SIGUSR1);
          for (auto& w : sides) {
            if (w.child) w.child->signal_group(SIGUSR1);
          }
          stop_sent = true;
          stop_sent_at = Clock::now();
        }
      }
      if (stop_requested() && !stop_sent) {
        // mpirun passes SIGUSR1 on to every rank: they stop together.
        child.signal_group(SIGUSR1);
        for (auto& w : sides) {
          if (w.child) w.child->signal_group(SIGUSR1);
        }
        stop_sent = true;
        stop_sent_at = Clock::now();
      }
      if (stop_sent) {
        // A job that cannot stop (a rank hung) is ended after a minute.
        if (Clock::now() - stop_sent_at > std::chrono::seconds(60)) {
          const int status = child.terminate(spec_.grace_s, &lines);
          kill_local_ranks(a);
          end_sides(false);
          return status;
        }
        continue;
      }
      // A rank died: the others wait for it in a collective and will not
      // end by themselves, and mpirun waits for them.
      if (!a.mpirun_said.empty()) return end_now({});
      if (a.furthest_step() > furthest) {
        furthest = a.furthest_step();
        last_progress = now;
      }
      // The run is over (the chief sent its end): the ranks finish and
      // exit, each in its own time (the chief's history and summary, a
      // sanitizer's exit report), and send no more steps. A rank beats
      // until its work is done; only a job silent and not exiting for
      // kExitWaitS after that is ended.
      if (a.chief_end_s >= 0) {
        if (now - std::max(a.chief_end_s, a.newest_beat()) > kExitWaitS) {
          return end_now("the ranks did not exit within " + seconds_text(kExitWaitS) +
                         " of the run's end and their last heartbeat");
        }
        continue;
      }
      if (std::string dead = find_dead(a); !dead.empty()) return end_now(std::move(dead));
      if (std::string hung = find_hang(a, now); !hung.empty()) return end_now(std::move(hung));
      if (now - last_progress > spec_.progress_timeout_s) {
        // From the start too: a job stuck before its first step (a data
        // read that never returns) is as stuck.
        return end_now("no rank finished a step for " + seconds_text(now - last_progress) +
                       (furthest < 0 ? std::string(" since the start")
                                     : " after step " + std::to_string(furthest)) +
                       " (every rank still sending heartbeats: a collective or a read that "
                       "does not complete?)");
      }
    }
  }

  bool every_rank_heard(const Attempt& a) const {
    for (int r = 0; r < a.np; ++r) {
      if (is_side(r)) continue;  // their jobs are their own
      const auto it = a.ranks.find(r);
      if (it == a.ranks.end() || it->second.last_beat_s < 0) return false;
    }
    return true;
  }

  static std::string seconds_text(double s) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f s", s);
    return buf;
  }

  // mpirun starts each rank in a process group of its own: the ranks on
  // this host that outlive a killed mpirun are ended by their pids.
  void kill_local_ranks(const Attempt& a) const {
    for (const auto& [r, st] : a.ranks) signal_rank_process(st, SIGKILL);
  }

  // A rank on this host whose process is gone (seen before mpirun, which
  // reports a death only once it has ended the others).
  std::string find_dead(Attempt& a) const {
    for (const auto& [r, st] : a.ranks) {
      if (st.pid <= 0 || st.ended || is_side(r) || a.node.at(r) != local_host_) continue;
      if (!rank_process_alive(st)) {
        a.stalled_rank = r;
        return "rank " + std::to_string(r) + " (pid " + std::to_string(st.pid) + " on " + st.host +
               ") exited at step " + std::to_string(st.step);
      }
    }
    return {};
  }

  std::string find_hang(Attempt& a, double now) {
    for (int r = 0; r < a.np; ++r) {
      const auto it = a.ranks.find(r);
      const double last = it == a.ranks.end() ? 0.0 : it->second.last_beat_s;
      if (is_side(r)) continue;  // watched as a job of its own (watch_side)
      if (now - last <= spec_.heartbeat_timeout_s || (it != a.ranks.end() && it->second.ended)) {
        continue;
      }
      a.stalled_rank = r;
      if (it == a.ranks.end()) {
        return "rank " + std::to_string(r) + " sent no heartbeat within " +
               seconds_text(spec_.heartbeat_timeout_s) + " of the start";
      }
      const RankState& st = it->second;
      return "rank " + std::to_string(r) + " (pid " + std::to_string(st.pid) + " on " + st.host +
             ") sent no heartbeat for " + seconds_text(now - last) + " at step " +
             std::to_string(st.step) + " (stopped or hung)";
    }
    return {};
  }

  Restart diagnose(int attempt, const Attempt& a, int status) const {
    Restart r;
    r.attempt = attempt;
    r.step = a.furthest_step();
    r.detected_unix_s = a.detected_unix_s;
    // A death mpirun saw explains a silence that followed it.
    if (!a.mpirun_said.empty()) {
      r.cause = a.mpirun_said;
      r.rank = a.mpirun_rank;
      r.host = a.mpirun_host;
    } else if (!a.stalled.empty()) {
      r.cause = a.stalled;
      r.rank = a.stalled_rank;
    } else if (!a.lost_host.empty()) {
      // Before a rank's own error: a rank whose peer vanished fails too.
      r.host = a.lost_host;
      r.cause = "the job lost contact with host " + a.lost_host +
                " (its processes died, or its network went down)";
    } else if (a.daemon_lost) {
      r.cause =
          "mpirun lost a host's daemon while the job ran (the host's processes were killed, or "
          "the host or its network went down)";
    } else if (!a.rank_error.empty()) {
      r.rank = a.rank_error_rank;
      r.cause = "rank " + std::to_string(r.rank) + " failed: " + a.rank_error;
    } else if (a.mpirun_rank >= 0) {
      r.rank = a.mpirun_rank;
      r.cause = "rank " + std::to_string(r.rank) + " exited with an error";

    } else {
      r.cause = "mpirun ended (" +
                std::string(WIFEXITED(status) ? "exit " + std::to_string(WEXITSTATUS(status))
                                              : "signal " + std::to_string(WTERMSIG(status))) +
                ") before the run completed";
    }
    if (r.rank >= 0 && spec_.elastic.enabled) r.host = placed_host(a, r.rank);
    if (r.rank >= 0 && r.host.empty()) {
      if (const auto it = a.ranks.find(r.rank); it != a.ranks.end()) r.host = it->second.host;
    }
    if (r.rank >= 0 && a.stalled.empty()) {
      if (const auto it = a.ranks.find(r.rank); it != a.ranks.end() && it->second.step >= 0) {
        r.cause += " at step " + std::to_string(it->second.step);
      }
    }
    return r;
  }

  const LaunchSpec& spec_;
  const LaunchObserver& obs_;
  const std::atomic<bool>* stop_;
  std::string local_host_;
  TaggedLines tagged_;
  HostPool pool_;
  std::vector<HostfileEntry> hosts_;  // the last good host list (elastic)
  std::string discovery_warning_;     // the last discovery failure said
  Clock::time_point t_start_, attempt_t0_;
  int failures_before_ = 0;            // the attempts failed before this one
  std::vector<Restart> replacements_;  // parameter-server workers replaced (ps_mode())
  CheckpointSite last_checkpoint_;     // the newest the chief reported, and its hosts
};

}  // namespace

LaunchOutcome launch(const LaunchSpec& spec, const LaunchObserver& observer,
                     const std::atomic<bool>* stop) {
  if (spec.run_id.empty()) throw RuntimeError("launch: no run id");
  if (!spec.elastic.enabled && spec.job.ranks < 1) {
    throw InputError("launch: --np must be at least 1");
  }
  if (spec.elastic.enabled &&
      (spec.elastic.min_workers < 1 || spec.elastic.min_workers > spec.elastic.max_workers)) {
    throw InputError("launch: --min-workers must be at least 1 and at most --max-workers");
  }
  return Supervisor(spec, observer, stop).run();
}

}  // namespace baton
