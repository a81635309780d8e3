#include "cluster/topology_model.h"

#include <baton/cluster/cluster_spec.h>
#include <baton/core/error.h>

#include <QThread>
#include <algorithm>
#include <set>
#include <stdexcept>

namespace baton::ui {
namespace {

constexpr double kHostPitch = 440.0;  // canvas x distance between new hosts

const QString kOneDevice = QStringLiteral("one_device");
const QString kMirrored = QStringLiteral("mirrored");
const QString kCentralStorage = QStringLiteral("central_storage");
const QString kMultiWorker = QStringLiteral("multi_worker_mirrored");
const QString kParameterServer = QStringLiteral("parameter_server");
const QString kTpu = QStringLiteral("tpu");

TopologyDevice cpu_device(int index, int numa_node = -1) {
  TopologyDevice d;
  d.name = "cpu:" + std::to_string(index);
  d.kind = "cpu";
  d.index = index;
  d.numa_node = numa_node;
  return d;
}

TopologyDevice cuda_device(int index) {
  TopologyDevice d;
  d.name = "cuda:" + std::to_string(index);
  d.kind = "cuda";
  d.index = index;
  return d;
}

// Position of `name` among the host's cuda devices (the gpu_links index).
int cuda_position(const TopologyHostInfo& info, const std::string& name) {
  int k = 0;
  for (const auto& d : info.devices) {
    if (d.kind != "cuda") continue;
    if (d.name == name) return k;
    ++k;
  }
  return -1;
}

LinkClass class_of_gpu_link(const std::string& type) {
  if (type.rfind("NV", 0) == 0) return LinkClass::kNvLink;
  if (type == "PIX" || type == "PXB" || type == "PHB" || type == "NODE") return LinkClass::kPcie;
  if (type == "SYS") return LinkClass::kCrossNuma;
  return LinkClass::kUnknown;
}

}  // namespace

int TopologyHostInfo::cpu_count() const {
  return static_cast<int>(
      std::count_if(devices.begin(), devices.end(), [](const auto& d) { return d.kind == "cpu"; }));
}

int TopologyHostInfo::gpu_count() const {
  return static_cast<int>(std::count_if(devices.begin(), devices.end(),
                                        [](const auto& d) { return d.kind == "cuda"; }));
}

QString to_string(LinkClass c) {
  switch (c) {
    case LinkClass::kSharedMemory:
      return QObject::tr("shared memory");
    case LinkClass::kNvLink:
      return QObject::tr("NVLink");
    case LinkClass::kPcie:
      return QObject::tr("PCIe");
    case LinkClass::kCrossNuma:
      return QObject::tr("cross-NUMA");
    case LinkClass::kNetwork:
      return QObject::tr("network");
    case LinkClass::kUnknown:
      break;
  }
  return QObject::tr("unknown");
}

TopologyModel::TopologyModel(QObject* parent) : QObject(parent) {
  // No probe yet: this machine as Qt counts its threads. The probe's
  // physical cores replace it (set_local_host) as soon as it is back.
  TopologyHostInfo info;
  info.hostname = "localhost";
  info.cpu_model = "unknown";
  info.cores = info.threads = std::max(1, QThread::idealThreadCount());
  info.packages = info.numa_nodes = 1;
  for (int i = 0; i < info.cores; ++i) info.devices.push_back(cpu_device(i));
  info.gpu_note = "not probed yet";
  TopologyHost h;
  h.id = next_id_++;
  h.name = QStringLiteral("localhost");
  h.role = TaskRole::kChief;
  h.info = std::move(info);
  h.local = true;
  state_.hosts.push_back(std::move(h));
}

QStringList TopologyModel::strategies() {
  return {kOneDevice, kMirrored, kCentralStorage, kMultiWorker, kParameterServer, kTpu};
}

QString TopologyModel::tpu_unavailable_reason() {
  return tr("TPU: Baton has no TPU backend (TPUs are reached only through Google's runtime)");
}

void TopologyModel::touch() {
  pristine_ = false;
  Q_EMIT structure_changed();
  Q_EMIT changed();
}

void TopologyModel::set_strategy(const QString& s) {
  if (s == state_.strategy) return;
  state_.strategy = s;
  touch();
}

void TopologyModel::set_ps_mode(const QString& mode) {
  if (mode == state_.ps_mode) return;
  state_.ps_mode = mode;
  touch();
}

const TopologyHost* TopologyModel::host(int id) const {
  const int i = host_index(id);
  return i < 0 ? nullptr : &state_.hosts[static_cast<size_t>(i)];
}

TopologyHost* TopologyModel::find(int id) {
  const int i = host_index(id);
  return i < 0 ? nullptr : &state_.hosts[static_cast<size_t>(i)];
}

int TopologyModel::host_index(int id) const {
  for (size_t i = 0; i < state_.hosts.size(); ++i) {
    if (state_.hosts[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

int TopologyModel::add_host(TopologyHost h, int index) {
  if (h.id == 0) {
    h.id = next_id_++;
  } else if (host_index(h.id) >= 0) {
    throw std::invalid_argument("TopologyModel::add_host: id " + std::to_string(h.id) +
                                " is in use");
  }
  next_id_ = std::max(next_id_, h.id + 1);
  const int id = h.id;
  const auto n = static_cast<int>(state_.hosts.size());
  const int at = index < 0 || index > n ? n : index;
  state_.hosts.insert(state_.hosts.begin() + at, std::move(h));
  touch();
  return id;
}

std::optional<TopologyHost> TopologyModel::remove_host(int id) {
  const int i = host_index(id);
  if (i < 0) return std::nullopt;
  TopologyHost h = std::move(state_.hosts[static_cast<size_t>(i)]);
  state_.hosts.erase(state_.hosts.begin() + i);
  touch();
  return h;
}

bool TopologyModel::replace_host(const TopologyHost& h) {
  TopologyHost* p = find(h.id);
  if (p == nullptr) return false;
  *p = h;
  touch();
  return true;
}

void TopologyModel::move_host(int id, QPointF pos) {
  TopologyHost* p = find(id);
  if (p == nullptr || p->pos == pos) return;
  p->pos = pos;
  pristine_ = false;
  Q_EMIT host_moved(id);
  Q_EMIT changed();
}

void TopologyModel::set_host_role(int id, TaskRole role) {
  TopologyHost* p = find(id);
  if (p == nullptr || p->role == role) return;
  p->role = role;
  touch();
}

QString TopologyModel::add_device(int host_id, const QString& kind) {
  TopologyHost* p = find(host_id);
  if (p == nullptr) return {};
  QString name = add_device_to(*p, kind);
  if (!name.isEmpty()) touch();
  return name;
}

bool TopologyModel::remove_device(int host_id, const QString& device) {
  TopologyHost* p = find(host_id);
  if (p == nullptr || !remove_device_from(*p, device)) return false;
  touch();
  return true;
}

QString TopologyModel::add_device_to(TopologyHost& h, const QString& kind) {
  if (kind != QLatin1String("cpu") && kind != QLatin1String("cuda")) return {};
  int next = 0;
  for (const auto& d : h.info.devices) {
    if (d.kind == kind.toStdString()) next = std::max(next, d.index + 1);
  }
  auto& devs = h.info.devices;
  if (kind == QLatin1String("cpu")) {
    // cpu devices first, cuda after, as the probe lists them.
    auto at = std::find_if(devs.begin(), devs.end(),
                           [](const TopologyDevice& d) { return d.kind != "cpu"; });
    devs.insert(at, cpu_device(next));
    h.info.cores = std::max(h.info.cores, h.info.cpu_count());
  } else {
    devs.push_back(cuda_device(next));
    // The new GPU's links are unknown: an empty type, no P2P.
    auto& links = h.info.gpu_links;
    const auto n = static_cast<size_t>(h.info.gpu_count());
    for (auto& row : links) row.resize(n);
    links.resize(n, std::vector<TopologyGpuLink>(n));
    links[n - 1][n - 1] = TopologyGpuLink{"X", 0, true};
    h.info.gpu_note.clear();
  }
  return QStringLiteral("%1:%2").arg(kind).arg(next);
}

bool TopologyModel::remove_device_from(TopologyHost& h, const QString& device) {
  const std::string name = device.toStdString();
  auto& devs = h.info.devices;
  auto it = std::find_if(devs.begin(), devs.end(),
                         [&](const TopologyDevice& d) { return d.name == name; });
  if (it == devs.end()) return false;
  const int k = cuda_position(h.info, name);
  if (k >= 0 && static_cast<size_t>(k) < h.info.gpu_links.size()) {
    auto& links = h.info.gpu_links;
    links.erase(links.begin() + k);
    for (auto& row : links) {
      if (static_cast<size_t>(k) < row.size()) row.erase(row.begin() + k);
    }
  }
  devs.erase(it);
  return true;
}

TopologyHost TopologyModel::make_host(const QString& name, int cpus, int gpus,
                                      TaskRole role) const {
  TopologyHost h;
  h.name = name;
  h.role = role;
  h.info.hostname = name.toStdString();
  h.info.cpu_model = "unknown";
  h.info.cores = h.info.threads = std::max(0, cpus);
  h.info.packages = h.info.numa_nodes = 1;
  for (int i = 0; i < cpus; ++i) h.info.devices.push_back(cpu_device(i));
  for (int i = 0; i < gpus; ++i) h.info.devices.push_back(cuda_device(i));
  if (gpus > 0) {
    h.info.gpu_links.assign(static_cast<size_t>(gpus), std::vector<TopologyGpuLink>(gpus));
    for (int i = 0; i < gpus; ++i) h.info.gpu_links[i][i] = TopologyGpuLink{"X", 0, true};
  } else {
    h.info.gpu_note = "not probed";
  }
  double x = 0;
  bool any = false;
  for (const auto& o : state_.hosts) {
    x = any ? std::max(x, o.pos.x()) : o.pos.x();
    any = true;
  }
  h.pos = QPointF(any ? x + kHostPitch : 0.0, 0.0);
  return h;
}

void TopologyModel::set_local_host(const HostInfo& info) { set_local_host(from_host_info(info)); }

void TopologyModel::set_local_host(const TopologyHostInfo& info) {
  TopologyHost h;
  h.id = next_id_++;
  const QString hostname = QString::fromStdString(info.hostname);
  // The name other hosts reach it by; "localhost" when the system's is not
  // usable as one.
  h.name = host_problem(info.hostname).empty() ? hostname : QStringLiteral("localhost");
  h.role = TaskRole::kChief;
  h.info = info;
  h.probed = true;
  h.local = true;
  state_ = State{};
  state_.strategy = kMirrored;
  state_.hosts.push_back(std::move(h));
  pristine_ = true;
  Q_EMIT reset();
  Q_EMIT structure_changed();
  Q_EMIT changed();
}

void TopologyModel::set_state(State s) {
  state_ = std::move(s);
  for (const auto& h : state_.hosts) next_id_ = std::max(next_id_, h.id + 1);
  pristine_ = false;
  Q_EMIT reset();
  Q_EMIT structure_changed();
  Q_EMIT changed();
}

// ---- what the topology makes ----

bool TopologyModel::multi_process() const {
  return state_.strategy == kMultiWorker || state_.strategy == kParameterServer;
}

std::vector<const TopologyDevice*> TopologyModel::replica_devices(const TopologyHost& h) {
  std::vector<const TopologyDevice*> cuda, cpu;
  for (const auto& d : h.info.devices) (d.kind == "cuda" ? cuda : cpu).push_back(&d);
  return cuda.empty() ? cpu : cuda;
}

std::vector<int> TopologyModel::task_hosts() const {
  std::vector<int> out;
  const auto& hs = state_.hosts;
  if (hs.empty() || state_.strategy == kTpu) return out;
  if (!multi_process()) {
    // One machine: the local one when it is there, else the first.
    int pick = 0;
    for (size_t i = 0; i < hs.size(); ++i) {
      if (hs[i].local) {
        pick = static_cast<int>(i);
        break;
      }
    }
    return {pick};
  }
  std::vector<TaskRole> order = {TaskRole::kChief, TaskRole::kWorker};
  if (state_.strategy == kParameterServer) order.push_back(TaskRole::kPs);
  for (TaskRole r : order) {
    for (size_t i = 0; i < hs.size(); ++i) {
      if (hs[i].role == r) out.push_back(static_cast<int>(i));
    }
  }
  return out;
}

int TopologyModel::replicas_per_worker() const {
  if (state_.strategy != kMultiWorker) return 1;
  int k = 0;
  bool first = true;
  for (int i : task_hosts()) {
    const int n = static_cast<int>(replica_devices(state_.hosts[static_cast<size_t>(i)]).size());
    k = first ? n : std::min(k, n);
    first = false;
  }
  return std::max(1, k);
}

std::vector<Replica> TopologyModel::replicas() const {
  std::vector<Replica> out;
  const auto tasks = task_hosts();
  const int k = replicas_per_worker();
  for (size_t rank = 0; rank < tasks.size(); ++rank) {
    const TopologyHost& h = state_.hosts[static_cast<size_t>(tasks[rank])];
    if (h.role == TaskRole::kPs && state_.strategy == kParameterServer) continue;
    const auto devs = replica_devices(h);
    if (devs.empty()) continue;
    size_t take = devs.size();
    if (state_.strategy == kOneDevice || state_.strategy == kParameterServer) take = 1;
    if (state_.strategy == kMultiWorker) take = std::min(devs.size(), static_cast<size_t>(k));
    std::vector<const TopologyDevice*> chosen(devs.begin(), devs.begin() + static_cast<long>(take));
    if (state_.strategy == kOneDevice) {
      // The engine's one_device runs on cpu:0.
      for (const TopologyDevice* d : devs) {
        if (d->name == "cpu:0") chosen = {d};
      }
    }
    for (const TopologyDevice* d : chosen) {
      out.push_back({h.id, QString::fromStdString(d->name), static_cast<int>(rank)});
    }
  }
  return out;
}

int TopologyModel::replica_count() const { return static_cast<int>(replicas().size()); }

int TopologyModel::process_count() const {
  if (!multi_process()) return 1;
  return static_cast<int>(task_hosts().size());
}

std::vector<int64_t> TopologyModel::per_replica_batch(int64_t global_batch) const {
  const int64_t n = replica_count();
  if (n <= 0 || global_batch < 0) return {};
  std::vector<int64_t> shares(static_cast<size_t>(n), global_batch / n);
  for (int64_t r = 0; r < global_batch % n; ++r) ++shares[static_cast<size_t>(r)];
  return shares;
}

QStringList TopologyModel::ring_order() const {
  QStringList out;
  for (const Replica& r : replicas()) {
    const TopologyHost* h = host(r.host_id);
    out << (h != nullptr ? h->name : QString()) + QLatin1Char('/') + r.device;
  }
  return out;
}

TopologyLink TopologyModel::link_between(int src, int dst) const {
  TopologyLink link{src, dst, LinkClass::kUnknown, {}};
  const auto reps = replicas();
  const auto n = static_cast<int>(reps.size());
  if (src < 0 || dst < 0 || src >= n || dst >= n) return link;
  const Replica& a = reps[static_cast<size_t>(src)];
  const Replica& b = reps[static_cast<size_t>(dst)];
  const TopologyHost* h = host(a.host_id);
  const TopologyHost* hb = host(b.host_id);
  if (h == nullptr || hb == nullptr) return link;
  // Two task boxes of one machine (a hostfile's slots, TF_CONFIG tasks on
  // one host) talk through its memory or its GPUs' links, not the network.
  if (a.host_id != b.host_id &&
      canonical_host(h->name.toStdString()) != canonical_host(hb->name.toStdString())) {
    link.cls = LinkClass::kNetwork;
    return link;
  }
  const TopologyDevice* da = nullptr;
  const TopologyDevice* db = nullptr;
  for (const auto& d : h->info.devices) {
    if (QString::fromStdString(d.name) == a.device) da = &d;
  }
  for (const auto& d : hb->info.devices) {
    if (QString::fromStdString(d.name) == b.device) db = &d;
  }
  if (da == nullptr || db == nullptr) return link;
  if (da->kind == "cuda" && db->kind == "cuda") {
    const int i = cuda_position(h->info, da->name);
    const int j = cuda_position(h->info, db->name);
    const auto& links = h->info.gpu_links;
    if (i >= 0 && j >= 0 && static_cast<size_t>(i) < links.size() &&
        static_cast<size_t>(j) < links[static_cast<size_t>(i)].size()) {
      const std::string& type = links[static_cast<size_t>(i)][static_cast<size_t>(j)].type;
      link.cls = class_of_gpu_link(type);
      link.detail = QString::fromStdString(type);
    }
    return link;
  }
  if (da->kind == "cpu" && db->kind == "cpu") {
    const bool apart = da->numa_node >= 0 && db->numa_node >= 0 && da->numa_node != db->numa_node;
    link.cls = apart ? LinkClass::kCrossNuma : LinkClass::kSharedMemory;
    if (apart) link.detail = QStringLiteral("NUMA %1-%2").arg(da->numa_node).arg(db->numa_node);
    return link;
  }
  link.cls = LinkClass::kPcie;
  return link;
}

std::vector<TopologyLink> TopologyModel::ring_links() const {
  std::vector<TopologyLink> out;
  if (state_.strategy == kParameterServer) return out;
  const int n = replica_count();
  if (n < 2) return out;
  for (int i = 0; i < (n == 2 ? 1 : n); ++i) out.push_back(link_between(i, (i + 1) % n));
  return out;
}

nlohmann::json TopologyModel::strategy_json() const {
  const std::string type = state_.strategy.toStdString();
  nlohmann::json s = {{"type", type}};
  if (state_.strategy == kMirrored || state_.strategy == kCentralStorage) {
    s["replicas"] = std::clamp(replica_count(), 1, 1024);
  } else if (state_.strategy == kMultiWorker) {
    s["replicas_per_worker"] = std::clamp(replicas_per_worker(), 1, 1024);
  } else if (state_.strategy == kParameterServer) {
    int ps = 0;
    for (const auto& h : state_.hosts) ps += h.role == TaskRole::kPs ? 1 : 0;
    if (ps > 0) s["num_ps"] = ps;  // absent: the trainer's default
    s["mode"] = state_.ps_mode.toStdString();
  }
  return s;
}

ClusterSpec TopologyModel::cluster_spec() const {
  ClusterSpec spec;
  for (const auto& h : state_.hosts) {
    HostPort hp{h.name.toStdString(), h.port};
    switch (h.role) {
      case TaskRole::kChief:
        spec.chief.push_back(hp);
        break;
      case TaskRole::kPs:
        spec.ps.push_back(hp);
        break;
      case TaskRole::kEvaluator:
        spec.evaluator.push_back(hp);
        break;
      default:
        spec.worker.push_back(hp);
        break;
    }
  }
  return spec;
}

std::string TopologyModel::tf_config(TaskRole role, int index) const {
  return to_tf_config(cluster_spec(), role, index);
}

std::string TopologyModel::hostfile() const {
  if (!problem_list().empty()) return {};
  try {
    if (!multi_process()) {
      const auto tasks = task_hosts();
      return to_hostfile(
          {{state_.hosts[static_cast<size_t>(tasks.front())].name.toStdString(), 1}});
    }
    return to_hostfile(hostfile_from_spec(cluster_spec()));
  } catch (const InputError&) {
    return {};
  }
}

}  // namespace baton::ui
