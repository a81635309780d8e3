// The topology's files: its own JSON document, and hosts read from an MPI
// hostfile or a TF_CONFIG (through the engine's readers, baton/cluster.h).
//
// The document, version 1:
//   {"format": "baton-topology", "version": 1, "strategy": "mirrored",
//    "ps_mode": "async",
//    "hosts": [{"name": "a", "port": 2222, "role": "chief", "local": true,
//               "probed": true, "x": 0, "y": 0, "probe": {<baton probe --json>}}]}
// Read strictly: an unknown key or a wrong value is an InputError naming the
// file and the key path.
#include <baton/core/config.h>
#include <baton/core/error.h>
#include <baton/discovery/discovery.h>

#include <QFile>
#include <QSaveFile>
#include <algorithm>
#include <string>

#include "cluster/topology_model.h"

// HostfileEntry::slots is read below; this file declares no Qt slots.
#undef slots

namespace baton::ui {
namespace {

constexpr int kFormatVersion = 1;

TaskRole role_from(const std::string& s) {
  if (s == "chief") return TaskRole::kChief;
  if (s == "ps") return TaskRole::kPs;
  return TaskRole::kWorker;
}

}  // namespace

nlohmann::json TopologyModel::to_json() const {
  nlohmann::json hosts = nlohmann::json::array();
  for (const auto& h : state_.hosts) {
    hosts.push_back({{"name", h.name.toStdString()},
                     {"port", h.port},
                     {"role", baton::to_string(h.role)},
                     {"local", h.local},
                     {"probed", h.probed},
                     {"x", h.pos.x()},
                     {"y", h.pos.y()},
                     {"probe", baton::to_json(to_host_info(h.info))}});
  }
  return {{"format", "baton-topology"},
          {"version", kFormatVersion},
          {"strategy", state_.strategy.toStdString()},
          {"ps_mode", state_.ps_mode.toStdString()},
          {"hosts", std::move(hosts)}};
}

void TopologyModel::load_json(const nlohmann::json& doc, const std::string& source) {
  if (!doc.is_object()) {
    throw InputError(source + ": expected a JSON object, got " + json_type_name(doc));
  }
  const ConfigNode root(doc, source);
  (void)root.choice("format", {"baton-topology"});
  const int64_t version = root.integer("version", 1);
  if (version != kFormatVersion) {
    root.fail("version", "1 (this studio reads version 1), got " + std::to_string(version));
  }
  State s;
  s.strategy = QString::fromStdString(
      root.choice("strategy", {"one_device", "mirrored", "central_storage", "multi_worker_mirrored",
                               "parameter_server", "tpu"}));
  s.ps_mode = QString::fromStdString(root.choice_or("ps_mode", "async", {"async", "sync"}));
  const nlohmann::json& list = root.json().contains("hosts") ? root.json()["hosts"] : nullptr;
  if (!list.is_array()) root.fail("hosts", "an array of hosts");
  root.accept("hosts");
  root.finish();
  int id = 1;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = "hosts[" + std::to_string(i) + "]";
    if (!list[i].is_object()) {
      throw InputError(source + ": " + where + ": expected an object, got " +
                       json_type_name(list[i]));
    }
    const ConfigNode node(list[i], source, where);
    TopologyHost h;
    h.id = id++;
    const std::string name = node.string("name");
    if (const std::string why = host_problem(name); !why.empty()) node.fail("name", why);
    h.name = QString::fromStdString(name);
    h.port = static_cast<int>(node.integer_or("port", 2222, 1, 65535));
    h.role = role_from(node.choice_or("role", "worker", {"chief", "worker", "ps"}));
    h.local = node.boolean_or("local", false);
    h.probed = node.boolean_or("probed", false);
    h.pos = QPointF(node.number_or("x", 0.0), node.number_or("y", 0.0));
    if (!node.has("probe")) node.fail("probe", "the host's probe document (baton probe --json)");
    node.accept("probe");
    try {
      h.info = from_host_info(host_info_from_json(list[i]["probe"]));
    } catch (const RuntimeError& e) {
      throw InputError(source + ": " + where + ".probe: " + e.what());
    }
    node.finish();
    s.hosts.push_back(std::move(h));
  }
  // Everything read: only now does the model change.
  set_state(std::move(s));
}

void TopologyModel::save_file(const QString& path) const {
  QSaveFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
    throw RuntimeError(path.toStdString() + ": cannot write: " + f.errorString().toStdString());
  }
  const std::string text = to_json().dump(2) + "\n";
  f.write(text.data(), static_cast<qint64>(text.size()));
  if (!f.commit()) {
    throw RuntimeError(path.toStdString() + ": cannot write: " + f.errorString().toStdString());
  }
}

void TopologyModel::load_file(const QString& path) {
  const std::string p = path.toStdString();
  load_json(read_json_file(p), p);
}

std::vector<TopologyHost> TopologyModel::hosts_from_hostfile(const std::string& text,
                                                             const std::string& source) const {
  const std::vector<HostfileEntry> entries = parse_hostfile(text, source);
  std::vector<TopologyHost> out;
  TopologyModel layout;  // places each new box right of the last one
  layout.set_state(state_);
  for (const auto& e : entries) {
    // slots = ranks on that machine: one task box per slot, on its own port.
    for (int k = 0; k < e.slots; ++k) {
      const TaskRole role = out.empty() ? TaskRole::kChief : TaskRole::kWorker;
      TopologyHost h = layout.make_host(QString::fromStdString(e.host), 1, 0, role);
      h.port = 2222 + k;
      layout.add_host(h);
      h.id = 0;  // the model it goes into picks the id
      out.push_back(std::move(h));
    }
  }
  return out;
}

std::vector<TopologyHost> TopologyModel::hosts_from_tf_config(const std::string& text,
                                                              const std::string& source) const {
  const ClusterSpec spec = parse_tf_config(text, source);
  std::vector<TopologyHost> out;
  TopologyModel layout;
  layout.set_state(state_);
  for (TaskRole role : {TaskRole::kChief, TaskRole::kWorker, TaskRole::kPs}) {
    for (const HostPort& hp : spec.tasks(role)) {
      TopologyHost h = layout.make_host(QString::fromStdString(hp.host), 1, 0, role);
      h.port = hp.port;
      layout.add_host(h);
      h.id = 0;  // the model it goes into picks the id
      out.push_back(std::move(h));
    }
  }
  return out;
}

}  // namespace baton::ui
