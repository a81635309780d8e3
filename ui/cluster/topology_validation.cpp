// TopologyModel's validation: messages attached to the host they are about
// where there is one, then the engine's own cluster rules
// (validate_cluster, validate_for_strategy) for the rest.
#include <baton/core/error.h>

#include <algorithm>

#include "cluster/topology_model.h"

namespace baton::ui {
namespace {

const QString kMultiWorker = QStringLiteral("multi_worker_mirrored");
const QString kParameterServer = QStringLiteral("parameter_server");
const QString kTpu = QStringLiteral("tpu");

}  // namespace

std::vector<TopologyProblem> TopologyModel::problem_list() const {
  std::vector<TopologyProblem> out;
  const auto& hs = state_.hosts;
  const QString& s = state_.strategy;
  if (s == kTpu) out.push_back({-1, tpu_unavailable_reason()});
  if (!strategies().contains(s)) out.push_back({-1, tr("unknown strategy \"%1\"").arg(s)});
  if (hs.empty()) {
    out.push_back({-1, tr("No hosts: add this host or another one")});
    return out;
  }
  // Per host: its name, its port, its devices, its role.
  std::vector<std::pair<std::string, int>> seen;  // canonical host, port
  int chiefs = 0;
  const auto tasks = task_hosts();
  for (size_t i = 0; i < hs.size(); ++i) {
    const TopologyHost& h = hs[i];
    const std::string name = h.name.toStdString();
    if (const std::string why = host_problem(name); !why.empty()) {
      out.push_back({h.id, tr("host name: %1").arg(QString::fromStdString(why))});
    } else {
      const std::pair<std::string, int> key{canonical_host(name), h.port};
      const auto it = std::find(seen.begin(), seen.end(), key);
      if (it != seen.end()) {
        const QString other = hs[static_cast<size_t>(it - seen.begin())].name;
        out.push_back({h.id, tr("%1:%2 is listed twice (also \"%3\"): give it another port")
                                 .arg(h.name)
                                 .arg(h.port)
                                 .arg(other)});
      }
      seen.push_back(key);
    }
    if (h.port < 1 || h.port > 65535) out.push_back({h.id, tr("port must be 1..65535")});
    const bool used = std::find(tasks.begin(), tasks.end(), static_cast<int>(i)) != tasks.end();
    const bool needs_devices = !(s == kParameterServer && h.role == TaskRole::kPs);
    if (used && needs_devices && replica_devices(h).empty()) {
      out.push_back({h.id, tr("no devices: add a CPU or GPU device")});
    }
    if (h.role == TaskRole::kChief && ++chiefs > 1) {
      out.push_back({h.id, tr("a second chief: a cluster has at most one")});
    }
    if (h.role == TaskRole::kPs && s == kMultiWorker) {
      out.push_back({h.id, tr("ps role: only parameter_server uses ps tasks")});
    }
  }
  if (!multi_process() && hs.size() > 1 && s != kTpu) {
    out.push_back({-1, tr("%1 runs on one machine: remove the other hosts, or choose "
                          "multi_worker_mirrored or parameter_server")
                           .arg(s)});
  }
  if (s == kMultiWorker && tasks.size() > 1 && chiefs == 0) {
    out.push_back(
        {-1, tr("no chief: mark one host chief (rank 0, it writes checkpoints and logs)")});
  }
  if (!out.empty() || s == kTpu) return out;
  // The engine's cluster rules (ps and worker counts per strategy, ...).
  try {
    const ClusterSpec spec = cluster_spec();
    validate_cluster(spec, "topology");
    validate_for_strategy(spec, s.toStdString(), "topology");
  } catch (const InputError& e) {
    out.push_back({-1, QString::fromUtf8(e.what())});
  }
  return out;
}

QStringList TopologyModel::problems() const {
  QStringList out;
  for (const auto& p : problem_list()) {
    const TopologyHost* h = host(p.host_id);
    out << (h != nullptr ? QStringLiteral("%1:%2: %3").arg(h->name).arg(h->port).arg(p.text)
                         : p.text);
  }
  return out;
}

QStringList TopologyModel::problems_of(int host_id) const {
  QStringList out;
  for (const auto& p : problem_list()) {
    if (p.host_id == host_id) out << p.text;
  }
  return out;
}

}  // namespace baton::ui
