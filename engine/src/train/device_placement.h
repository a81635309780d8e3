// Where a run's replicas compute, chosen from strategy.devices as
// tf.distribute does it (private to train/): "auto" takes a GPU when this
// machine has one and the strategy can use it, else the CPU; "cpu:0" the
// CPU; "gpu:N" the CUDA backend on GPU N (baton_cuda.so); "gpu_emulated:N"
// the same backend on the GPU emulator (baton_cuda_emu.so, or any GPU name
// with BATON_CUDA_EMULATE=1). What was chosen is said with why, for the
// run log, the summary and the history record.
#pragma once

#include <baton/nn/device_backend.h>
#include <baton/train/run_config.h>

#include <memory>
#include <string>

namespace baton {

struct Placement {
  std::string device = "cpu:0";  // "cpu:0", "gpu:N" or "gpu_emulated:N"
  std::string why;               // what was chosen, and why
  std::shared_ptr<DeviceBackend> backend;  // null: the CPU
};

// Resolves cfg.strategy.devices with the CUDA backends in `gpu_library_dir`
// ("" : none looked for). InputError naming the key (in cfg.file) when the
// config asks for a GPU this machine cannot give, or for a precision the
// chosen device does not compute in; RuntimeError when the device fails
// to open.
Placement place_replicas(const RunConfig& cfg, const std::string& gpu_library_dir);

}  // namespace baton
