// Deaths and hangs found, and the cause of a failed attempt (supervisor.h).
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

bool Supervisor::every_rank_heard(const Attempt& a) const {
  for (int r = 0; r < a.np; ++r) {
    if (is_side(r)) continue;  // their jobs are their own
    const auto it = a.ranks.find(r);
    if (it == a.ranks.end() || it->second.last_beat_s < 0) return false;
  }
  return true;
}

std::string Supervisor::seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", s);
  return buf;
}

void Supervisor::kill_local_ranks(const Attempt& a) const {
  for (const auto& [r, st] : a.ranks) signal_rank_process(st, SIGKILL);
}

std::string Supervisor::find_dead(Attempt& a, double now) const {
  int dead = -1;
  for (const auto& [r, st] : a.ranks) {
    if (st.pid <= 0 || st.ended || is_side(r) || a.node.at(r) != local_host_) continue;
    if (rank_process_alive(st)) continue;
    if (a.death_seen_s < 0) a.death_seen_s = now;
    // Ranks in order: the first without last words, else the first.
    if (dead < 0 || (a.last_words.count(dead) != 0 && a.last_words.count(r) == 0)) dead = r;
  }
  if (dead < 0 || now - a.death_seen_s < kDeathGraceS) return {};
  a.stalled_rank = dead;
  const RankState& st = a.ranks.at(dead);
  return "rank " + std::to_string(dead) + " (pid " + std::to_string(st.pid) + " on " + st.host +
         ") exited at step " + std::to_string(st.step);
}

std::string Supervisor::find_hang(Attempt& a, double now) {
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

Restart Supervisor::diagnose(int attempt, const Attempt& a, int status) const {
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

}  // namespace baton::launch_detail
