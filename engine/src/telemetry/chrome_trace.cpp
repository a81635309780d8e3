#include <baton/core/error.h>
#include <baton/telemetry/chrome_trace.h>

#include <algorithm>
#include <map>
#include <set>

namespace baton {

nlohmann::json timeline_part(const Timeline& timeline, int rank, const std::string& host,
                             int64_t offset_ns, int64_t round_trip_ns) {
  nlohmann::json names = nlohmann::json::array();
  nlohmann::json spans = nlohmann::json::array();
  // Names are string literals: one entry per distinct (name, category).
  std::map<std::pair<std::string, std::string>, int> index;
  for (const TimelineSpan& s : timeline.spans()) {
    const auto key = std::make_pair(std::string(s.name), std::string(s.category));
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, static_cast<int>(names.size())).first;
      names.push_back({key.first, key.second});
    }
    spans.push_back(
        {it->second, s.lane, s.step, s.start_ns + offset_ns, s.duration_ns, s.num_bytes, s.index});
  }
  return {{"rank", rank},
          {"host", host},
          {"offset_ns", offset_ns},
          {"round_trip_ns", round_trip_ns},
          {"dropped", timeline.dropped()},
          {"names", std::move(names)},
          {"spans", std::move(spans)}};
}

nlohmann::json timeline_record(std::vector<nlohmann::json> parts, double base_unix_s,
                               const std::string& clock) {
  std::sort(parts.begin(), parts.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a.value("rank", 0) < b.value("rank", 0);
  });
  nlohmann::json ranks = nlohmann::json::array();
  for (auto& p : parts) ranks.push_back(std::move(p));
  return {{"version", 1}, {"base_unix_s", base_unix_s}, {"clock", clock}, {"ranks", ranks}};
}

std::string timeline_lane_name(int32_t lane) {
  const auto replica = timeline_lane(TimelineLane::kReplica);
  const auto comm = timeline_lane(TimelineLane::kReplicaComm);
  if (lane == timeline_lane(TimelineLane::kStepLoop)) return "step loop";
  if (lane >= comm && lane < comm + 100)
    return "replica " + std::to_string(lane - comm) + " allreduce";
  if (lane >= replica && lane < replica + 100) return "replica " + std::to_string(lane - replica);
  return "lane " + std::to_string(lane);
}

namespace {

[[noreturn]] void malformed(const std::string& where, const std::string& what) {
  throw RuntimeError("timeline record: " + where + ": " + what);
}

const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) malformed(where, std::string("no \"") + key + "\"");
  return *it;
}

int64_t integer(const nlohmann::json& j, const std::string& where) {
  if (!j.is_number_integer()) malformed(where, "expected an integer, found " + j.dump());
  return j.get<int64_t>();
}

}  // namespace

nlohmann::json chrome_trace(const nlohmann::json& record) {
  if (!record.is_object()) malformed("(top)", "expected an object");
  if (record.value("version", 0) != 1) {
    malformed("version", "expected 1, found " + field(record, "version", "(top)").dump());
  }
  const nlohmann::json& ranks = field(record, "ranks", "(top)");
  if (!ranks.is_array()) malformed("ranks", "expected an array");
  nlohmann::json events = nlohmann::json::array();
  int64_t dropped = 0;
  for (size_t k = 0; k < ranks.size(); ++k) {
    const nlohmann::json& part = ranks[k];
    const std::string where = "ranks[" + std::to_string(k) + "]";
    if (!part.is_object()) malformed(where, "expected an object");
    const int64_t rank = integer(field(part, "rank", where), where + ".rank");
    const std::string host = part.value("host", "");
    dropped += part.value("dropped", int64_t{0});
    events.push_back(
        {{"name", "process_name"},
         {"ph", "M"},
         {"pid", rank},
         {"args",
          {{"name", "rank " + std::to_string(rank) + (host.empty() ? "" : " (" + host + ")")}}}});
    events.push_back({{"name", "process_sort_index"},
                      {"ph", "M"},
                      {"pid", rank},
                      {"args", {{"sort_index", rank}}}});
    const nlohmann::json& names = field(part, "names", where);
    const nlohmann::json& spans = field(part, "spans", where);
    if (!names.is_array()) malformed(where + ".names", "expected an array");
    if (!spans.is_array()) malformed(where + ".spans", "expected an array");
    std::set<int64_t> lanes;
    for (size_t i = 0; i < spans.size(); ++i) {
      const nlohmann::json& s = spans[i];
      const std::string at = where + ".spans[" + std::to_string(i) + "]";
      if (!s.is_array() || s.size() != 7) malformed(at, "expected an array of 7 numbers");
      const int64_t name = integer(s[0], at + "[0]");
      if (name < 0 || name >= static_cast<int64_t>(names.size())) {
        malformed(at + "[0]", "no name " + std::to_string(name));
      }
      const nlohmann::json& nc = names[static_cast<size_t>(name)];
      if (!nc.is_array() || nc.size() != 2 || !nc[0].is_string() || !nc[1].is_string()) {
        malformed(where + ".names[" + std::to_string(name) + "]", "expected [name, category]");
      }
      const int64_t lane = integer(s[1], at + "[1]");
      const int64_t step = integer(s[2], at + "[2]");
      const int64_t start = integer(s[3], at + "[3]");
      const int64_t dur = integer(s[4], at + "[4]");
      const int64_t bytes = integer(s[5], at + "[5]");
      const int64_t index = integer(s[6], at + "[6]");
      if (dur < 0) malformed(at + "[4]", "a negative duration");
      lanes.insert(lane);
      nlohmann::json args = nlohmann::json::object();
      if (step >= 0) args["step"] = step;
      if (bytes > 0) args["bytes"] = bytes;
      if (index >= 0) args["bucket"] = index;
      // Microseconds, as the format wants; a fraction keeps the ns.
      events.push_back(
          {{"name", nc[0]},
           {"cat", nc[1]},
           {"ph", "X"},
           {"pid", rank},
           {"tid", lane},
           // dur from the end's value: spans that end together
           // end at the same ts + dur (nesting holds in viewers).
           {"ts", static_cast<double>(start) / 1000.0},
           {"dur", static_cast<double>(start + dur) / 1000.0 - static_cast<double>(start) / 1000.0},
           {"args", std::move(args)}});
    }
    for (int64_t lane : lanes) {
      events.push_back({{"name", "thread_name"},
                        {"ph", "M"},
                        {"pid", rank},
                        {"tid", lane},
                        {"args", {{"name", timeline_lane_name(static_cast<int32_t>(lane))}}}});
      events.push_back({{"name", "thread_sort_index"},
                        {"ph", "M"},
                        {"pid", rank},
                        {"tid", lane},
                        {"args", {{"sort_index", lane}}}});
    }
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"producer", "baton"},
            {"clock", record.value("clock", "")},
            {"base_unix_s", record.value("base_unix_s", 0.0)},
            {"dropped_spans", dropped}}}};
}

}  // namespace baton
