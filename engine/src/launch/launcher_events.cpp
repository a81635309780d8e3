// The launcher's own events, and the command its ranks run (supervisor.h).
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

void Supervisor::emit(nlohmann::json js) {
  js["v"] = 1;
  js["time"] = unix_now();
  if (obs_.on_event) obs_.on_event(js.dump());
}

void Supervisor::emit_failure(const char* type, const Restart& r, int restarts_left) {
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

void Supervisor::emit_ranks(int attempt, const Attempt& a, const std::string& others, int blamed,
                            const std::string& blamed_state) {
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

MpirunSpec Supervisor::rank_job() const {
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

std::vector<std::string> Supervisor::arguments(int attempt, const Attempt& a,
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
    job.train_args.insert(job.train_args.end(), {"--ps-workers", std::to_string(spec_.ps_workers)});
    // Each server listens only where the job places it: on loopback when
    // every task is on this host, else on its host as the hostfile or
    // TF_CONFIG names it (MPI rank 1 + i is server i; mpirun fills the
    // placement's slots in order), which the server resolves on that host.
    if (!spec_.elastic.enabled && spec_.job.hostfile.empty()) {
      job.train_args.insert(job.train_args.end(), {"--ps-bind", "127.0.0.1"});
    } else if (!a.placement.empty()) {
      std::string hosts;
      for (int i = 0; i < spec_.ps_servers; ++i) {
        hosts += (i == 0 ? "" : ",") + placed_host(a, spec_.ps_workers + i);
      }
      job.train_args.insert(job.train_args.end(), {"--ps-bind", hosts});
    }
  }
  std::vector<std::string> args{spec_.mpirun};
  for (auto& x : mpirun_arguments(job)) args.push_back(std::move(x));
  return args;
}

}  // namespace baton::launch_detail
