// history export (csv, json) and history diff.
#include <baton/core/csv.h>
#include <baton/core/error.h>
#include <baton/core/json_text.h>
#include <baton/history/store.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

namespace baton {
namespace {

// Objects are walked; anything else (arrays included) is a leaf value.
void flatten(const nlohmann::json& j, const std::string& prefix,
             std::map<std::string, nlohmann::json>* out) {
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
    }
  } else {
    (*out)[prefix.empty() ? "(root)" : prefix] = j;
  }
}

// JSON has no NaN: it is written as null.
nlohmann::json json_number(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

void write(std::FILE* out, const std::string& s) {
  if (std::fwrite(s.data(), 1, s.size(), out) != s.size()) {
    throw RuntimeError(std::string("write failed (") + std::strerror(errno) + ")");
  }
}

}  // namespace

std::vector<ConfigChange> diff_configs(const nlohmann::json& a, const nlohmann::json& b) {
  std::map<std::string, nlohmann::json> fa, fb;
  flatten(a, "", &fa);
  flatten(b, "", &fb);
  std::vector<ConfigChange> out;
  auto ia = fa.begin();
  auto ib = fb.begin();
  while (ia != fa.end() || ib != fb.end()) {
    if (ib == fb.end() || (ia != fa.end() && ia->first < ib->first)) {
      out.push_back({ConfigChange::Kind::kRemoved, ia->first, ia->second, nullptr});
      ++ia;
    } else if (ia == fa.end() || ib->first < ia->first) {
      out.push_back({ConfigChange::Kind::kAdded, ib->first, nullptr, ib->second});
      ++ib;
    } else {
      if (ia->second != ib->second) {
        out.push_back({ConfigChange::Kind::kChanged, ia->first, ia->second, ib->second});
      }
      ++ia;
      ++ib;
    }
  }
  return out;
}

void export_run_csv(const HistoryStore& store, int64_t run, std::FILE* out) {
  write(out, "step,wall_time_s,rank,metric,value\n");
  std::string line;
  store.for_each_sample(run, [&](const MetricSample& s) {
    line = std::to_string(s.step);
    csv::add_number(line, s.wall_time_s);
    csv::add(line, std::to_string(s.rank));
    csv::add(line, s.metric);
    csv::add_number(line, s.value);
    line += '\n';
    write(out, line);
  });
}

nlohmann::json run_to_json(const RunRecord& r, bool full) {
  nlohmann::json j = {{"id", r.id},
                      {"uid", r.uid},
                      {"name", r.name},
                      {"status", r.status},
                      {"start_time", r.start_time},
                      {"end_time", r.end_time > 0 ? nlohmann::json(r.end_time) : nullptr},
                      {"strategy", r.strategy},
                      {"replicas", r.replicas},
                      {"hosts", r.hosts},
                      {"tags", r.tags},
                      {"notes", r.notes},
                      {"error", r.error}};
  if (full) {
    j["config"] = r.config;
    j["topology"] = r.topology;
    j["start_info"] = r.start_info;
  }
  j["final_metrics"] = r.final_metrics;
  return j;
}

void export_run_json(const HistoryStore& store, int64_t run, std::FILE* out) {
  const RunRecord r = store.run(run);
  nlohmann::json head = run_to_json(r, /*full=*/true);
  // Samples are streamed: a long run's millions of them never sit in one
  // JSON value in memory.
  write(out, "{\"run\":" + json_text(head) + ",\n\"metrics\":[");
  bool first = true;
  store.for_each_sample(run, [&](const MetricSample& s) {
    const nlohmann::json row = {{"step", s.step},
                                {"wall_time_s", s.wall_time_s},
                                {"rank", s.rank},
                                {"metric", s.metric},
                                {"value", json_number(s.value)}};
    write(out, (first ? "\n" : ",\n") + json_text(row));
    first = false;
  });
  write(out, "],\n\"links\":[");
  first = true;
  for (const LinkRecord& l : store.links(run)) {
    const nlohmann::json row = {{"step", l.step},
                                {"wall_time_s", l.wall_time_s},
                                {"src", l.src},
                                {"dst", l.dst},
                                {"num_bytes", l.num_bytes},
                                {"seconds", l.seconds},
                                {"estimated", l.estimated},
                                {"wait_s", l.wait_s},
                                {"eager", l.eager}};
    write(out, (first ? "\n" : ",\n") + json_text(row));
    first = false;
  }
  write(out, "],\n\"events\":[");
  first = true;
  for (const RunEventRecord& e : store.events(run)) {
    const nlohmann::json row = {{"step", e.step},       {"wall_time_s", e.wall_time_s},
                                {"kind", e.kind},       {"level", e.level},
                                {"message", e.message}, {"data", e.data}};
    write(out, (first ? "\n" : ",\n") + json_text(row));
    first = false;
  }
  write(out, "]}\n");
}

}  // namespace baton
