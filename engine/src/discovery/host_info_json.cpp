// The probe document: HostInfo as JSON and back. Other machines' baton
// processes send it (baton probe --hosts), so reading checks every field.
#include <baton/core/error.h>
#include <baton/discovery/discovery.h>

#include <string>

namespace baton {
namespace {

using nlohmann::json;

constexpr int kProbeVersion = 1;

json device_json(const DeviceInfo& d) {
  json j = {{"name", d.name}, {"kind", d.kind}, {"index", d.index}};
  if (d.numa_node >= 0) j["numa_node"] = d.numa_node;
  if (d.kind == "cpu") {
    j["pus"] = d.pus;
    return j;
  }
  j["model"] = d.model;
  j["memory_bytes"] = d.memory_bytes;
  j["sm_count"] = d.sm_count;
  j["compute_capability"] = {d.compute_major, d.compute_minor};
  j["pci_bus_id"] = d.pci_bus_id;
  if (d.utilization_pct) j["utilization_pct"] = *d.utilization_pct;
  if (d.memory_used_bytes) j["memory_used_bytes"] = *d.memory_used_bytes;
  if (d.power_w) j["power_w"] = *d.power_w;
  return j;
}

template <class T>
T field(const json& j, const char* key) {
  return j.at(key).get<T>();
}

template <class T>
void optional_field(const json& j, const char* key, T& out) {
  if (auto it = j.find(key); it != j.end()) out = it->get<T>();
}

DeviceInfo device_from_json(const json& j) {
  DeviceInfo d;
  d.name = field<std::string>(j, "name");
  d.kind = field<std::string>(j, "kind");
  d.index = field<int>(j, "index");
  if (d.kind != "cpu" && d.kind != "cuda") {
    throw RuntimeError("device " + d.name + ": kind \"" + d.kind + "\" is not cpu or cuda");
  }
  if (d.name != d.kind + ":" + std::to_string(d.index)) {
    throw RuntimeError("device " + d.name + ": name does not match kind and index");
  }
  optional_field(j, "numa_node", d.numa_node);
  if (d.kind == "cpu") {
    optional_field(j, "pus", d.pus);
    return d;
  }
  d.model = field<std::string>(j, "model");
  d.memory_bytes = field<uint64_t>(j, "memory_bytes");
  d.sm_count = field<int>(j, "sm_count");
  const json& cc = j.at("compute_capability");
  d.compute_major = cc.at(0).get<int>();
  d.compute_minor = cc.at(1).get<int>();
  optional_field(j, "pci_bus_id", d.pci_bus_id);
  if (j.contains("utilization_pct")) d.utilization_pct = field<unsigned>(j, "utilization_pct");
  if (j.contains("memory_used_bytes"))
    d.memory_used_bytes = field<uint64_t>(j, "memory_used_bytes");
  if (j.contains("power_w")) d.power_w = field<double>(j, "power_w");
  return d;
}

}  // namespace

nlohmann::json to_json(const HostInfo& h) {
  json j = {{"v", kProbeVersion},         {"hostname", h.hostname},
            {"cpu_model", h.cpu_model},   {"packages", h.packages},
            {"cores", h.cores},           {"threads", h.threads},
            {"numa_nodes", h.numa_nodes}, {"memory_bytes", h.memory_bytes}};
  json devices = json::array();
  for (const auto& d : h.devices) devices.push_back(device_json(d));
  j["devices"] = std::move(devices);
  if (!h.gpu_note.empty()) j["gpu_note"] = h.gpu_note;
  if (!h.nvml_note.empty()) j["nvml_note"] = h.nvml_note;
  if (!h.gpu_links.empty()) {
    json rows = json::array();
    for (const auto& row : h.gpu_links) {
      json r = json::array();
      for (const auto& l : row) {
        json cell = {{"p2p", l.p2p}};
        if (!l.type.empty()) cell["type"] = l.type;
        if (l.nvlinks > 0) cell["nvlinks"] = l.nvlinks;
        r.push_back(std::move(cell));
      }
      rows.push_back(std::move(r));
    }
    j["gpu_links"] = std::move(rows);
  }
  return j;
}

HostInfo host_info_from_json(const nlohmann::json& j) {
  try {
    if (!j.is_object()) throw RuntimeError("expected a JSON object");
    const int v = field<int>(j, "v");
    if (v != kProbeVersion) {
      throw RuntimeError("version " + std::to_string(v) + " (this baton reads version " +
                         std::to_string(kProbeVersion) + ")");
    }
    HostInfo h;
    h.hostname = field<std::string>(j, "hostname");
    h.cpu_model = field<std::string>(j, "cpu_model");
    h.packages = field<int>(j, "packages");
    h.cores = field<int>(j, "cores");
    h.threads = field<int>(j, "threads");
    h.numa_nodes = field<int>(j, "numa_nodes");
    h.memory_bytes = field<uint64_t>(j, "memory_bytes");
    for (const auto& d : j.at("devices")) h.devices.push_back(device_from_json(d));
    optional_field(j, "gpu_note", h.gpu_note);
    optional_field(j, "nvml_note", h.nvml_note);
    const auto gpus = static_cast<size_t>(h.gpu_count());
    if (auto it = j.find("gpu_links"); it != j.end()) {
      for (const auto& row : *it) {
        std::vector<GpuLink> r;
        for (const auto& cell : row) {
          GpuLink l;
          l.p2p = field<bool>(cell, "p2p");
          optional_field(cell, "type", l.type);
          optional_field(cell, "nvlinks", l.nvlinks);
          r.push_back(std::move(l));
        }
        if (r.size() != gpus) throw RuntimeError("gpu_links: a row's length is not the GPU count");
        h.gpu_links.push_back(std::move(r));
      }
    }
    if (h.gpu_links.size() != gpus) throw RuntimeError("gpu_links: not one row per GPU");
    return h;
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeError(std::string("invalid probe document: ") + e.what());
  } catch (const RuntimeError& e) {
    throw RuntimeError(std::string("invalid probe document: ") + e.what());
  }
}

}  // namespace baton
