#include "probe_command.h"

#include <baton/comm/mpi.h>
#include <baton/core/error.h>
#include <baton/discovery/discovery.h>
#include <baton/discovery/remote_probe.h>

#include <cstdio>
#include <string>
#include <vector>

namespace baton::cli {
namespace {

// ---- the readable summary ----

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

// "cpu:0 .. cpu:63 (NUMA 0), cpu:64 .. cpu:127 (NUMA 1)": runs of
// consecutive cpu devices on one NUMA node.
std::string cpu_ranges(const HostInfo& h, bool with_numa) {
  std::string out;
  const DeviceInfo* start = nullptr;
  const DeviceInfo* prev = nullptr;
  auto flush = [&] {
    if (start == nullptr) return;
    if (!out.empty()) out += ", ";
    out += start->name;
    if (prev != start) out += " .. " + prev->name;
    if (with_numa && start->numa_node >= 0)
      out += " (NUMA " + std::to_string(start->numa_node) + ")";
  };
  for (const auto& d : h.devices) {
    if (d.kind != "cpu") continue;
    if (start != nullptr && with_numa && d.numa_node != start->numa_node) {
      flush();
      start = nullptr;
    }
    if (start == nullptr) start = &d;
    prev = &d;
  }
  flush();
  return out;
}

void print_summary(std::FILE* out, const HostInfo& h) {
  std::fprintf(out, "host        %s\n", h.hostname.c_str());
  std::fprintf(out, "cpu         %s (%d package%s)\n", h.cpu_model.c_str(), h.packages,
               h.packages == 1 ? "" : "s");
  std::fprintf(out, "cores       %d physical, %d hardware threads\n", h.cores, h.threads);
  std::fprintf(out, "numa nodes  %d\n", h.numa_nodes);
  std::fprintf(out, "memory      %s\n", gib(h.memory_bytes).c_str());
  std::fprintf(out, "devices     %s (one per physical core)\n",
               cpu_ranges(h, h.numa_nodes > 1).c_str());

  const int gpus = h.gpu_count();
  if (gpus == 0) {
    std::fprintf(out, "GPUs        none (%s)\n",
                 h.gpu_note.empty() ? "none found" : h.gpu_note.c_str());
    return;
  }
  std::fprintf(out, "GPUs        %d\n", gpus);
  std::vector<std::string> names;
  for (const auto& d : h.devices) {
    if (d.kind != "cuda") continue;
    names.push_back(d.name);
    std::fprintf(out, "  %-9s %s, %s, %d SMs, compute %d.%d, PCI %s", d.name.c_str(),
                 d.model.c_str(), gib(d.memory_bytes).c_str(), d.sm_count, d.compute_major,
                 d.compute_minor, d.pci_bus_id.c_str());
    if (d.numa_node >= 0) std::fprintf(out, ", NUMA %d", d.numa_node);
    std::fprintf(out, "\n");
    std::string live;
    if (d.utilization_pct) live += "utilisation " + std::to_string(*d.utilization_pct) + "%";
    if (d.memory_used_bytes)
      live += (live.empty() ? "" : ", ") + ("memory used " + gib(*d.memory_used_bytes));
    if (d.power_w) {
      char w[32];
      std::snprintf(w, sizeof(w), "power %.0f W", *d.power_w);
      live += (live.empty() ? "" : ", ") + std::string(w);
    }
    if (!live.empty()) std::fprintf(out, "            %s\n", live.c_str());
  }
  if (!h.gpu_note.empty()) std::fprintf(out, "note        %s\n", h.gpu_note.c_str());
  if (gpus > 1 && static_cast<int>(h.gpu_links.size()) == gpus) {
    std::fprintf(out, "links       nvidia-smi topo -m classes; * = no peer access (P2P)\n");
    auto print_row = [out](std::string row) {
      while (!row.empty() && row.back() == ' ') row.pop_back();
      std::fprintf(out, "%s\n", row.c_str());
    };
    auto pad = [](std::string cell, size_t width) {
      if (cell.size() < width) cell.resize(width, ' ');
      return cell;
    };
    std::string header = pad("", 11);
    for (const auto& n : names) header += " " + pad(n, 8);
    print_row(header);
    for (int i = 0; i < gpus; ++i) {
      std::string row = "  " + pad(names[i], 9);
      for (int j = 0; j < gpus; ++j) {
        const GpuLink& l = h.gpu_links[i][j];
        std::string cell = l.type.empty() ? "?" : l.type;
        if (i != j && !l.p2p) cell += "*";
        row += " " + pad(cell, 8);
      }
      print_row(row);
    }
  }
  if (!h.nvml_note.empty()) std::fprintf(out, "nvml        %s\n", h.nvml_note.c_str());
}

}  // namespace

void add_probe_command(CLI::App& app, ProbeArgs& a) {
  CLI::App* probe = app.add_subcommand(
      "probe", "Show this machine's cores, NUMA nodes, memory and GPUs (or every cluster host's)");
  probe->add_flag("--json", a.json, "Print the probe as JSON");
  auto* hosts = probe->add_option(
      "--hosts", a.hosts,
      "Probe these hosts (comma-separated) through mpirun, one process each; baton must be "
      "installed at the same path on each");
  auto* hostfile = probe->add_option("--hostfile", a.hostfile,
                                     "Probe every node of this Open MPI hostfile through mpirun");
  hosts->excludes(hostfile);
  probe
      ->add_option("--timeout", a.timeout_s,
                   "With --hosts/--hostfile: stop mpirun after this many seconds (an unreachable "
                   "host makes ssh wait)")
      ->capture_default_str();
  probe->add_flag("--single-line", a.single_line, "One compact JSON line (for mpirun's children)")
      ->group("");
}

int run_probe(const ProbeArgs& a, const std::string& exe_path) {
  std::vector<HostInfo> hosts;
  const bool cluster = !a.hosts.empty() || !a.hostfile.empty();
  if (cluster) {
    hosts = probe_remote_hosts(RemoteProbe{a.hosts, a.hostfile, exe_path, a.timeout_s});
  } else {
    ProbeOptions opt;
    opt.cuda_library = default_cuda_library(exe_path);
    hosts.push_back(probe_local_host(opt));
  }

  if (a.json || a.single_line) {
    nlohmann::json doc;
    if (cluster) {
      doc = {{"hosts", nlohmann::json::array()}};
      for (const auto& h : hosts) doc["hosts"].push_back(to_json(h));
    } else {
      doc = to_json(hosts.front());
      if (a.single_line && MpiRuntime::launcher_rank() >= 0)
        doc["rank"] = MpiRuntime::launcher_rank();
    }
    // Names from the system need not be valid UTF-8: replace, don't throw.
    const auto replace = nlohmann::json::error_handler_t::replace;
    const std::string text =
        a.single_line ? doc.dump(-1, ' ', false, replace) : doc.dump(2, ' ', false, replace);
    std::fputs(text.c_str(), stdout);
    std::fputc('\n', stdout);
    return 0;
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (i > 0) std::fputc('\n', stdout);
    print_summary(stdout, hosts[i]);
  }
  return 0;
}

}  // namespace baton::cli
