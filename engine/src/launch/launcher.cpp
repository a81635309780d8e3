// launch(): the attempts of a job, and the watch over each (supervisor.h).
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

Supervisor::Supervisor(const LaunchSpec& spec, const LaunchObserver& obs,
                       const std::atomic<bool>* stop)
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

LaunchOutcome Supervisor::run() {
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
    if (a.input_error || a.resume_refused) {
      // Neither comes right by trying again: bad input, or a chief placed
      // where the run's newest checkpoint is not (ResumeRefused).
      out.status = "failed";
      out.exit_code = a.input_error ? 2 : 1;
      out.reason =
          r.cause + (a.input_error ? " (an input error: not restarted)"
                                   : " (not restarted: the next attempt would find the same)");
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

int Supervisor::run_attempt(int attempt, Attempt& a, const std::string& hostfile) {
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
                                 ": stopping at a checkpoint to go on with " + std::to_string(to) +
                                 " worker" + (to == 1 ? "" : "s"));
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
    if (std::string dead = find_dead(a, now); !dead.empty()) return end_now(std::move(dead));
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

}  // namespace baton::launch_detail

namespace baton {

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
  return launch_detail::Supervisor(spec, observer, stop).run();
}

}  // namespace baton
