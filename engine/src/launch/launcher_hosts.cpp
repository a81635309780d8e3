// Elastic hosts (supervisor.h): the host list, the placement of each
// attempt's workers, rescales, and the chief's place by its checkpoint.
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

std::string Supervisor::placed_host(const Attempt& a, int rank) const {
  if (!ps_mode()) return host_of_rank(a.placement, rank);
  if (is_side(rank)) {
    const auto it = a.side_host.find(rank);
    return it == a.side_host.end() ? std::string() : it->second;
  }
  return host_of_rank(a.placement, rank == 0 ? 0 : rank - spec_.ps_workers + 1);
}

const std::vector<HostfileEntry>& Supervisor::current_hosts() {
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

std::string Supervisor::cooling_text() const {
  std::string s;
  for (const auto& [host, left] : pool_.cooling(elapsed())) {
    s += (s.empty() ? "" : ", ") + host + " (" + seconds_text(left) + " left)";
  }
  return s;
}

bool Supervisor::wait_for_hosts(int attempt, Attempt& a, LaunchOutcome& out) {
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
    const std::string situation = std::to_string(slots) + " usable slot" + (slots == 1 ? "" : "s") +
                                  " (hosts: " + describe_hosts(*hosts) +
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

std::vector<HostfileEntry> Supervisor::chief_first(const std::vector<HostfileEntry>& usable,
                                                   Attempt& a) {
  ChiefPlacement p = place_chief(usable, last_checkpoint_);
  a.carry_from = std::move(p.carry_from);
  a.carry_why = std::move(p.why);
  return std::move(p.hosts);
}

void Supervisor::note_chief_checkpoint(const std::string& line, const Attempt& a) {
  const auto report = parse_checkpoint_event(line);
  if (!report) return;
  std::string host = placed_host(a, 0);
  if (host.empty()) {
    const auto it = a.node.find(0);
    host = it == a.node.end() ? local_host_ : it->second;
  }
  note_checkpoint(last_checkpoint_, *report, host);
}

bool Supervisor::bring_checkpoint(int attempt, const Attempt& a, LaunchOutcome& out) {
  if (a.carry_from.empty() || a.placement.empty()) return true;
  const std::string to = a.placement.front().host;
  if (obs_.on_output) {
    obs_.on_output(
        -1, "baton launch: " + a.carry_why + ": copying it to " + to + ", the chief's host now");
  }
  CarryJob job;
  job.mpirun = spec_.mpirun;
  job.env = without_secret(spec_.mpirun_env);  // a file's copy needs no secret
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

std::string Supervisor::rescale_needed(const Attempt& a, const std::vector<HostfileEntry>& listed,
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

}  // namespace baton::launch_detail
