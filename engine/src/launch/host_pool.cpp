#include <baton/core/child_process.h>
#include <baton/core/error.h>
#include <baton/launch/host_pool.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace baton {

std::vector<HostfileEntry> discover_hosts(const std::string& command, double timeout_s) {
  const std::string what = "--host-discovery \"" + command + "\"";
  ChildResult r;
  try {
    r = run_child("/bin/sh", {"sh", "-c", command}, {}, timeout_s);
  } catch (const std::exception& e) {
    throw InputError(what + ": cannot be run: " + e.what());
  }
  if (r.timed_out) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", timeout_s);
    throw InputError(what + ": did not finish within " + std::string(buf) + " s");
  }
  if (!exited_ok(r.status)) {
    const std::string said = excerpt(r.err);
    throw InputError(what + ": failed (" + describe_exit(r.status) + ")" +
                     (said.empty() ? "" : ": " + said));
  }
  return parse_host_slots(r.out, what + " output");
}

void HostPool::failed(const std::string& host, double now_s) {
  Cooldown& c = hosts_[host];
  ++c.failures;
  c.until_s = now_s + cooldown_s_ * std::ldexp(1.0, std::min(c.failures - 1, 20));
}

std::vector<HostfileEntry> HostPool::usable(const std::vector<HostfileEntry>& hosts,
                                            double now_s) const {
  std::vector<HostfileEntry> out;
  for (const auto& h : hosts) {
    const auto it = hosts_.find(h.host);
    if (it == hosts_.end() || it->second.until_s <= now_s) out.push_back(h);
  }
  return out;
}

std::vector<std::pair<std::string, double>> HostPool::cooling(double now_s) const {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [host, c] : hosts_) {
    if (c.until_s > now_s) out.emplace_back(host, c.until_s - now_s);
  }
  return out;
}

std::vector<HostfileEntry> place_workers(const std::vector<HostfileEntry>& hosts, int workers) {
  std::vector<HostfileEntry> out;
  int left = workers;
  for (const auto& h : hosts) {
    if (left <= 0) break;
    HostfileEntry e;
    e.host = h.host;
    e.slots = std::min(h.slots, left);
    left -= e.slots;
    out.push_back(std::move(e));
  }
  return out;
}

std::string host_of_rank(const std::vector<HostfileEntry>& placement, int rank) {
  int first = 0;
  for (const auto& h : placement) {
    if (rank >= first && rank < first + h.slots) return h.host;
    first += h.slots;
  }
  return {};
}

std::string describe_hosts(const std::vector<HostfileEntry>& hosts) {
  std::string s;
  for (const auto& h : hosts) {
    if (!s.empty()) s += ", ";
    s += h.host + ":" + std::to_string(h.slots);
  }
  return s.empty() ? "none" : s;
}

}  // namespace baton
