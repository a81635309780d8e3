// Device events while a run trains on GPUs (trainer.h): one per GPU every
// train.device_sample_s seconds. On a GPU NVML gives utilisation, memory,
// power and temperature (the GPUs found by PCI address once, at the
// start); on the emulator, or a GPU NVML does not list, the CUDA
// runtime's memory figures are what is known.
#include <baton/discovery/discovery.h>
#include <baton/train/trainer.h>

#include "trainer_internal.h"

namespace baton {

void Trainer::plan_device_samples(const std::string& gpu_library, const std::vector<int>& gpus) {
  if (!on_gpus() || cfg_.device_sample_s <= 0) return;
  if (device_name_.rfind("gpu_emulated:", 0) == 0) return;  // no NVML: the runtime's figures
  HostInfo host;
  ProbeOptions probe;
  probe.cuda_library = gpu_library;
  probe.nvml_library.clear();  // the PCI addresses only
  probe_gpus(probe, host);
  std::vector<std::string> ids;
  for (const int g : gpus) {
    std::string id;
    for (const DeviceInfo& d : host.devices) {
      if (d.kind == "cuda" && d.index == g) id = d.pci_bus_id;
    }
    ids.push_back(id);
  }
  gpu_monitor_ = std::make_unique<GpuMonitor>(ids);
  if (!gpu_monitor_->note().empty()) {
    device_note_ += "; device samples: " + gpu_monitor_->note() +
                    " (utilisation, power and temperature not known)";
  }
}

void Trainer::sample_devices(int64_t step, bool force) {
  if (!on_gpus() || cfg_.device_sample_s <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && device_sampled_ &&
      std::chrono::duration<double>(now - last_device_sample_).count() < cfg_.device_sample_s) {
    return;
  }
  last_device_sample_ = now;
  device_sampled_ = true;
  const std::vector<std::string> names = strategy_->devices();
  for (size_t r = 0; r < devices_.size(); ++r) {
    DeviceEvent e;
    e.run = opt_.run_id;
    e.step = step;
    // The GPU's own name: a task's ("worker:0/gpu:0", parameter_server's)
    // less its task.
    e.device = r < names.size() ? names[r] : device_name_;
    e.device = e.device.substr(e.device.rfind('/') + 1);
    e.emulated = e.device.rfind("gpu_emulated:", 0) == 0;
    if (gpu_monitor_) {
      const GpuMonitor::State st = gpu_monitor_->sample(r);
      e.utilization_pct = st.utilization_pct;
      e.memory_used_mib = st.memory_used_mib;
      e.memory_total_mib = st.memory_total_mib;
      e.power_w = st.power_w;
      e.temperature_c = st.temperature_c;
    }
    if (e.memory_total_mib < 0) {
      constexpr double kMiB = 1 << 20;
      const double total = static_cast<double>(devices_[r]->total_memory_bytes()) / kMiB;
      e.memory_total_mib = total;
      e.memory_used_mib = total - static_cast<double>(devices_[r]->free_memory_bytes()) / kMiB;
    }
    emit(e);
  }
}

}  // namespace baton
