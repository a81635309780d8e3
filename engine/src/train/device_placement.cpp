#include "device_placement.h"

#include <baton/comm/mpi.h>
#include <baton/core/error.h>
#include <baton/nn/gpu_library.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace baton {

namespace {

bool emulation_asked() {
  const char* v = std::getenv("BATON_CUDA_EMULATE");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

GpuPick pick(const std::string& dir, bool emulate) {
  if (dir.empty()) {
    GpuPick none;
    none.why = "no CUDA backend was looked for (no library folder given)";
    return none;
  }
  return pick_gpu_library(dir, emulate);
}

int index_of(const std::string& name) { return std::stoi(name.substr(name.find(':') + 1)); }

// multi_worker_mirrored's and parameter_server's "gpu" / "gpu_emulated":
// this rank on the GPU of its place on its host, as Horovod and torchrun
// pick it (LOCAL_RANK). A parameter server's ranks come last, so its
// workers' local ranks are the first of each host's.
void place_worker_on_gpu(const RunConfig& cfg, const std::string& gpu_library_dir,
                         const RankRole& role, ReplicaPlacement& p) {
  const StrategyConfig& s = cfg.strategy;
  const bool emulated = s.devices == "gpu_emulated" || emulation_asked();
  const GpuPick g = pick(gpu_library_dir, emulated);
  const std::string key = cfg.file + ": strategy.devices: ";
  if (g.library.empty())
    throw InputError(key + "\"" + s.devices + "\" was asked for, but " + g.why);
  if (s.replicas > 1) {
    throw InputError(cfg.file + ": strategy.replicas_per_worker: is " + std::to_string(s.replicas) +
                     ", and on GPUs each worker is one rank on one GPU (NCCL runs one rank per "
                     "device): remove it, and start one process per GPU");
  }
  const bool outside = role.outside_worker >= 0;
  const int local =
      outside ? role.outside_worker % g.devices : std::max(0, MpiRuntime::launcher_local_rank());
  const std::string kind = emulated ? "gpu_emulated:" : "gpu:";
  if (local >= g.devices) {
    throw InputError(key + "\"" + s.devices + "\": this rank is number " + std::to_string(local) +
                     " on its host and takes " + kind + std::to_string(local) +
                     ", and its host has " + std::to_string(g.devices) +
                     (emulated ? " emulated" : "") +
                     " GPU(s): start at most one rank per GPU on each host");
  }
  p.device = kind + std::to_string(local);
  p.backends.push_back(GpuLibrary(g.library).open(local, cfg.precision));
  p.gpus = {local};
  p.library = g.library;
  p.why = "strategy.devices \"" + s.devices + "\": " +
          (outside ? "worker " + std::to_string(role.outside_worker) +
                         " (outside the MPI job) on its index modulo the host's " +
                         std::to_string(g.devices) + " GPU(s) (" + std::to_string(local) + ")"
                   : "the rank's GPU by its place on its host (" + std::to_string(local) + ")") +
          ": " + g.why;
}

}  // namespace

ReplicaPlacement place_replicas(const RunConfig& cfg, const std::string& gpu_library_dir,
                                const RankRole& role) {
  const StrategyConfig& s = cfg.strategy;
  const std::string key = cfg.file + ": strategy.devices: ";
  const bool gpu_strategy =
      s.type == "one_device" || s.type == "mirrored" || s.type == "central_storage";
  ReplicaPlacement p;
  // The GPUs asked for by name (one_device's one, mirrored's and
  // central_storage's list), or
  // none (auto, cpu).
  std::vector<std::string> named = s.gpus;
  if (s.type == "one_device" && s.devices != "auto" && s.devices != "cpu:0") named = {s.devices};
  const bool ranks = s.type == "multi_worker_mirrored" || s.type == "parameter_server";
  if (s.devices == "cpu:0") {
    p.why = "strategy.devices asks for the CPU";
  } else if (role.server && s.devices != "auto") {
    p.why = "a parameter server keeps its shard and its optimizer in host memory";
  } else if (ranks && s.devices != "auto") {
    place_worker_on_gpu(cfg, gpu_library_dir, role, p);
  } else if (!gpu_strategy) {
    // "auto" (the parser refuses GPU names here): the CPU, and whether a
    // GPU was passed over.
    const GpuPick g = pick(gpu_library_dir, emulation_asked());
    p.why = g.devices > 0
                ? "auto: " + s.type +
                      " trains on the CPU unless strategy.devices is \"gpu\" (one " +
                      (s.type == "parameter_server" ? "worker" : "rank") +
                      " per GPU), though this machine has " + std::to_string(g.devices) + " GPU(s)"
                : "auto: " + g.why;
  } else {
    const bool auto_pick = named.empty();
    const bool emulated =
        (!auto_pick && named[0].rfind("gpu_emulated:", 0) == 0) || emulation_asked();
    const GpuPick g = pick(gpu_library_dir, emulated);
    if (g.library.empty()) {
      if (!auto_pick) throw InputError(key + "\"" + named[0] + "\" was asked for, but " + g.why);
      p.why = "auto: " + g.why;
    } else if (auto_pick && s.type != "one_device" && s.replicas_given && s.replicas > g.devices) {
      p.why = "auto: strategy.replicas asks for " + std::to_string(s.replicas) +
              " replicas and this machine has " + std::to_string(g.devices) +
              (g.emulated ? " emulated" : "") +
              " GPU(s) (one replica each): the replicas train on the CPU";
    } else {
      // auto: one_device the first GPU; mirrored and central_storage every
      // GPU, or their strategy.replicas first ones.
      std::vector<int> gpus;
      if (auto_pick) {
        const int n = s.type == "one_device" ? 1 : s.replicas_given ? s.replicas : g.devices;
        for (int i = 0; i < n; ++i) gpus.push_back(i);
      } else {
        for (const std::string& name : named) gpus.push_back(index_of(name));
      }
      const std::string kind = emulated ? "gpu_emulated:" : "gpu:";
      for (const int index : gpus) {
        if (index >= g.devices) {
          throw InputError(key + "\"" + kind + std::to_string(index) +
                           "\" was asked for, and this machine has " + std::to_string(g.devices) +
                           (emulated ? " emulated" : "") + " GPU(s) (" + kind + "0 to " + kind +
                           std::to_string(g.devices - 1) + ")");
        }
      }
      const GpuLibrary lib(g.library);
      p.device.clear();
      for (const int index : gpus) {
        p.device += (p.device.empty() ? "" : ",") +
                    std::string(emulated ? "gpu_emulated:" : "gpu:") + std::to_string(index);
        p.backends.push_back(lib.open(index, cfg.precision));
      }
      p.gpus = gpus;
      p.library = g.library;
      p.why = (auto_pick ? "auto: " : "strategy.devices: ") + g.why;
    }
  }
  // The allreduce's backend, when given, must fit where it runs.
  const bool multi = s.type == "multi_worker_mirrored";
  if ((s.type == "mirrored" || multi) && !s.backend.empty() &&
      (s.backend == "nccl") != !p.backends.empty()) {
    const std::string host = multi ? "mpi" : "local";
    throw InputError(
        cfg.file + ": strategy.allreduce.backend: \"" + s.backend + "\" " +
        (p.backends.empty()
             ? "sums over NCCL between GPUs, and this run's replicas are on the CPU (" + p.why +
                   "): use \"" + host + "\", or " +
                   (multi ? "strategy.devices \"gpu\"" : "list GPUs in strategy.devices")
             : "sums host memory, and this run's replicas are on GPUs (" + p.device + "), which " +
                   s.type + " sums over NCCL: use \"nccl\", or strategy.devices \"cpu\""));
  }
  if (p.backends.empty() && cfg.precision != "fp32") {
    throw InputError(cfg.file + ": train.precision: \"" + cfg.precision +
                     "\" is a GPU's; this run trains on the CPU (" + p.why +
                     "), which computes in fp32: use \"fp32\" or a GPU device");
  }
  p.why = p.device + (p.backends.empty() ? std::string() : " in " + cfg.precision) + ": " + p.why;
  return p;
}

}  // namespace baton
