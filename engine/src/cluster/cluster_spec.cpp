// TF_CONFIG cluster specs: reading, checking, rank order and writing.
// Hostfiles are in hostfile.cpp.
#include <arpa/inet.h>
#include <baton/cluster/cluster_spec.h>
#include <baton/core/config.h>
#include <baton/core/error.h>

#include <array>
#include <charconv>
#include <climits>
#include <map>
#include <utility>

namespace baton {
namespace {

constexpr std::array<TaskRole, 4> kRoles = {TaskRole::kChief, TaskRole::kWorker, TaskRole::kPs,
                                            TaskRole::kEvaluator};

std::string show(const nlohmann::json& v) {
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

// Bytes that are not UTF-8 (a hostfile is any file) show as U+FFFD, not
// as an exception from the JSON writer (found by fuzzing).
std::string json_quoted(std::string_view s) {
  return nlohmann::json(std::string(s)).dump(-1, ' ', false,
                                             nlohmann::json::error_handler_t::replace);
}

std::vector<HostPort>& list_of(ClusterSpec& spec, TaskRole role) {
  switch (role) {
    case TaskRole::kChief:
      return spec.chief;
    case TaskRole::kWorker:
      return spec.worker;
    case TaskRole::kPs:
      return spec.ps;
    default:
      return spec.evaluator;
  }
}

std::string entry_path(TaskRole role, size_t i) {
  return std::string("cluster.") + to_string(role) + "[" + std::to_string(i) + "]";
}

bool is_ip_v4_like(std::string_view host) {
  // Every label all digits: meant as an IPv4 address, not a name.
  bool digit_seen = false;
  for (char c : host) {
    if (c == '.') {
      if (!digit_seen) return false;
      digit_seen = false;
    } else if (c >= '0' && c <= '9') {
      digit_seen = true;
    } else {
      return false;
    }
  }
  return true;
}

// Splits "host:port" / "[v6]:port"; returns why it is not one, "" when it is.
std::string split_host_port(const std::string& text, HostPort& out) {
  std::string host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos) return "no closing ] after the IPv6 address";
    host = text.substr(1, close - 1);
    if (host.find(':') == std::string::npos) return "brackets are only for an IPv6 address";
    if (close + 1 >= text.size() || text[close + 1] != ':') return "no :port after the ]";
    port = std::string_view(text).substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos) return "no port";
    host = text.substr(0, colon);
    if (host.find(':') != std::string::npos) {
      return "an IPv6 host must be in brackets, e.g. [::1]:2222";
    }
    port = std::string_view(text).substr(colon + 1);
  }
  if (host.empty()) return "empty host";
  int p = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || p < 1 || p > 65535) {
    return "port must be 1..65535";
  }
  if (std::string problem = host_problem(host); !problem.empty()) return problem;
  out.host = std::move(host);
  out.port = p;
  return "";
}

void fail(const std::string& source, const std::string& place, const std::string& what) {
  throw InputError(source + ": " + place + ": " + what);
}

}  // namespace

const char* to_string(TaskRole role) {
  switch (role) {
    case TaskRole::kChief:
      return "chief";
    case TaskRole::kWorker:
      return "worker";
    case TaskRole::kPs:
      return "ps";
    case TaskRole::kEvaluator:
      return "evaluator";
    default:
      return "unset";
  }
}

std::string to_string(const HostPort& hp) {
  if (hp.host.find(':') != std::string::npos) {
    return "[" + hp.host + "]:" + std::to_string(hp.port);
  }
  return hp.host + ":" + std::to_string(hp.port);
}

std::string host_problem(std::string_view host) {
  const std::string h(host);
  if (h.empty()) return "empty host";
  if (h.find(':') != std::string::npos) {
    in6_addr a6{};
    if (inet_pton(AF_INET6, h.c_str(), &a6) == 1) return "";
    return "host " + json_quoted(h) + " is not a valid IPv6 address";
  }
  if (is_ip_v4_like(h)) {
    in_addr a4{};
    if (inet_pton(AF_INET, h.c_str(), &a4) == 1) return "";
    return "host " + json_quoted(h) + " is not a valid IPv4 address";
  }
  const std::string bad = "host " + json_quoted(h) + " is not a valid host name";
  if (h.size() > 253) return bad + " (longer than 253 characters)";
  size_t start = 0;
  while (start <= h.size()) {
    size_t dot = h.find('.', start);
    if (dot == std::string::npos) dot = h.size();
    const std::string_view label = std::string_view(h).substr(start, dot - start);
    if (label.empty()) return bad + " (empty label)";
    if (label.size() > 63) return bad + " (a label is longer than 63 characters)";
    if (label.front() == '-' || label.back() == '-') {
      return bad + " (a label starts or ends with '-')";
    }
    for (char c : label) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_';
      if (!ok) return bad + " (only letters, digits, '-', '_' and '.')";
    }
    start = dot + 1;
  }
  return "";
}

std::string canonical_host(std::string_view host) {
  const std::string h(host);
  if (h.find(':') != std::string::npos) {
    in6_addr a6{};
    char buf[INET6_ADDRSTRLEN] = {};
    if (inet_pton(AF_INET6, h.c_str(), &a6) == 1 &&
        inet_ntop(AF_INET6, &a6, buf, sizeof buf) != nullptr) {
      return buf;
    }
  }
  std::string out = h;
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// ------------------------------------------------------------------ ClusterSpec

const std::vector<HostPort>& ClusterSpec::tasks(TaskRole role) const {
  static const std::vector<HostPort> kNone;
  switch (role) {
    case TaskRole::kChief:
      return chief;
    case TaskRole::kWorker:
      return worker;
    case TaskRole::kPs:
      return ps;
    case TaskRole::kEvaluator:
      return evaluator;
    default:
      return kNone;
  }
}

int ClusterSpec::num_tasks() const {
  return static_cast<int>(chief.size() + worker.size() + ps.size());
}

int ClusterSpec::rank_of(TaskRole role, int index) const {
  if (role != TaskRole::kChief && role != TaskRole::kWorker && role != TaskRole::kPs) {
    throw InputError(std::string("cluster: ") + to_string(role) +
                     " tasks have no rank (ranks cover chief, worker and ps)");
  }
  const auto& list = tasks(role);
  if (index < 0 || static_cast<size_t>(index) >= list.size()) {
    throw InputError(std::string("cluster: ") + to_string(role) + " index " +
                     std::to_string(index) + " is out of range (cluster." + to_string(role) +
                     " has " + std::to_string(list.size()) + " entries)");
  }
  int rank = index;
  if (role != TaskRole::kChief) rank += static_cast<int>(chief.size());
  if (role == TaskRole::kPs) rank += static_cast<int>(worker.size());
  return rank;
}

TaskId ClusterSpec::task_of(int rank) const {
  if (rank < 0 || rank >= num_tasks()) {
    throw InputError("cluster: rank " + std::to_string(rank) + " is out of range (" +
                     std::to_string(num_tasks()) + " ranked tasks, so 0.." +
                     std::to_string(num_tasks() - 1) + ")");
  }
  int r = rank;
  for (TaskRole role : {TaskRole::kChief, TaskRole::kWorker, TaskRole::kPs}) {
    const int n = static_cast<int>(tasks(role).size());
    if (r < n) return TaskId{role, r};
    r -= n;
  }
  return TaskId{};  // unreachable: rank < num_tasks()
}

// ------------------------------------------------------------------- TF_CONFIG

ClusterSpec parse_tf_config(const std::string& json_text, const std::string& source) {
  if (json_text.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw InputError(source + ": is empty (expected a JSON object with \"cluster\")");
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& e) {
    const std::string what = e.what();
    const auto pos = what.find("parse error");
    throw InputError(source +
                     ": invalid JSON: " + (pos == std::string::npos ? what : what.substr(pos)));
  } catch (const nlohmann::json::exception& e) {
    // A number past a double's range (1e999) is out_of_range, not a
    // parse_error (found by fuzzing).
    throw InputError(source + ": invalid JSON: " + e.what());
  }
  return parse_tf_config(doc, source);
}

ClusterSpec parse_tf_config(const nlohmann::json& doc, const std::string& source) {
  const ConfigNode root(doc, source);
  for (const char* key : {"cluster", "task", "environment", "rpc_layer"}) root.accept(key);
  root.finish();
  (void)root.string_or("environment", "");
  (void)root.string_or("rpc_layer", "");

  ClusterSpec spec;
  const ConfigNode cluster = root.child("cluster");
  for (TaskRole role : kRoles) cluster.accept(to_string(role));
  cluster.finish();
  for (TaskRole role : kRoles) {
    const std::string name = to_string(role);
    const auto it = cluster.json().find(name);
    if (it == cluster.json().end() || it->is_null()) continue;
    if (!it->is_array()) {
      cluster.fail(name, "expected an array of \"host:port\" strings, got " + json_type_name(*it) +
                             " " + show(*it));
    }
    auto& list = list_of(spec, role);
    for (size_t i = 0; i < it->size(); ++i) {
      const auto& e = (*it)[i];
      const std::string place = entry_path(role, i);
      if (!e.is_string()) {
        fail(source, place,
             "expected a \"host:port\" string, got " + json_type_name(e) + " " + show(e));
      }
      HostPort hp;
      const std::string problem = split_host_port(e.get<std::string>(), hp);
      if (!problem.empty()) fail(source, place, show(e) + " is not host:port (" + problem + ")");
      list.push_back(std::move(hp));
    }
  }

  if (root.has("task")) {
    const ConfigNode task = root.child("task");
    const std::string type = task.choice("type", {"chief", "worker", "ps", "evaluator"});
    for (TaskRole role : kRoles) {
      if (type == to_string(role)) spec.task_type = role;
    }
    spec.task_index = static_cast<int>(task.integer_or("index", 0, 0, INT_MAX));
    task.finish();
  }

  validate_cluster(spec, source);
  return spec;
}

void validate_cluster(const ClusterSpec& spec, const std::string& source) {
  // Each entry on its own.
  for (TaskRole role : kRoles) {
    const auto& list = spec.tasks(role);
    for (size_t i = 0; i < list.size(); ++i) {
      const HostPort& hp = list[i];
      if (std::string problem = host_problem(hp.host); !problem.empty()) {
        fail(source, entry_path(role, i),
             json_quoted(to_string(hp)) + " is not host:port (" + problem + ")");
      }
      if (hp.port < 1 || hp.port > 65535) {
        fail(source, entry_path(role, i),
             json_quoted(to_string(hp)) + " is not host:port (port must be 1..65535)");
      }
    }
  }
  if (spec.num_tasks() == 0) {
    fail(source, "cluster",
         spec.evaluator.empty()
             ? "is empty (expected at least one of chief, worker, ps with \"host:port\" entries)"
             : "has only an evaluator (expected at least one chief, worker or ps task)");
  }
  if (spec.chief.size() > 1) {
    fail(source, "cluster.chief",
         "has " + std::to_string(spec.chief.size()) + " entries (at most one chief is allowed)");
  }
  if (spec.evaluator.size() > 1) {
    fail(source, "cluster.evaluator",
         "has " + std::to_string(spec.evaluator.size()) +
             " entries (at most one evaluator is allowed)");
  }
  // The same address twice, across all lists.
  std::map<std::pair<std::string, int>, std::string> seen;
  for (TaskRole role : kRoles) {
    const auto& list = spec.tasks(role);
    for (size_t i = 0; i < list.size(); ++i) {
      const auto key = std::make_pair(canonical_host(list[i].host), list[i].port);
      const std::string place = entry_path(role, i);
      const auto [it, fresh] = seen.emplace(key, place);
      if (!fresh) {
        fail(source, place, json_quoted(to_string(list[i])) + " is already used by " + it->second);
      }
    }
  }
  // The task.
  if (spec.task_type != TaskRole::kUnset) {
    const std::string name = to_string(spec.task_type);
    const size_t n = spec.tasks(spec.task_type).size();
    if (n == 0) {
      fail(source, "task.type",
           json_quoted(name) + " but cluster." + name + " is missing or empty");
    }
    if (spec.task_index < 0 || static_cast<size_t>(spec.task_index) >= n) {
      fail(source, "task.index",
           std::to_string(spec.task_index) + " is out of range (cluster." + name + " has " +
               std::to_string(n) +
               (n == 1 ? " entry, so 0)" : " entries, so 0.." + std::to_string(n - 1) + ")"));
    }
  }
}

void validate_for_strategy(const ClusterSpec& spec, const std::string& strategy,
                           const std::string& source) {
  const std::string s = json_quoted(strategy);
  if (strategy == "parameter_server") {
    if (spec.ps.empty()) {
      fail(source, "cluster.ps", "parameter_server needs at least one ps task, got none");
    }
    if (spec.worker.empty()) {
      fail(source, "cluster.worker", "parameter_server needs at least one worker task, got none");
    }
  } else if (strategy == "multi_worker_mirrored") {
    if (!spec.ps.empty()) {
      fail(source, "cluster.ps",
           "multi_worker_mirrored has no parameter servers, got " + std::to_string(spec.ps.size()) +
               " ps task(s) (remove cluster.ps or use parameter_server)");
    }
    if (spec.chief.empty() && spec.worker.empty()) {
      fail(source, "cluster",
           "multi_worker_mirrored needs at least one chief or worker task, got none");
    }
  } else if (strategy == "one_device" || strategy == "mirrored" || strategy == "central_storage") {
    if (spec.num_tasks() > 1) {
      fail(source, "cluster",
           strategy + " runs on one machine, but the cluster has " +
               std::to_string(spec.num_tasks()) +
               " tasks (use multi_worker_mirrored or parameter_server)");
    }
  } else if (strategy == "tpu") {
    throw InputError(source + ": strategy \"tpu\" is not available: Baton has no TPU backend");
  } else {
    throw InputError(source + ": strategy " + s +
                     " is not one of one_device, mirrored, central_storage, "
                     "multi_worker_mirrored, parameter_server");
  }
}

std::string to_tf_config(const ClusterSpec& spec, TaskRole role, int index) {
  ClusterSpec task_spec = spec;
  task_spec.task_type = role;
  task_spec.task_index = role == TaskRole::kUnset ? 0 : index;
  validate_cluster(task_spec, "cluster spec");

  nlohmann::json cluster = nlohmann::json::object();
  for (TaskRole r : kRoles) {
    const auto& list = spec.tasks(r);
    if (list.empty()) continue;
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& hp : list) arr.push_back(to_string(hp));
    cluster[to_string(r)] = std::move(arr);
  }
  nlohmann::json doc = {{"cluster", std::move(cluster)}};
  if (role != TaskRole::kUnset) doc["task"] = {{"type", to_string(role)}, {"index", index}};
  return doc.dump();
}

}  // namespace baton
