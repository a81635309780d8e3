// Parameter-server workers outside the MPI job (supervisor.h): started,
// watched, replaced, placed and retired with their hosts.
#include <baton/core/error.h>
#include <baton/core/process_identity.h>
#include <baton/launch/checkpoint_carry.h>
#include <baton/launch/rank_process.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <regex>
#include <thread>

#include "supervisor.h"

namespace baton::launch_detail {

std::vector<std::string> Supervisor::side_arguments(const SideWorker& w, const Attempt& a) const {
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

void Supervisor::start_side(SideWorker& w, const Attempt& a, double now) const {
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

void Supervisor::place_sides(std::vector<SideWorker>& sides, Attempt& a, double now, int attempt,
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

int Supervisor::running_workers(const std::vector<SideWorker>& sides) {
  int n = 1;  // the chief
  for (const auto& w : sides) n += w.child ? 1 : 0;
  return n;
}

void Supervisor::retire_sides(std::vector<SideWorker>& sides, Attempt& a, int attempt,
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

bool Supervisor::read_side(SideWorker& w, Attempt& a, double now, bool wait) {
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

std::string Supervisor::watch_side(SideWorker& w, int attempt, Attempt& a, double now,
                                   bool stopping) {
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

std::string Supervisor::act_on_death(SideWorker& w, int attempt, Attempt& a, double now,
                                     bool stopping) {
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

}  // namespace baton::launch_detail
