// What one machine offers for training: its CPU (through hwloc), its CUDA
// devices (through the CUDA backend library, loaded with dlopen) and, when
// the NVIDIA driver's NVML is there, the GPUs' live state and the links
// between them. `baton probe` prints it; a strategy picks its devices by the
// names here ("cpu:3", "cuda:0").
//
// Probing never fails for want of a GPU: a machine without one gets no
// cuda:* devices and a gpu_note that says why. Errors (hwloc cannot read the
// topology) are RuntimeError.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace baton {

struct DeviceInfo {
  std::string name;    // "cpu:<i>" or "cuda:<i>"
  std::string kind;    // "cpu" or "cuda"
  int index = 0;       // i in the name
  int numa_node = -1;  // OS index of the NUMA node it belongs to; -1 when unknown

  // kind "cpu": one device per physical core; its hardware threads (the OS
  // indices of its PUs, as taskset and /proc/cpuinfo number them).
  std::vector<int> pus;

  // kind "cuda" (the CUDA runtime's numbering, after CUDA_VISIBLE_DEVICES).
  std::string model;          // "NVIDIA H100 80GB HBM3"
  uint64_t memory_bytes = 0;  // total device memory
  int sm_count = 0;
  int compute_major = 0, compute_minor = 0;
  std::string pci_bus_id;  // "0000:3B:00.0", as cudaDeviceGetPCIBusId writes it

  // kind "cuda", from NVML; absent when NVML is not available or the query
  // is not supported on this GPU.
  std::optional<unsigned> utilization_pct;
  std::optional<uint64_t> memory_used_bytes;
  std::optional<double> power_w;
};

// How GPU i reaches GPU j, in `nvidia-smi topo -m` terms.
struct GpuLink {
  // "X" (i == j); "NV<n>" (n NVLinks, directly or through NVSwitch); else
  // the closest common PCIe ancestor: "PIX" (one PCIe switch), "PXB"
  // (several switches), "PHB" (a host bridge), "NODE" (within a NUMA node),
  // "SYS" (across NUMA nodes). Empty when unknown (no NVML).
  std::string type;
  int nvlinks = 0;
  bool p2p = false;  // cudaDeviceCanAccessPeer(i, j); true on the diagonal
};

struct HostInfo {
  std::string hostname;
  std::string cpu_model;  // "unknown" when hwloc and /proc/cpuinfo do not say
  int packages = 0;       // sockets
  int cores = 0;          // physical cores
  int threads = 0;        // hardware threads (PUs)
  int numa_nodes = 0;
  uint64_t memory_bytes = 0;  // RAM in all NUMA nodes
  // cpu:0 .. cpu:<cores-1>, one per physical core, then cuda:0 .. cuda:<n-1>.
  std::vector<DeviceInfo> devices;
  std::string gpu_note;   // why there are no cuda:* devices ("no NVIDIA driver found", ...)
  std::string nvml_note;  // why GPU utilisation/power/link types are absent
  // gpu_links[i][j] over the cuda devices, in their order; empty without GPUs.
  std::vector<std::vector<GpuLink>> gpu_links;

  int gpu_count() const;
  int cpu_count() const;
};

struct ProbeOptions {
  // The CUDA backend library (baton_cuda.so). Empty: GPUs are not probed
  // and gpu_note says so.
  std::string cuda_library;
  // NVML, opened with dlopen. Empty: not used (nvml_note says so).
  std::string nvml_library = "libnvidia-ml.so.1";
};

// The CUDA backend next to an executable at `exe_path`:
// <exe dir>/../lib/baton/baton_cuda.so (same in the build tree and when
// installed).
std::string default_cuda_library(const std::string& exe_path);

// CPU side: hostname, CPU model, cores, threads, NUMA nodes, memory and the
// cpu:* devices. RuntimeError when hwloc cannot read the topology.
HostInfo probe_cpus();

// A /proc/meminfo figure in bytes ("MemTotal:", "MemAvailable:"); 0 when
// it cannot be read.
uint64_t meminfo_bytes(const std::string& key);
// GPU side: appends the cuda:* devices to `host` and fills gpu_links,
// gpu_note and nvml_note. Never throws for a missing library or driver.
void probe_gpus(const ProbeOptions& options, HostInfo& host);
// Both.
HostInfo probe_local_host(const ProbeOptions& options);

// A run's GPUs watched while it trains (device events): NVML opened once
// (dlopen), each GPU found by its PCI address. Never throws: without NVML,
// or for a GPU it does not list, note() says why and sample() gives what
// it can (-1 for a figure not known).
class GpuMonitor {
 public:
  struct State {
    double utilization_pct = -1;  // of NVML's last sample period, a kernel running
    double memory_used_mib = -1, memory_total_mib = -1;
    double power_w = -1, temperature_c = -1;
  };
  // `pci_bus_ids`: the GPUs, as cudaDeviceGetPCIBusId writes them.
  explicit GpuMonitor(const std::vector<std::string>& pci_bus_ids,
                      const std::string& nvml_library = "libnvidia-ml.so.1");
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;
  State sample(size_t gpu) const;
  const std::string& note() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The probe document, version 1 ("v": 1). Optional fields are left out when
// absent.
nlohmann::json to_json(const HostInfo& host);
// Reads a document written by to_json (possibly by another machine's baton).
// RuntimeError naming the key when it is not one.
HostInfo host_info_from_json(const nlohmann::json& doc);

}  // namespace baton
