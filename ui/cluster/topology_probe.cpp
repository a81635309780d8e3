// TopologyHostInfo <-> baton::HostInfo (kept out of topology_model.h: see
// there why).
#include <baton/discovery/discovery.h>

#include "cluster/topology_model.h"

namespace baton::ui {

TopologyHostInfo from_host_info(const HostInfo& in) {
  TopologyHostInfo out;
  out.hostname = in.hostname;
  out.cpu_model = in.cpu_model;
  out.packages = in.packages;
  out.cores = in.cores;
  out.threads = in.threads;
  out.numa_nodes = in.numa_nodes;
  out.memory_bytes = in.memory_bytes;
  out.gpu_note = in.gpu_note;
  for (const DeviceInfo& d : in.devices)
    out.devices.push_back({d.name, d.kind, d.index, d.numa_node, d.model});
  for (const auto& row : in.gpu_links) {
    std::vector<TopologyGpuLink> r;
    for (const GpuLink& l : row) r.push_back({l.type, l.nvlinks, l.p2p});
    out.gpu_links.push_back(std::move(r));
  }
  return out;
}

HostInfo to_host_info(const TopologyHostInfo& in) {
  HostInfo out;
  out.hostname = in.hostname;
  out.cpu_model = in.cpu_model;
  out.packages = in.packages;
  out.cores = in.cores;
  out.threads = in.threads;
  out.numa_nodes = in.numa_nodes;
  out.memory_bytes = in.memory_bytes;
  out.gpu_note = in.gpu_note;
  for (const TopologyDevice& d : in.devices) {
    DeviceInfo x;
    x.name = d.name;
    x.kind = d.kind;
    x.index = d.index;
    x.numa_node = d.numa_node;
    x.model = d.model;
    out.devices.push_back(std::move(x));
  }
  for (const auto& row : in.gpu_links) {
    std::vector<GpuLink> r;
    for (const TopologyGpuLink& l : row) r.push_back({l.type, l.nvlinks, l.p2p});
    out.gpu_links.push_back(std::move(r));
  }
  return out;
}

}  // namespace baton::ui
