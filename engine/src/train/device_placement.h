// Where a run's replicas compute, chosen from strategy.devices as
// tf.distribute does it (private to train/): "auto" takes the GPUs when
// this machine has them and the strategy can use them (one_device the
// first, mirrored all of them, or strategy.replicas of them), else the
// CPU; "cpu:0" the CPU; "gpu:N" the CUDA backend on GPU N (baton_cuda.so);
// "gpu_emulated:N" the same backend on the GPU emulator (baton_cuda_emu.so,
// or any GPU name with BATON_CUDA_EMULATE=1); mirrored's list of GPUs one
// replica on each (central_storage's too); multi_worker_mirrored's and
// parameter_server's "gpu" / "gpu_emulated" this rank on the GPU of its
// place on its host (the launcher's local rank; a parameter server stays
// on the CPU). What was chosen is said with why, for the run log, the
// summary and the history record.
#pragma once

#include <baton/nn/device_backend.h>
#include <baton/train/run_config.h>

#include <memory>
#include <string>
#include <vector>

namespace baton {

struct ReplicaPlacement {
  // "cpu:0", "gpu:N" or "gpu_emulated:N"; several GPUs: "gpu:0,gpu:1".
  std::string device = "cpu:0";
  std::string why;  // what was chosen, and why
  // One per local replica on GPUs (the GPU of replica r); empty: the CPU.
  std::vector<std::shared_ptr<DeviceBackend>> backends;
  std::vector<int> gpus;  // their device indices
  std::string library;    // the CUDA backend library they came from (NCCL's too)
};

// A process's part in a parameter_server job, known from its strategy
// before its devices are chosen.
struct RankRole {
  bool server = false;  // a parameter server: host memory, no GPU
  // A worker outside the MPI job (baton launch's TCP workers, each started
  // alone): its worker index, which picks its GPU (index mod the host's
  // GPUs); -1: the launcher's local rank does.
  int outside_worker = -1;
};

// Resolves cfg.strategy.devices with the CUDA backends in `gpu_library_dir`
// ("" : none looked for). InputError naming the key (in cfg.file) when the
// config asks for a GPU this machine cannot give, or for a precision the
// chosen device does not compute in; RuntimeError when a device fails to
// open.
ReplicaPlacement place_replicas(const RunConfig& cfg, const std::string& gpu_library_dir,
                                const RankRole& role = {});

}  // namespace baton
