#include <baton/core/error.h>
#include <baton/core/running_child.h>
#include <baton/launch/launcher.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>

namespace baton {

std::string& TaggedLines::partial(int rank, bool err) {
  for (auto& [key, text] : partial_) {
    if (key.first == rank && key.second == err) return text;
  }
  partial_.push_back({{rank, err}, {}});
  return partial_.back().second;
}

void TaggedLines::feed(const std::string& line, std::vector<Line>& out) {
  // The tags on the line, in order: "[job,rank]<stdout>:" or "<stderr>:".
  static const std::regex tag(R"(\[\d+,(\d+)\]<(stdout|stderr)>:)");
  auto it = std::sregex_iterator(line.begin(), line.end(), tag);
  const auto end = std::sregex_iterator();
  if (it == end || it->position() != 0) {
    out.push_back({-1, false, line});
    return;
  }
  while (it != end) {
    const std::smatch m = *it;
    const int rank = std::stoi(m[1]);
    const bool err = m[2] == "stderr";
    const size_t from = static_cast<size_t>(m.position() + m.length());
    ++it;
    const size_t to = it == end ? line.size() : static_cast<size_t>(it->position());
    std::string& part = partial(rank, err);
    part.append(line, from, to - from);
    if (it == end) {
      out.push_back({rank, err, std::move(part)});
      part.clear();
    }
  }
}

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One attempt's view of its job.
struct Attempt {
  std::map<int, RankState> ranks;
  std::string chief_status;  // the chief's run_end status, when it came
  std::string rank_error;    // the first "baton: failed/error (rank R): ..." line
  int rank_error_rank = -1;
  bool input_error = false;  // a rank's "baton: error" (exit 2)
  std::string mpirun_said;   // mpirun's report of who died
  int mpirun_rank = -1;
  std::string mpirun_host;
  std::string stalled;  // the launcher's own finding (hang, stall)
  int stalled_rank = -1;
  double detected_unix_s = 0;

  int64_t furthest_step() const {
    int64_t s = -1;
    for (const auto& [r, st] : ranks) s = std::max(s, st.step);
    return s;
  }
};

class Supervisor {
 public:
  Supervisor(const LaunchSpec& spec, const LaunchObserver& obs, const std::atomic<bool>* stop)
      : spec_(spec), obs_(obs), stop_(stop) {
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    local_host_ = host;
  }

  LaunchOutcome run() {
    LaunchOutcome out;
    for (int attempt = 1;; ++attempt) {
      out.attempts = attempt;
      Attempt a;
      const int status = run_attempt(attempt, a);
      if (a.chief_status == "completed" && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        out.status = "completed";
        out.exit_code = 0;
        break;
      }
      if (stop_requested()) {
        out.status = "interrupted";
        out.exit_code = 130;
        out.reason = "stopped on request";
        break;
      }
      Restart r = diagnose(attempt, a, status);
      if (a.input_error) {
        out.status = "failed";
        out.exit_code = 2;
        out.reason = r.cause + " (an input error: not restarted)";
        break;
      }
      out.restarts.push_back(r);
      if (obs_.on_restart) obs_.on_restart(r);
      const bool again = attempt <= spec_.max_restarts;
      emit({{"type", again ? "restart" : "launch_failure"},
            {"run", spec_.run_id},
            {"attempt", attempt},
            {"cause", r.cause},
            {"rank", r.rank},
            {"host", r.host},
            {"step", r.step},
            {"detected", r.detected_unix_s},
            {"restarts_left", std::max(0, spec_.max_restarts - attempt)}});
      if (!again) {
        out.status = "failed";
        out.exit_code = 1;
        out.reason = r.cause + " (after " + std::to_string(spec_.max_restarts) + " restart" +
                     (spec_.max_restarts == 1 ? "" : "s") + ")";
        break;
      }
    }
    emit({{"type", "launch_end"},
          {"run", spec_.run_id},
          {"status", out.status},
          {"attempts", out.attempts},
          {"restarts", static_cast<int>(out.restarts.size())},
          {"reason", out.reason}});
    return out;
  }

 private:
  bool stop_requested() const { return stop_ != nullptr && stop_->load(); }

  void emit(nlohmann::json js) {
    js["v"] = 1;
    js["time"] = unix_now();
    if (obs_.on_event) obs_.on_event(js.dump());
  }

  std::vector<std::string> arguments(int attempt) const {
    MpirunSpec job = spec_.job;
    if (!spec_.config_text.empty()) job.config = "-";
    job.tag_output = true;
    job.events = "-";
    job.quiet = true;
    char beat[32];
    std::snprintf(beat, sizeof(beat), "%g", spec_.heartbeat_s);
    job.train_args.insert(job.train_args.end(), {"--run-id", spec_.run_id, "--heartbeat", beat});
    if (attempt > 1 || spec_.resume) job.train_args.emplace_back("--resume");
    std::vector<std::string> args{spec_.mpirun};
    for (auto& x : mpirun_arguments(job)) args.push_back(std::move(x));
    return args;
  }

  void take_output_line(const std::string& line, Attempt& a, double now) {
    std::vector<TaggedLines::Line> lines;
    tagged_.feed(line, lines);
    for (const auto& l : lines) take_line(l.rank, l.is_stderr, l.text, a, now);
  }

  void take_line(int rank, bool err, const std::string& text, Attempt& a, double now) {
    const std::string& line = text;
    if (rank < 0) {
      take_mpirun_line(line, a);
      if (obs_.on_output) obs_.on_output(-1, line);
      return;
    }
    if (!err && !text.empty() && text.front() == '{') {
      nlohmann::json js = nlohmann::json::parse(text, nullptr, false);
      if (js.is_object() && js.value("type", "") == "heartbeat") {
        RankState& st = a.ranks[rank];
        st.rank = rank;
        st.pid = js.value("pid", 0L);
        st.host = js.value("host", "");
        st.step = std::max(st.step, js.value("step", int64_t{-1}));
        st.last_beat_s = now;
        return;
      }
      // A step event says how far its rank got, sooner than its next beat.
      if (js.is_object() && js.value("type", "") == "step" && a.ranks.count(rank) != 0) {
        RankState& st = a.ranks[rank];
        st.step = std::max(st.step, js.value("step", int64_t{-1}));
      }
      if (js.is_object() && rank == 0) {
        if (js.value("type", "") == "run_end") a.chief_status = js.value("status", "");
        if (obs_.on_event) obs_.on_event(text);
        return;
      }
      // The other ranks' events: their own step and link figures go on
      // (each names its rank, or its link); the run's events are the chief's.
      if (js.is_object() && js.contains("type")) {
        const std::string type = js.value("type", "");
        if ((type == "step" || type == "link") && obs_.on_event) obs_.on_event(text);
        return;
      }
    }
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
      const size_t colon = text.find("): ");
      a.rank_error = colon != std::string::npos ? text.substr(colon + 3) : text.substr(13);
      a.rank_error_rank = rank;
    }
  }

  static void take_mpirun_line(const std::string& line, Attempt& a) {
    static const std::regex signal_re(
        R"(process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)(?: \(([^)]*)\))?)");
    static const std::regex exit_re(R"(Process name: \[\[\d+,\d+\],(\d+)\])");
    std::smatch m;
    if (std::regex_search(line, m, signal_re)) {
      a.mpirun_rank = std::stoi(m[1]);
      a.mpirun_host = m[2];
      a.mpirun_said = "rank " + m[1].str() + " on " + m[2].str() + " was killed by signal " +
                      m[3].str() + (m[4].matched ? " (" + m[4].str() + ")" : "");
    } else if (std::regex_search(line, m, exit_re) && a.mpirun_rank < 0) {
      a.mpirun_rank = std::stoi(m[1]);
    }
  }

  // Runs one attempt to its end (or until the launcher ends it); returns
  // mpirun's wait status.
  int run_attempt(int attempt, Attempt& a) {
    tagged_ = TaggedLines();
    std::optional<std::string> input;
    if (!spec_.config_text.empty()) input = spec_.config_text;
    RunningChild child(spec_.mpirun, arguments(attempt), spec_.mpirun_env, input);
    const auto t0 = Clock::now();
    double last_progress = 0;
    int64_t furthest = -1;
    bool stop_sent = false;
    RunningChild::Lines lines;
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
      return status;
    };
    Clock::time_point stop_sent_at;
    while (true) {
      const bool open = child.read(0.1, lines);
      const double now = seconds_since(t0);
      drain(now);
      if (const auto st = child.exit_status()) {
        a.detected_unix_s = unix_now();
        // What is still in the pipes (mpirun's report comes last).
        const auto until = Clock::now() + std::chrono::seconds(2);
        while (child.read(0.1, lines) && Clock::now() < until) drain(seconds_since(t0));
        drain(seconds_since(t0));
        return child.terminate(0);  // its group's leftovers go too
      }
      if (!open) continue;  // streams closed: the exit comes next
      if (stop_requested() && !stop_sent) {
        // mpirun passes SIGUSR1 on to every rank: they stop together.
        child.signal_group(SIGUSR1);
        stop_sent = true;
        stop_sent_at = Clock::now();
      }
      if (stop_sent) {
        // A job that cannot stop (a rank hung) is ended after a minute.
        if (Clock::now() - stop_sent_at > std::chrono::seconds(60)) {
          const int status = child.terminate(spec_.grace_s, &lines);
          kill_local_ranks(a);
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

  static std::string seconds_text(double s) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f s", s);
    return buf;
  }

  // mpirun starts each rank in a process group of its own: the ranks on
  // this host that outlive a killed mpirun are ended by their pids.
  void kill_local_ranks(const Attempt& a) const {
    for (const auto& [r, st] : a.ranks) {
      if (st.pid > 0 && st.host == local_host_) ::kill(static_cast<pid_t>(st.pid), SIGKILL);
    }
  }

  // A rank on this host whose process is gone (seen before mpirun, which
  // reports a death only once it has ended the others).
  std::string find_dead(Attempt& a) const {
    for (const auto& [r, st] : a.ranks) {
      if (st.pid <= 0 || st.host != local_host_) continue;
      if (::kill(static_cast<pid_t>(st.pid), 0) != 0 && errno == ESRCH) {
        a.stalled_rank = r;
        return "rank " + std::to_string(r) + " (pid " + std::to_string(st.pid) + " on " + st.host +
               ") exited at step " + std::to_string(st.step);
      }
    }
    return {};
  }

  std::string find_hang(Attempt& a, double now) {
    for (int r = 0; r < spec_.job.ranks; ++r) {
      const auto it = a.ranks.find(r);
      const double last = it == a.ranks.end() ? 0.0 : it->second.last_beat_s;
      if (now - last <= spec_.heartbeat_timeout_s) continue;
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
};

}  // namespace

LaunchOutcome launch(const LaunchSpec& spec, const LaunchObserver& observer,
                     const std::atomic<bool>* stop) {
  if (spec.run_id.empty()) throw RuntimeError("launch: no run id");
  if (spec.job.ranks < 1) throw InputError("launch: --np must be at least 1");
  return Supervisor(spec, observer, stop).run();
}

}  // namespace baton
