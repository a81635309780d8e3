// CPU discovery through hwloc: cores, hardware threads, NUMA nodes, memory.
// hwloc 2 reports only the resources this process may use (its cgroup
// cpuset), which is what a strategy can place work on.
#include <baton/core/error.h>
#include <baton/discovery/discovery.h>
#include <hwloc.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

namespace baton {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

Topology load_topology() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    throw RuntimeError(std::string("hwloc: cannot initialise a topology: ") + std::strerror(errno));
  }
  Topology topo(raw);
  if (hwloc_topology_load(raw) != 0) {
    throw RuntimeError(std::string("hwloc: cannot load the machine topology: ") +
                       std::strerror(errno));
  }
  return topo;
}

std::string local_hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

// The first "model name" line of /proc/cpuinfo, for when hwloc has no
// CPUModel (some virtual machines, some architectures).
std::string cpuinfo_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto start = line.find_first_not_of(" \t", colon + 1);
    if (start != std::string::npos) return line.substr(start);
  }
  return {};
}

// Runs of spaces collapsed, ends trimmed: some CPUs pad their model string.
std::string tidy(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool space = c == ' ' || c == '\t';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// OS index of the first NUMA node in `obj`'s nodeset; -1 when none.
int numa_of(hwloc_obj_t obj) {
  if (obj == nullptr || obj->nodeset == nullptr) return -1;
  return hwloc_bitmap_first(obj->nodeset);
}

}  // namespace

int HostInfo::gpu_count() const {
  int n = 0;
  for (const auto& d : devices) n += d.kind == "cuda";
  return n;
}

int HostInfo::cpu_count() const {
  int n = 0;
  for (const auto& d : devices) n += d.kind == "cpu";
  return n;
}

HostInfo probe_cpus() {
  Topology topo = load_topology();
  hwloc_topology_t t = topo.get();
  HostInfo host;
  host.hostname = local_hostname();

  host.packages = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
  host.threads = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
  host.numa_nodes = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
  if (host.numa_nodes <= 0) host.numa_nodes = 1;
  const int core_objs = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);

  for (int p = 0; p < host.packages && host.cpu_model.empty(); ++p) {
    const char* model =
        hwloc_obj_get_info_by_name(hwloc_get_obj_by_type(t, HWLOC_OBJ_PACKAGE, p), "CPUModel");
    if (model != nullptr) host.cpu_model = tidy(model);
  }
  if (host.cpu_model.empty()) host.cpu_model = tidy(cpuinfo_model());
  if (host.cpu_model.empty()) host.cpu_model = "unknown";

  // The machine's memory is the kernel's MemTotal. hwloc's root total can
  // be far less (on these VMs it reports the first NUMA node's share, 5.5
  // of 23.5 GiB), so it is only the last resort.
  host.memory_bytes = meminfo_bytes("MemTotal:");
  if (host.memory_bytes == 0) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) host.memory_bytes = static_cast<uint64_t>(pages) * page;
  }
  if (host.memory_bytes == 0) host.memory_bytes = hwloc_get_root_obj(t)->total_memory;

  // One device per physical core; where hwloc sees no cores (it happens on
  // some virtual machines), one per hardware thread.
  const hwloc_obj_type_t unit = core_objs > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  const int units = core_objs > 0 ? core_objs : host.threads;
  for (int i = 0; i < units; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(t, unit, static_cast<unsigned>(i));
    if (obj == nullptr) continue;
    DeviceInfo d;
    d.kind = "cpu";
    d.index = static_cast<int>(host.devices.size());
    d.name = "cpu:" + std::to_string(d.index);
    d.numa_node = numa_of(obj);
    hwloc_obj_t pu = nullptr;
    while ((pu = hwloc_get_next_obj_inside_cpuset_by_type(t, obj->cpuset, HWLOC_OBJ_PU, pu)) !=
           nullptr) {
      d.pus.push_back(static_cast<int>(pu->os_index));
    }
    host.devices.push_back(std::move(d));
  }
  host.cores = static_cast<int>(host.devices.size());
  if (host.cores == 0) {
    throw RuntimeError("hwloc: the topology has no cores and no hardware threads");
  }
  if (host.threads < host.cores) host.threads = host.cores;
  if (host.packages <= 0) host.packages = 1;
  return host;
}

HostInfo probe_local_host(const ProbeOptions& options) {
  HostInfo host = probe_cpus();
  probe_gpus(options, host);
  return host;
}

uint64_t meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string name, unit;
  uint64_t value = 0;
  while (in >> name >> value) {
    std::getline(in, unit);
    if (name == key) return value * 1024;  // the kernel writes kB (KiB)
  }
  return 0;
}

}  // namespace baton
