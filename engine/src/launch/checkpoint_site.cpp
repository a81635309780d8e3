#include <baton/launch/checkpoint_site.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace baton {

std::optional<CheckpointReport> parse_checkpoint_event(const std::string& line) {
  if (line.empty() || line.front() != '{') return std::nullopt;
  const nlohmann::json js = nlohmann::json::parse(line, nullptr, false);
  if (!js.is_object()) return std::nullopt;
  const auto type = js.find("type");
  const auto step = js.find("step");
  const auto path = js.find("path");
  if (type == js.end() || !type->is_string() || *type != "checkpoint" || step == js.end() ||
      !step->is_number_integer() || path == js.end() || !path->is_string()) {
    return std::nullopt;
  }
  CheckpointReport r{step->get<int64_t>(), path->get<std::string>()};
  if (r.step < 0 || r.path.empty()) return std::nullopt;
  return r;
}

void note_checkpoint(CheckpointSite& site, const CheckpointReport& report,
                     const std::string& host) {
  if (host.empty() || report.step < site.step) return;
  if (report.step > site.step || report.path != site.path) {
    site.step = report.step;
    site.path = report.path;
    site.hosts = {host};
    return;
  }
  if (std::find(site.hosts.begin(), site.hosts.end(), host) == site.hosts.end()) {
    site.hosts.push_back(host);
  }
}

ChiefPlacement place_chief(const std::vector<HostfileEntry>& usable, const CheckpointSite& site) {
  ChiefPlacement p;
  p.hosts = usable;
  if (!site.known() || usable.empty()) return p;
  // The first usable host that holds it, in list order, takes rank 0.
  const auto holder = std::find_if(usable.begin(), usable.end(), [&](const HostfileEntry& h) {
    return std::find(site.hosts.begin(), site.hosts.end(), h.host) != site.hosts.end();
  });
  if (holder != usable.end()) {
    std::rotate(p.hosts.begin(), p.hosts.begin() + (holder - usable.begin()),
                p.hosts.begin() + (holder - usable.begin()) + 1);
    return p;
  }
  p.carry_from = site.hosts.front();
  p.why = "host " + site.hosts.front() + ", which holds the checkpoint at step " +
          std::to_string(site.step) + ", is not usable now";
  return p;
}

}  // namespace baton
