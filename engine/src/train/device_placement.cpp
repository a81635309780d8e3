#include "device_placement.h"

#include <baton/core/error.h>
#include <baton/nn/gpu_library.h>

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

}  // namespace

Placement place_replicas(const RunConfig& cfg, const std::string& gpu_library_dir) {
  const StrategyConfig& s = cfg.strategy;
  const std::string key = cfg.file + ": strategy.devices: ";
  Placement p;
  if (s.devices == "cpu:0") {
    p.why = "strategy.devices asks for the CPU";
  } else if (s.type != "one_device") {
    // "auto" (the parser refuses GPU names here): the CPU, and whether a
    // GPU was passed over.
    const GpuPick g = pick(gpu_library_dir, emulation_asked());
    p.why = g.devices > 0 ? s.type + " trains on the CPU in this version, though this machine has " +
                                std::to_string(g.devices) +
                                " GPU(s): GPUs serve one_device until the other strategies "
                                "run over NCCL"
                          : "auto: " + g.why;
  } else {
    const bool auto_pick = s.devices == "auto";
    const bool emulated = s.devices.rfind("gpu_emulated:", 0) == 0 || emulation_asked();
    const int index = auto_pick ? 0 : std::stoi(s.devices.substr(s.devices.find(':') + 1));
    const GpuPick g = pick(gpu_library_dir, emulated);
    if (g.library.empty()) {
      if (!auto_pick) throw InputError(key + "\"" + s.devices + "\" was asked for, but " + g.why);
      p.why = "auto: " + g.why;
    } else {
      if (index >= g.devices) {
        throw InputError(key + "\"" + s.devices + "\" was asked for, and this machine has " +
                         std::to_string(g.devices) + (emulated ? " emulated" : "") +
                         " GPU(s) (gpu:0 to gpu:" + std::to_string(g.devices - 1) + ")");
      }
      p.device = (emulated ? "gpu_emulated:" : "gpu:") + std::to_string(index);
      p.why = (auto_pick ? "auto: " : "strategy.devices: ") + g.why;
      p.backend = GpuLibrary(g.library).open(index, cfg.precision);
    }
  }
  if (!p.backend && cfg.precision != "fp32") {
    throw InputError(cfg.file + ": train.precision: \"" + cfg.precision +
                     "\" is a GPU's; this run trains on the CPU (" + p.why +
                     "), which computes in fp32: use \"fp32\" or a GPU device");
  }
  p.why = p.device + (p.backend ? " in " + cfg.precision : std::string()) + ": " + p.why;
  return p;
}

}  // namespace baton
