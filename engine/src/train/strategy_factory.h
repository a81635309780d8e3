// The strategy a run config names, with its communicator and gradient
// options (private to train/: the Trainer builds it).
#pragma once

#include <baton/strategy/strategy.h>
#include <baton/train/run_config.h>

#include <memory>
#include <string>

namespace baton {

// `file` names the config in messages. Throws InputError for a strategy this
// process cannot run (multi_worker_mirrored outside mpirun, no MPI, ...).
// `ps_join`: a parameter_server's workers over TCP (PsJoin); InputError
// when it is set for another strategy. `device`: where one_device's replica
// computes (the placement's: "cpu:0", "gpu:0", ...). `gpus`: mirrored's
// GPUs, one replica each, their NCCL group from `gpu_library` (the CUDA
// backend library the placement opened them with); empty: the CPU.
std::unique_ptr<Strategy> make_strategy(const StrategyConfig& s, const std::string& file,
                                        const PsJoin& ps_join = {},
                                        const std::string& device = "cpu:0",
                                        const std::vector<int>& gpus = {},
                                        const std::string& gpu_library = "");

}  // namespace baton
