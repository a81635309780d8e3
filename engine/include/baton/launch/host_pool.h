// Where an elastic job's workers may run (`baton launch --host-discovery`,
// or a hostfile with --min-workers/--max-workers): the hosts listed now,
// less those left out after a failure. As Horovod Elastic does, a host
// whose ranks failed is left out for a cooldown that doubles with each of
// its failures; it comes back by itself when the cooldown ends.
#pragma once

#include <baton/cluster/cluster_spec.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace baton {

// Runs `command` through /bin/sh -c (it is the user's own script, as
// Horovod runs its discovery script) and reads its standard output with
// parse_host_slots. InputError naming the command when it cannot run,
// exits with an error, takes longer than timeout_s, or prints a line that
// is not "host:slots".
std::vector<HostfileEntry> discover_hosts(const std::string& command, double timeout_s);

class HostPool {
 public:
  explicit HostPool(double cooldown_s) : cooldown_s_(cooldown_s) {}

  // `host`'s ranks failed at now_s: out for cooldown_s, doubled for each
  // earlier failure of the same host.
  void failed(const std::string& host, double now_s);
  // `hosts` without those cooling down at now_s, in their order.
  std::vector<HostfileEntry> usable(const std::vector<HostfileEntry>& hosts, double now_s) const;
  // The hosts cooling down at now_s and the seconds each has left.
  std::vector<std::pair<std::string, double>> cooling(double now_s) const;

 private:
  struct Cooldown {
    int failures = 0;
    double until_s = 0;
  };
  double cooldown_s_;
  std::map<std::string, Cooldown> hosts_;
};

// The hosts an attempt of `workers` ranks runs on: the first `workers`
// slots of `hosts`, in order, each entry's slots the ranks it gets (mpirun
// fills a hostfile's hosts in order). Fewer slots than workers: all of them.
std::vector<HostfileEntry> place_workers(const std::vector<HostfileEntry>& hosts, int workers);

// The host rank `rank` runs on under place_workers' placement ("" past the end).
std::string host_of_rank(const std::vector<HostfileEntry>& placement, int rank);

// "a:2, b:1"
std::string describe_hosts(const std::vector<HostfileEntry>& hosts);

}  // namespace baton
