#include <baton/cluster/run_links.h>

namespace baton {

int64_t add_run_links(std::map<LinkClass, LinkClassTotals>& totals,
                      const std::vector<std::string>& rank_hosts,
                      const std::vector<RunLinkSample>& samples, const std::string& run) {
  const auto ranks = static_cast<int>(rank_hosts.size());
  int64_t taken = 0;
  for (const auto& s : samples) {
    if (s.estimated || s.eager || s.num_bytes <= 0 || !(s.seconds > 0)) continue;
    if (s.src < 0 || s.src >= ranks || s.dst < 0 || s.dst >= ranks || s.src == s.dst) continue;
    const LinkClass cls =
        rank_hosts[static_cast<size_t>(s.src)] == rank_hosts[static_cast<size_t>(s.dst)]
            ? LinkClass::kSharedMemory
            : LinkClass::kNetwork;
    LinkClassTotals& t = totals[cls];
    t.num_bytes += s.num_bytes;
    t.seconds += s.seconds;
    ++t.samples;
    t.runs.insert(run);
    ++taken;
  }
  return taken;
}

void apply_run_links(LinkCosts& costs, const std::map<LinkClass, LinkClassTotals>& totals,
                     const std::string& where) {
  for (const auto& [cls, t] : totals) {
    if (!(t.bytes_per_s() > 0)) continue;
    AlphaBeta& ab = costs.by_class[cls];
    std::string runs;
    for (const auto& r : t.runs) runs += (runs.empty() ? "" : ", ") + r;
    // The latency's source, not the bandwidth's of an earlier pass.
    std::string latency = ab.source.empty() ? "nominal" : ab.source;
    const std::string kLatency = "; latency: ";
    if (latency.rfind("bandwidth: ", 0) == 0 && latency.find(kLatency) != std::string::npos) {
      latency = latency.substr(latency.find(kLatency) + kLatency.size());
    }
    ab.source = "bandwidth: " + std::to_string(t.samples) + " measured link samples of run" +
                (t.runs.size() == 1 ? " " : "s ") + runs + " (" + where + ")" + kLatency + latency;
    ab.bytes_per_s = t.bytes_per_s();
    ab.measured.clear();  // the runs' rate replaces calibrate's by-size points
  }
}

}  // namespace baton
