// GPU discovery. The CUDA backend library (baton_cuda.so, dlopen) names the
// devices, in the CUDA runtime's order; NVML (libnvidia-ml.so.1, dlopen,
// part of the NVIDIA driver) adds their live state and how they are linked.
// Either may be missing: the host then gets no cuda:* devices, or no NVML
// fields, and a note that says why.
#include <baton/discovery/discovery.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace baton {
namespace {

// ---- the CUDA backend's C interface (engine/cuda/cuda_backend.cu) ----

struct CudaBackend {
  int (*count_status)(int*) = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*describe)(int, char*, int, unsigned long long*, int*, int*, int*, char*, int) = nullptr;
  int (*can_access_peer)(int, int, int*) = nullptr;

  std::string error(int code) const {
    const char* s = error_string != nullptr ? error_string(code) : nullptr;
    return s != nullptr ? std::string(s) : "CUDA error " + std::to_string(code);
  }
};

template <class F>
bool resolve(void* lib, const char* symbol, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, symbol));
  return fn != nullptr;
}

// ---- NVML: the few declarations used here, from NVML's public API ----

using nvmlReturn_t = int;  // enum nvmlReturn_t; NVML_SUCCESS = 0
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr unsigned kNvmlNvLinkMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS
constexpr unsigned kNvLinkRemoteGpu = 0;      // NVML_NVLINK_DEVICE_TYPE_GPU
constexpr unsigned kNvLinkRemoteSwitch = 2;   // NVML_NVLINK_DEVICE_TYPE_SWITCH

struct nvmlUtilization_t {
  unsigned int gpu;  // percent of time a kernel ran, over the last sample period
  unsigned int memory;
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};
struct nvmlPciInfo_t {  // the v2/v3 layout
  char busIdLegacy[16];
  unsigned int domain, bus, device;
  unsigned int pciDeviceId, pciSubSystemId;
  char busId[32];
};

struct Nvml {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*pci_info)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*power_mw)(nvmlDevice_t, unsigned*) = nullptr;
  nvmlReturn_t (*common_ancestor)(nvmlDevice_t, nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*nvlink_remote_pci)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;
  nvmlReturn_t (*nvlink_remote_type)(nvmlDevice_t, unsigned, unsigned*) = nullptr;  // optional
  nvmlReturn_t (*temperature)(nvmlDevice_t, unsigned, unsigned*) = nullptr;         // optional
  bool initialised = false;

  Nvml() = default;
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  ~Nvml() {
    if (initialised) shutdown();
    if (lib != nullptr) dlclose(lib);
  }

  std::string error(nvmlReturn_t code) const {
    const char* s = error_string != nullptr ? error_string(code) : nullptr;
    return s != nullptr ? std::string(s) : "NVML error " + std::to_string(code);
  }

  // Empty on success, else why NVML cannot be used.
  std::string open(const std::string& path) {
    lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      return "NVML not available (" + (e != nullptr ? std::string(e) : path) + ")";
    }
    const bool ok = resolve(lib, "nvmlInit_v2", init) && resolve(lib, "nvmlShutdown", shutdown) &&
                    resolve(lib, "nvmlDeviceGetCount_v2", count) &&
                    resolve(lib, "nvmlDeviceGetHandleByIndex_v2", handle_by_index) &&
                    resolve(lib, "nvmlDeviceGetPciInfo_v3", pci_info) &&
                    resolve(lib, "nvmlDeviceGetUtilizationRates", utilization) &&
                    resolve(lib, "nvmlDeviceGetMemoryInfo", memory) &&
                    resolve(lib, "nvmlDeviceGetPowerUsage", power_mw) &&
                    resolve(lib, "nvmlDeviceGetTopologyCommonAncestor", common_ancestor) &&
                    resolve(lib, "nvmlDeviceGetNvLinkState", nvlink_state) &&
                    resolve(lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2", nvlink_remote_pci);
    resolve(lib, "nvmlErrorString", error_string);
    resolve(lib, "nvmlDeviceGetNvLinkRemoteDeviceType", nvlink_remote_type);
    resolve(lib, "nvmlDeviceGetTemperature", temperature);
    if (!ok) return "NVML at " + path + " is too old (a function is missing)";
    const nvmlReturn_t st = init();
    if (st != kNvmlSuccess) return "NVML: cannot initialise: " + error(st);
    initialised = true;
    return {};
  }
};

// ---- PCI addresses ----

struct PciAddress {
  unsigned domain = 0, bus = 0, device = 0;
  bool valid = false;
  bool operator==(const PciAddress& o) const {
    return valid && o.valid && domain == o.domain && bus == o.bus && device == o.device;
  }
};

PciAddress parse_bus_id(const std::string& s) {  // "0000:3B:00.0" or "00000000:3B:00.0"
  PciAddress a;
  unsigned function = 0;
  a.valid = std::sscanf(s.c_str(), "%x:%x:%x.%x", &a.domain, &a.bus, &a.device, &function) == 4;
  return a;
}

// The NUMA node the kernel reports for a PCI device; -1 when unknown.
int pci_numa_node(const PciAddress& a) {
  if (!a.valid) return -1;
  char path[96];
  std::snprintf(path, sizeof(path), "/sys/bus/pci/devices/%04x:%02x:%02x.0/numa_node", a.domain,
                a.bus, a.device);
  std::ifstream in(path);
  int node = -1;
  if (!(in >> node)) return -1;
  return node;
}

// nvmlGpuTopologyLevel_t -> the `nvidia-smi topo -m` class.
std::string topology_class(int level) {
  switch (level) {
    case 0:   // NVML_TOPOLOGY_INTERNAL (two GPUs on one board)
    case 10:  // NVML_TOPOLOGY_SINGLE
      return "PIX";
    case 20:
      return "PXB";  // NVML_TOPOLOGY_MULTIPLE
    case 30:
      return "PHB";  // NVML_TOPOLOGY_HOSTBRIDGE
    case 40:
      return "NODE";  // NVML_TOPOLOGY_NODE
    case 50:
      return "SYS";  // NVML_TOPOLOGY_SYSTEM
    default:
      return {};
  }
}

// NVML's handle of each GPU at `address` (null where NVML lists none).
std::vector<nvmlDevice_t> nvml_handles(const Nvml& nvml, unsigned count,
                                       const std::vector<PciAddress>& address, int* matched) {
  std::vector<nvmlDevice_t> handle(address.size(), nullptr);
  for (unsigned k = 0; k < count; ++k) {
    nvmlDevice_t h = nullptr;
    nvmlPciInfo_t pci{};
    if (nvml.handle_by_index(k, &h) != kNvmlSuccess || nvml.pci_info(h, &pci) != kNvmlSuccess) {
      continue;
    }
    const PciAddress a{pci.domain, pci.bus, pci.device, true};
    for (size_t i = 0; i < address.size(); ++i) {
      if (handle[i] == nullptr && address[i] == a) {
        handle[i] = h;
        ++*matched;
      }
    }
  }
  return handle;
}

// Live state and link types from NVML, for the cuda devices
// host.devices[first .. first + n). Returns the nvml_note (empty on success).
std::string add_nvml(const std::string& library, HostInfo& host, size_t first, int n) {
  if (library.empty()) return "NVML disabled";
  Nvml nvml;
  if (std::string why = nvml.open(library); !why.empty()) return why;
  unsigned count = 0;
  if (const nvmlReturn_t st = nvml.count(&count); st != kNvmlSuccess) {
    return "NVML: cannot count devices: " + nvml.error(st);
  }

  // NVML numbers GPUs in PCI order, CUDA (by default) fastest first and
  // after CUDA_VISIBLE_DEVICES: match them by PCI address.
  std::vector<PciAddress> address(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) address[i] = parse_bus_id(host.devices[first + i].pci_bus_id);
  int matched = 0;
  const std::vector<nvmlDevice_t> handle = nvml_handles(nvml, count, address, &matched);

  for (int i = 0; i < n; ++i) {
    if (handle[i] == nullptr) continue;
    DeviceInfo& d = host.devices[first + i];
    nvmlUtilization_t util{};
    if (nvml.utilization(handle[i], &util) == kNvmlSuccess) d.utilization_pct = util.gpu;
    nvmlMemory_t mem{};
    if (nvml.memory(handle[i], &mem) == kNvmlSuccess) d.memory_used_bytes = mem.used;
    unsigned mw = 0;
    if (nvml.power_mw(handle[i], &mw) == kNvmlSuccess) d.power_w = mw / 1000.0;
  }

  // NVLinks: count the active links from each GPU to each other GPU; links
  // to an NVSwitch reach every GPU on the switch fabric.
  std::vector<std::vector<int>> direct(n, std::vector<int>(n, 0));
  std::vector<int> to_switch(n, 0);
  for (int i = 0; i < n; ++i) {
    if (handle[i] == nullptr) continue;
    for (unsigned link = 0; link < kNvmlNvLinkMaxLinks; ++link) {
      int active = 0;  // nvmlEnableState_t: NVML_FEATURE_ENABLED = 1
      if (nvml.nvlink_state(handle[i], link, &active) != kNvmlSuccess || active != 1) continue;
      unsigned remote = kNvLinkRemoteGpu;
      if (nvml.nvlink_remote_type != nullptr &&
          nvml.nvlink_remote_type(handle[i], link, &remote) != kNvmlSuccess) {
        continue;
      }
      if (remote == kNvLinkRemoteSwitch) {
        ++to_switch[i];
        continue;
      }
      if (remote != kNvLinkRemoteGpu) continue;
      nvmlPciInfo_t pci{};
      if (nvml.nvlink_remote_pci(handle[i], link, &pci) != kNvmlSuccess) continue;
      const PciAddress a{pci.domain, pci.bus, pci.device, true};
      for (int j = 0; j < n; ++j) {
        if (j != i && address[j] == a) ++direct[i][j];
      }
    }
  }

  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j || handle[i] == nullptr || handle[j] == nullptr) continue;
      GpuLink& l = host.gpu_links[i][j];
      l.nvlinks = direct[i][j];
      if (to_switch[i] > 0 && to_switch[j] > 0) l.nvlinks += std::min(to_switch[i], to_switch[j]);
      if (l.nvlinks > 0) {
        l.type = "NV" + std::to_string(l.nvlinks);
        continue;
      }
      int level = -1;
      if (nvml.common_ancestor(handle[i], handle[j], &level) == kNvmlSuccess) {
        l.type = topology_class(level);
      }
    }
  }
  if (matched < n) {
    return "NVML matched " + std::to_string(matched) + " of " + std::to_string(n) +
           " CUDA devices by PCI address; the others have no NVML fields";
  }
  return {};
}

}  // namespace

std::string default_cuda_library(const std::string& exe_path) {
  namespace fs = std::filesystem;
  return (fs::path(exe_path).parent_path() / ".." / "lib" / "baton" / "baton_cuda.so")
      .lexically_normal()
      .string();
}

void probe_gpus(const ProbeOptions& options, HostInfo& host) {
  host.gpu_note.clear();
  host.nvml_note.clear();
  host.gpu_links.clear();

  // Without the driver's libcuda nothing below can find a GPU; say that
  // first, as it is the usual reason.
  std::vector<std::string> why;
  if (void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL); driver != nullptr) {
    dlclose(driver);
  } else {
    why.push_back("no NVIDIA driver found");
  }

  if (options.cuda_library.empty()) {
    why.push_back("GPU probing disabled (no CUDA backend library given)");
  } else if (!std::filesystem::exists(options.cuda_library)) {
    why.push_back("CUDA backend library not found at " + options.cuda_library +
                  " (built without CUDA?)");
  }
  // Every reason that applies goes into the note; the backend is loaded
  // only when nothing already rules GPUs out.
  void* lib = nullptr;
  if (why.empty()) {
    // Stays loaded for the life of the process: the CUDA runtime inside it
    // keeps state that must not be unmapped while the process runs on.
    lib = dlopen(options.cuda_library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      why.push_back("cannot load the CUDA backend " + options.cuda_library + ": " +
                    (e != nullptr ? e : "unknown error"));
    }
  }
  CudaBackend cuda;
  if (lib != nullptr && !(resolve(lib, "baton_cuda_device_count_status", cuda.count_status) &&
                          resolve(lib, "baton_cuda_error_string", cuda.error_string) &&
                          resolve(lib, "baton_cuda_describe_device", cuda.describe) &&
                          resolve(lib, "baton_cuda_can_access_peer", cuda.can_access_peer))) {
    why.push_back("the CUDA backend " + options.cuda_library +
                  " is from another version of baton (a function is missing)");
    lib = nullptr;
  }

  int n = 0;
  if (lib != nullptr) {
    if (const int st = cuda.count_status(&n); st != 0) {
      why.push_back("CUDA: " + cuda.error(st));
      n = 0;
    } else if (n == 0) {
      why.push_back("no CUDA device visible");
    }
  }

  const size_t first = host.devices.size();
  for (int i = 0; i < n; ++i) {
    std::array<char, 256> name{};
    std::array<char, 32> bus{};
    unsigned long long mem = 0;
    DeviceInfo d;
    const int st =
        cuda.describe(i, name.data(), static_cast<int>(name.size()), &mem, &d.sm_count,
                      &d.compute_major, &d.compute_minor, bus.data(), static_cast<int>(bus.size()));
    if (st != 0) {
      why.push_back("CUDA device " + std::to_string(i) + ": " + cuda.error(st));
      break;
    }
    d.kind = "cuda";
    d.index = i;
    d.name = "cuda:" + std::to_string(i);
    d.model = name.data();
    d.memory_bytes = mem;
    d.pci_bus_id = bus.data();
    d.numa_node = pci_numa_node(parse_bus_id(d.pci_bus_id));
    host.devices.push_back(std::move(d));
  }
  n = static_cast<int>(host.devices.size() - first);

  if (n == 0) {
    std::string note;
    for (const auto& w : why) note += (note.empty() ? "" : "; ") + w;
    host.gpu_note = note.empty() ? "no GPU found" : note;
    return;
  }
  if (!why.empty()) host.gpu_note = why.front();  // some devices listed, a later one failed

  host.gpu_links.assign(n, std::vector<GpuLink>(n));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      GpuLink& l = host.gpu_links[i][j];
      if (i == j) {
        l.type = "X";
        l.p2p = true;
        continue;
      }
      int can = 0;
      l.p2p = cuda.can_access_peer(i, j, &can) == 0 && can == 1;
    }
  }
  host.nvml_note = add_nvml(options.nvml_library, host, first, n);
}

struct GpuMonitor::Impl {
  Nvml nvml;
  std::vector<nvmlDevice_t> handle;
  std::string note;
};

GpuMonitor::GpuMonitor(const std::vector<std::string>& pci_bus_ids, const std::string& nvml_library)
    : impl_(std::make_unique<Impl>()) {
  impl_->handle.assign(pci_bus_ids.size(), nullptr);
  if (std::string why = impl_->nvml.open(nvml_library); !why.empty()) {
    impl_->note = why;
    return;
  }
  unsigned count = 0;
  if (const nvmlReturn_t st = impl_->nvml.count(&count); st != kNvmlSuccess) {
    impl_->note = "NVML: cannot count devices: " + impl_->nvml.error(st);
    return;
  }
  std::vector<PciAddress> address;
  for (const std::string& id : pci_bus_ids) address.push_back(parse_bus_id(id));
  int matched = 0;
  impl_->handle = nvml_handles(impl_->nvml, count, address, &matched);
  if (matched < static_cast<int>(pci_bus_ids.size())) {
    impl_->note = "NVML lists " + std::to_string(matched) + " of the run's " +
                  std::to_string(pci_bus_ids.size()) + " GPUs (by PCI address)";
  }
}

GpuMonitor::~GpuMonitor() = default;

const std::string& GpuMonitor::note() const { return impl_->note; }

GpuMonitor::State GpuMonitor::sample(size_t gpu) const {
  State s;
  if (gpu >= impl_->handle.size() || impl_->handle[gpu] == nullptr) return s;
  const Nvml& nvml = impl_->nvml;
  const nvmlDevice_t h = impl_->handle[gpu];
  nvmlUtilization_t util{};
  if (nvml.utilization(h, &util) == kNvmlSuccess) s.utilization_pct = util.gpu;
  nvmlMemory_t mem{};
  if (nvml.memory(h, &mem) == kNvmlSuccess) {
    s.memory_used_mib = static_cast<double>(mem.used) / (1 << 20);
    s.memory_total_mib = static_cast<double>(mem.total) / (1 << 20);
  }
  unsigned mw = 0;
  if (nvml.power_mw(h, &mw) == kNvmlSuccess) s.power_w = mw / 1000.0;
  unsigned celsius = 0;  // NVML_TEMPERATURE_GPU = 0
  if (nvml.temperature != nullptr && nvml.temperature(h, 0, &celsius) == kNvmlSuccess) {
    s.temperature_c = celsius;
  }
  return s;
}

}  // namespace baton
