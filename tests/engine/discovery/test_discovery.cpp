// Device discovery: the local probe (hwloc), the GPU side's explanations
// when there is no GPU, and the probe document's JSON round trip. The GPU
// checks skip, with the reason, where there is no GPU.
#include <baton/core/error.h>
#include <baton/discovery/discovery.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

namespace {

using baton::DeviceInfo;
using baton::GpuLink;
using baton::HostInfo;
using baton::ProbeOptions;

ProbeOptions with_cuda() {
  ProbeOptions opt;
  opt.cuda_library = BATON_CUDA_LIBRARY;
  return opt;
}

TEST(Discovery, LocalProbeFindsTheCpu) {
  const HostInfo h = baton::probe_local_host(with_cuda());
  EXPECT_FALSE(h.hostname.empty());
  EXPECT_FALSE(h.cpu_model.empty());
  EXPECT_GE(h.cores, 1);
  EXPECT_GE(h.threads, h.cores);
  EXPECT_GE(h.numa_nodes, 1);
  EXPECT_GE(h.packages, 1);
  EXPECT_GT(h.memory_bytes, 0u);
  // Without GPUs, a reason; with them, no leftovers of one.
  if (h.gpu_count() == 0) {
    EXPECT_FALSE(h.gpu_note.empty());
  }
  std::printf("probe: %s, %s, %d cores, %d threads, %d NUMA, %llu bytes, %d GPUs%s%s\n",
              h.hostname.c_str(), h.cpu_model.c_str(), h.cores, h.threads, h.numa_nodes,
              static_cast<unsigned long long>(h.memory_bytes), h.gpu_count(),
              h.gpu_note.empty() ? "" : ": ", h.gpu_note.c_str());
}

// The machine's memory is the kernel's MemTotal, read here independently
// (hwloc's root total reported 5.2 of 23.5 GiB on these VMs).
TEST(Discovery, MemoryIsTheKernelsMemTotal) {
  std::ifstream in("/proc/meminfo");
  if (!in) GTEST_SKIP() << "no /proc/meminfo on this system";
  std::string line;
  unsigned long long kib = 0;
  while (std::getline(in, line)) {
    if (std::sscanf(line.c_str(), "MemTotal: %llu kB", &kib) == 1) break;
  }
  ASSERT_GT(kib, 0u) << "no MemTotal line in /proc/meminfo";
  const HostInfo h = baton::probe_local_host(with_cuda());
  EXPECT_EQ(h.memory_bytes, kib * 1024ull);
}

TEST(Discovery, OneCpuDevicePerCoreNamedInOrder) {
  const HostInfo h = baton::probe_cpus();
  ASSERT_EQ(h.cpu_count(), h.cores);
  ASSERT_EQ(h.devices.size(), static_cast<size_t>(h.cores));  // probe_cpus adds no GPUs
  std::set<int> pus;
  size_t pu_total = 0;
  for (int i = 0; i < h.cores; ++i) {
    const DeviceInfo& d = h.devices[static_cast<size_t>(i)];
    EXPECT_EQ(d.name, "cpu:" + std::to_string(i));
    EXPECT_EQ(d.kind, "cpu");
    EXPECT_EQ(d.index, i);
    EXPECT_FALSE(d.pus.empty()) << d.name << " has no hardware threads";
    pu_total += d.pus.size();
    pus.insert(d.pus.begin(), d.pus.end());
  }
  EXPECT_EQ(pus.size(), pu_total) << "a hardware thread belongs to two cores";
  EXPECT_EQ(static_cast<int>(pu_total), h.threads);
}

TEST(Discovery, MissingCudaLibraryIsExplained) {
  ProbeOptions opt;
  opt.cuda_library = "/nonexistent/lib/baton/baton_cuda.so";
  const HostInfo h = baton::probe_local_host(opt);
  EXPECT_EQ(h.gpu_count(), 0);
  EXPECT_TRUE(h.gpu_links.empty());
  EXPECT_NE(h.gpu_note.find("/nonexistent/lib/baton/baton_cuda.so"), std::string::npos)
      << h.gpu_note;
  EXPECT_GE(h.cores, 1);  // the CPU side is unaffected

  opt.cuda_library.clear();
  const HostInfo none = baton::probe_local_host(opt);
  EXPECT_EQ(none.gpu_count(), 0);
  EXPECT_NE(none.gpu_note.find("disabled"), std::string::npos) << none.gpu_note;
}

TEST(Discovery, DefaultCudaLibraryIsNextToTheExecutable) {
  EXPECT_EQ(baton::default_cuda_library("/opt/baton/bin/baton"),
            "/opt/baton/lib/baton/baton_cuda.so");
  EXPECT_EQ(baton::default_cuda_library("/work/build/bin/baton"),
            "/work/build/lib/baton/baton_cuda.so");
}

HostInfo two_gpu_host() {
  HostInfo h;
  h.hostname = "node7";
  h.cpu_model = "Some CPU";
  h.packages = 2;
  h.cores = 2;
  h.threads = 4;
  h.numa_nodes = 2;
  h.memory_bytes = 1ull << 40;
  for (int i = 0; i < 2; ++i) {
    DeviceInfo d;
    d.kind = "cpu";
    d.index = i;
    d.name = "cpu:" + std::to_string(i);
    d.numa_node = i;
    d.pus = {i, i + 2};
    h.devices.push_back(d);
  }
  for (int i = 0; i < 2; ++i) {
    DeviceInfo d;
    d.kind = "cuda";
    d.index = i;
    d.name = "cuda:" + std::to_string(i);
    d.model = "NVIDIA H100 80GB HBM3";
    d.memory_bytes = 85899345920ull;
    d.sm_count = 132;
    d.compute_major = 9;
    d.compute_minor = 0;
    d.pci_bus_id = i == 0 ? "0000:1B:00.0" : "0000:43:00.0";
    d.numa_node = i;
    if (i == 0) {  // NVML fields on one device only: absent ones stay absent
      d.utilization_pct = 37;
      d.memory_used_bytes = 1234567890ull;
      d.power_w = 312.5;
    }
    h.devices.push_back(d);
  }
  h.gpu_links = {{GpuLink{"X", 0, true}, GpuLink{"NV18", 18, true}},
                 {GpuLink{"NV18", 18, true}, GpuLink{"X", 0, true}}};
  h.nvml_note = "NVML matched 1 of 2 CUDA devices by PCI address; the others have no NVML fields";
  return h;
}

TEST(Discovery, JsonRoundTrip) {
  const HostInfo h = two_gpu_host();
  const nlohmann::json doc = baton::to_json(h);
  EXPECT_EQ(doc["v"], 1);
  EXPECT_EQ(doc["devices"][2]["name"], "cuda:0");
  EXPECT_EQ(doc["gpu_links"][0][1]["type"], "NV18");
  EXPECT_FALSE(doc["devices"][3].contains("power_w"));

  const HostInfo back = baton::host_info_from_json(nlohmann::json::parse(doc.dump()));
  EXPECT_EQ(baton::to_json(back), doc);
  EXPECT_EQ(back.gpu_count(), 2);
  EXPECT_EQ(back.devices[2].utilization_pct, 37u);
  EXPECT_FALSE(back.devices[3].utilization_pct.has_value());
  EXPECT_EQ(back.gpu_links[1][0].nvlinks, 18);

  // And the real thing.
  const nlohmann::json local = baton::to_json(baton::probe_local_host(with_cuda()));
  EXPECT_EQ(baton::to_json(baton::host_info_from_json(local)), local);
}

TEST(Discovery, BadDocumentsAreRefusedWithTheKey) {
  const nlohmann::json good = baton::to_json(two_gpu_host());
  auto refused = [](const nlohmann::json& doc, const std::string& needle) {
    try {
      baton::host_info_from_json(doc);
      ADD_FAILURE() << "accepted: " << doc.dump();
    } catch (const baton::RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  nlohmann::json d = good;
  d.erase("cores");
  refused(d, "cores");
  d = good;
  d["v"] = 2;
  refused(d, "version 2");
  d = good;
  d["threads"] = "four";
  refused(d, "invalid probe document");
  d = good;
  d["gpu_links"].erase(1);
  refused(d, "gpu_links");
  d = good;
  d["devices"][0]["name"] = "cpu:5";
  refused(d, "cpu:5");
  refused(nlohmann::json::array(), "object");
}

// On a machine with a GPU: the devices as the CUDA runtime sees them.
TEST(Discovery, GpusMatchTheCudaRuntime) {
  const std::string lib_path = BATON_CUDA_LIBRARY;
  if (lib_path.empty()) GTEST_SKIP() << "built without CUDA (BATON_WITH_CUDA=OFF)";
  const HostInfo h = baton::probe_local_host(with_cuda());
  if (h.gpu_count() == 0) GTEST_SKIP() << "no GPU here: " << h.gpu_note;

  void* lib = dlopen(lib_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(lib, nullptr) << dlerror();
  auto count = reinterpret_cast<int (*)()>(dlsym(lib, "baton_cuda_device_count"));
  ASSERT_NE(count, nullptr);
  const int n = count();
  EXPECT_EQ(h.gpu_count(), n);

  const size_t first = static_cast<size_t>(h.cores);
  for (int i = 0; i < n; ++i) {
    const DeviceInfo& d = h.devices[first + static_cast<size_t>(i)];
    EXPECT_EQ(d.name, "cuda:" + std::to_string(i));
    EXPECT_FALSE(d.model.empty());
    EXPECT_GT(d.memory_bytes, 0u);
    EXPECT_GT(d.sm_count, 0);
    EXPECT_GE(d.compute_major, 5);
    EXPECT_FALSE(d.pci_bus_id.empty());
    if (h.nvml_note.empty()) {
      EXPECT_TRUE(d.memory_used_bytes.has_value()) << d.name;
      if (d.memory_used_bytes) {
        EXPECT_LE(*d.memory_used_bytes, d.memory_bytes);
      }
      if (d.utilization_pct) {
        EXPECT_LE(*d.utilization_pct, 100u);
      }
    }
    std::printf("%s: %s, %llu bytes, %d SMs, sm_%d%d, %s, NUMA %d%s\n", d.name.c_str(),
                d.model.c_str(), static_cast<unsigned long long>(d.memory_bytes), d.sm_count,
                d.compute_major, d.compute_minor, d.pci_bus_id.c_str(), d.numa_node,
                h.nvml_note.empty() ? "" : (" (" + h.nvml_note + ")").c_str());
  }
  ASSERT_EQ(h.gpu_links.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(h.gpu_links[i].size(), static_cast<size_t>(n));
    EXPECT_EQ(h.gpu_links[i][i].type, "X");
    for (int j = 0; j < n; ++j) {
      if (i == j || !h.nvml_note.empty()) continue;
      EXPECT_FALSE(h.gpu_links[i][j].type.empty()) << i << "->" << j;
      EXPECT_EQ(h.gpu_links[i][j].nvlinks, h.gpu_links[j][i].nvlinks) << i << "<->" << j;
    }
  }

  // Without NVML the devices are still there, the NVML fields are not.
  ProbeOptions no_nvml = with_cuda();
  no_nvml.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  const HostInfo bare = baton::probe_local_host(no_nvml);
  EXPECT_EQ(bare.gpu_count(), n);
  EXPECT_NE(bare.nvml_note.find("NVML not available"), std::string::npos) << bare.nvml_note;
  for (const auto& d : bare.devices) {
    EXPECT_FALSE(d.utilization_pct.has_value());
    EXPECT_FALSE(d.power_w.has_value());
  }
}

}  // namespace
