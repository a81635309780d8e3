#include <baton/cluster/cluster_spec.h>
#include <baton/core/child_process.h>
#include <baton/core/error.h>
#include <baton/discovery/remote_probe.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

namespace baton {
namespace {

std::string seconds(double s) {  // "%g": 0.5, 30, 1e+03
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

}  // namespace

std::vector<HostInfo> probe_remote_hosts(const RemoteProbe& a) {
  std::vector<std::string> args = {"mpirun"};
  size_t expected = 0;  // 0: as many as the hostfile has nodes
  if (!a.hostfile.empty()) {
    (void)read_hostfile(a.hostfile);  // every host name checked, file:line in the message
    args.insert(args.end(), {"--hostfile", a.hostfile, "--map-by", "ppr:1:node"});
  } else {
    std::stringstream list(a.hosts);
    std::string entry;
    while (std::getline(list, entry, ',')) {
      if (entry.empty() || entry.find_first_of(" \t") != std::string::npos) {
        throw InputError("--hosts \"" + a.hosts + "\": expected host names separated by commas");
      }
      // Names go into mpirun's arguments: only real host names and
      // addresses (RFC 1123, IPv4, IPv6), never option-like or odd text.
      if (const std::string why = host_problem(entry); !why.empty()) {
        throw InputError("--hosts \"" + a.hosts + "\": " + why);
      }
      ++expected;
    }
    if (expected == 0 || a.hosts.back() == ',') {
      throw InputError("--hosts \"" + a.hosts + "\": expected host names separated by commas");
    }
    // One process per entry, spread node by node: "h1,h2" puts one on
    // each, "localhost,localhost" two on this machine.
    args.insert(args.end(), {"-H", a.hosts, "-np", std::to_string(expected), "--map-by", "node"});
    if (expected > std::max(1u, std::thread::hardware_concurrency()))
      args.push_back("--oversubscribe");
  }
  args.insert(args.end(), {"--bind-to", "none", a.baton, "probe", "--json", "--single-line"});

  const std::string mpirun = find_on_path("mpirun");
  if (mpirun.empty()) {
    throw InputError(
        "mpirun not found on PATH: --hosts and --hostfile run through Open MPI's "
        "mpirun (install openmpi-bin)");
  }
  std::vector<std::string> env;
  if (::geteuid() == 0) env = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
  if (!(a.timeout_s > 0)) {
    throw InputError("--timeout: expected a number of seconds > 0, got " + seconds(a.timeout_s));
  }
  const ChildResult r = run_child(mpirun, args, env, a.timeout_s);
  if (r.timed_out) {
    std::string why = excerpt(r.err);
    throw RuntimeError("mpirun did not finish within " + seconds(a.timeout_s) +
                       " s and was stopped (is every host reachable by ssh without a password "
                       "prompt? raise --timeout for slow hosts)" +
                       (why.empty() ? std::string() : ":\n" + why));
  }

  if (!exited_ok(r.status)) {
    const std::string how = describe_exit(r.status);
    std::string why = excerpt(r.err);
    if (why.empty()) why = excerpt(r.out);
    throw RuntimeError("mpirun failed (" + how + "):\n" + why);
  }

  std::vector<std::pair<int, HostInfo>> ranked;
  std::stringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line.front() != '{') continue;  // anything else mpirun printed
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw RuntimeError(std::string("a probe sent a line that is not JSON: ") + e.what());
    }
    const int rank = doc.is_object() && doc.contains("rank") && doc["rank"].is_number_integer()
                         ? doc["rank"].get<int>()
                         : static_cast<int>(ranked.size());
    ranked.emplace_back(rank, host_info_from_json(doc));
  }
  if (ranked.empty() || (expected > 0 && ranked.size() != expected)) {
    throw RuntimeError("mpirun ran, but " + std::to_string(ranked.size()) + " probe(s) answered" +
                       (expected > 0 ? " of " + std::to_string(expected) : std::string()) +
                       (r.err.empty() ? std::string() : ":\n" + excerpt(r.err)));
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<HostInfo> hosts;
  for (auto& [rank, host] : ranked) hosts.push_back(std::move(host));
  return hosts;
}

}  // namespace baton
