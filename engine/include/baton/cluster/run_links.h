// Link figures from the measured links of real runs: what `baton calibrate
// --from-history` adds to the ping-pong calibration. A run's link samples
// are totals over a logging window (bytes and transfer seconds of many
// messages), so they give a link's sustained bandwidth under the run's own
// traffic, not its latency: a class's bandwidth becomes the runs' total
// bytes over their total transfer time, and its latency stays what the
// calibration (or the nominal figure) had.
#pragma once

#include <baton/cluster/cost_model.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace baton {

// One link sample of a run (history's LinkRecord, without the history).
struct RunLinkSample {
  int src = 0, dst = 0;
  int64_t num_bytes = 0;
  double seconds = 0;  // transfer time
  bool estimated = false;
  bool eager = false;  // messages under MPI's eager limit: a buffer copy's rate
};

// What the runs moved over one link class.
struct LinkClassTotals {
  int64_t num_bytes = 0;
  double seconds = 0;
  int64_t samples = 0;
  std::set<std::string> runs;
  double bytes_per_s() const { return seconds > 0 ? static_cast<double>(num_bytes) / seconds : 0; }
};

// Adds one run's measured samples (processes of an MPI job; rank r ran on
// rank_hosts[r]): ranks on one host are shared memory, on two the network.
// Estimated samples (a traffic model's, not a measurement), eager ones
// (messages under MPI's eager limit, which arrive with their envelope: their
// rate is a copy out of MPI's buffer, not the link's bandwidth), empty ones
// and ranks without a host are left out.
// Returns how many samples it took.
int64_t add_run_links(std::map<LinkClass, LinkClassTotals>& totals,
                      const std::vector<std::string>& rank_hosts,
                      const std::vector<RunLinkSample>& samples, const std::string& run);

// Each class in `totals` gets its bandwidth from them (the latency kept),
// and a source that says so: "bandwidth: N measured link samples of runs
// A, B (<where>); latency: <the previous source>".
void apply_run_links(LinkCosts& costs, const std::map<LinkClass, LinkClassTotals>& totals,
                     const std::string& where);

}  // namespace baton
